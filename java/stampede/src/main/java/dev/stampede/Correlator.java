package dev.stampede;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * Delivers correlated sets, one item per input channel, in increasing timestamp order: the
 * items of every input at the same timestamp, or within a distance of the first input's item.
 * It takes its input connections over; closing it detaches them.
 */
public final class Correlator extends Handle {
    /** How the items of a set match. */
    public enum Match {
        /** Every channel has an item with the same timestamp. */
        EXACT,
        /** Every other channel has an item within {@code within} of the first channel's. */
        WITHIN
    }

    private final List<Channel> channels = new ArrayList<>();
    private volatile Waiters waiters;

    /** A correlator over {@code inputs} (taken over: do not use them afterwards). */
    public Correlator(List<ChannelInput> inputs, Match match, long within) {
        super(create(inputs, match, within), Native.CORRELATOR_FREE, "correlator",
                inputs.isEmpty() ? null : inputs.get(0).task.runtime.children,
                Children.CONNECTION);
        for (ChannelInput in : inputs) {
            channels.add(in.container);
        }
    }

    /** A correlator of exactly matching timestamps. */
    public Correlator(List<ChannelInput> inputs) {
        this(inputs, Match.EXACT, 0);
    }

    private static MemorySegment create(List<ChannelInput> inputs, Match match, long within) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment arr = a.allocate(ADDRESS, Math.max(1, inputs.size()));
            for (int i = 0; i < inputs.size(); i++) {
                arr.setAtIndex(ADDRESS, i, inputs.get(i).res.enter());
            }
            MemorySegment out = a.allocate(ADDRESS);
            int s;
            try {
                s = (int) Native.CORRELATOR_NEW.invokeExact(arr, (long) inputs.size(),
                        match.ordinal(), within, out);
            } catch (Throwable t) {
                throw Native.fail(t);
            } finally {
                for (ChannelInput in : inputs) {
                    in.res.leave();
                }
            }
            if (s != Status.INVALID_ARGUMENT.code()) {
                // The C library took the connections over, whatever the outcome.
                for (ChannelInput in : inputs) {
                    in.res.forget();
                }
            }
            Status.check(s);
            return out.get(ADDRESS, 0);
        }
    }

    private Waiters waiters() {
        Waiters w = waiters;
        if (w == null) {
            synchronized (this) {
                w = waiters;
                if (w == null) {
                    Waiters made = new Waiters();
                    List<Subscription> subs = new ArrayList<>();
                    for (Channel c : channels) {
                        subs.add(c.onArrival(made));
                    }
                    made.subscriptions = subs;
                    // Not this::something: what the cleaner runs must not reach the handle.
                    res.beforeFree(made::end);
                    waiters = made;
                    w = made;
                }
            }
        }
        return w;
    }

    /** The next set, waiting as long as it takes. */
    public CorrelatedSet get() throws InterruptedException {
        return get(Waits.FOREVER);
    }

    /** The next set, waiting at most {@code timeout} ({@code null}: forever). */
    public CorrelatedSet get(Duration timeout) throws InterruptedException {
        return get(Waits.millis(timeout));
    }

    private CorrelatedSet get(long timeoutMs) throws InterruptedException {
        MemorySegment p = res.enter();
        try (Frame f = Frame.open()) {
            MemorySegment out = f.mem.asSlice(0, 8);
            Connection.Attempt a = waitMs -> {
                try {
                    return (int) Native.CORRELATOR_GET.invokeExact(p, waitMs, out);
                } catch (Throwable t) {
                    throw Native.fail(t);
                }
            };
            Connection.await(a, timeoutMs,
                    timeoutMs != 0 && Thread.currentThread().isVirtual() ? waiters() : null, res);
            return CorrelatedSet.adopt(out.get(ADDRESS, 0));
        } finally {
            res.leave();
        }
    }

    /** Consumes the set's items on their connections. */
    public void consume(CorrelatedSet set) {
        call(Native.CORRELATOR_CONSUME, set);
    }

    /** Consumes, on every connection, everything up to the set's item there, skipped items
     * too. */
    public void consumeUntil(CorrelatedSet set) {
        call(Native.CORRELATOR_CONSUME_UNTIL, set);
    }

    private void call(java.lang.invoke.MethodHandle h, CorrelatedSet set) {
        MemorySegment p = res.enter();
        MemorySegment s = set.res.enter();
        try {
            Status.check((int) h.invokeExact(p, s));
        } catch (Throwable t) {
            throw Native.fail(t);
        } finally {
            set.res.leave();
            res.leave();
        }
    }

    /** First-channel items skipped so far because they could no longer be matched. */
    public long skipped() {
        MemorySegment p = res.enter();
        try {
            return (long) Native.CORRELATOR_SKIPPED.invokeExact(p);
        } catch (Throwable t) {
            throw Native.fail(t);
        } finally {
            res.leave();
        }
    }

    /** One correlated set: an item per input, in input order. Closing it closes its items. */
    public static final class CorrelatedSet extends Handle {
        private final long ts;
        private final List<Stamped> items;

        private CorrelatedSet(MemorySegment ptr) {
            super(ptr, Native.SET_FREE, "set", null, 0);
            try (Frame f = Frame.open()) {
                ts = (long) Native.SET_TS.invokeExact(ptr);
                long n = (long) Native.SET_LEN.invokeExact(ptr);
                List<Stamped> list = new ArrayList<>();
                for (long i = 0; i < n; i++) {
                    Status.check((int) Native.SET_ITEM.invokeExact(ptr, i, f.mem.asSlice(0, 8),
                            f.mem.asSlice(8, 8)));
                    list.add(new Stamped(f.mem.get(JAVA_LONG, 0),
                            Item.adopt(f.mem.get(ADDRESS, 8))));
                }
                items = List.copyOf(list);
            } catch (Throwable t) {
                throw Native.fail(t);
            }
        }

        static CorrelatedSet adopt(MemorySegment ptr) {
            return new CorrelatedSet(ptr);
        }

        /** The set's timestamp: its first input's item's. */
        public long ts() {
            return ts;
        }

        /** The items, one per input, in input order. */
        public List<Stamped> items() {
            return items;
        }

        @Override
        public void close() {
            for (Stamped s : items) {
                s.close();
            }
            super.close();
        }
    }
}
