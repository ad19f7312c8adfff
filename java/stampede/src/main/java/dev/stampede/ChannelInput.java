package dev.stampede;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.MemorySegment;
import java.time.Duration;

/** A task's input connection to a channel: gets items by timestamp or selector and consumes
 * them, so that they can be reclaimed. */
public final class ChannelInput extends Connection<Channel> {
    ChannelInput(MemorySegment ptr, Channel channel, Task task) {
        super(ptr, Native.INPUT_FREE[Kind.CHANNEL.ordinal()], "input connection", channel, task);
    }

    /** Gets the item {@code selector} picks, waiting for it as long as it takes. */
    public Stamped get(Selector selector) throws InterruptedException {
        return get(selector, Waits.FOREVER);
    }

    /** Gets the item {@code selector} picks, waiting at most {@code timeout} ({@code null}:
     * forever); {@link StampedeException.Timeout} says which timestamps are nearest. */
    public Stamped get(Selector selector, Duration timeout) throws InterruptedException {
        return get(selector, Waits.millis(timeout));
    }

    /** Gets the item at exactly {@code ts}, waiting for it as long as it takes. */
    public Stamped get(long ts) throws InterruptedException {
        return get(Selector.exact(ts), Waits.FOREVER);
    }

    /** Gets without waiting; {@link StampedeException.Unavailable} if nothing matches now. */
    public Stamped tryGet(Selector selector) {
        try {
            return get(selector, 0);
        } catch (InterruptedException e) {
            throw new AssertionError("a get that does not wait was interrupted", e);
        }
    }

    private Stamped get(Selector selector, long timeoutMs) throws InterruptedException {
        MemorySegment p = res.enter();
        try (Frame f = Frame.open()) {
            MemorySegment ts = f.mem.asSlice(0, 8);
            MemorySegment item = f.mem.asSlice(8, 8);
            int kind = selector.kind();
            long at = selector.ts();
            Attempt a = waitMs -> {
                try {
                    return (int) Native.CHANNEL_GET.invokeExact(p, kind, at, waitMs, ts, item);
                } catch (Throwable t) {
                    throw Native.fail(t);
                }
            };
            await(a, timeoutMs, timeoutMs == 0 ? null : container.waitersFor(), res);
            return new Stamped(ts.get(JAVA_LONG, 0), Item.adopt(item.get(ADDRESS, 0)));
        } finally {
            res.leave();
        }
    }

    /** Marks the item at {@code ts} consumed on this connection. */
    public void consume(long ts) {
        call(Native.CHANNEL_CONSUME, ts);
    }

    /** Consumes everything up to and including {@code ts} on this connection, skipped items
     * too. */
    public void consumeUntil(long ts) {
        call(Native.CHANNEL_CONSUME_UNTIL, ts);
    }

    private void call(java.lang.invoke.MethodHandle h, long ts) {
        MemorySegment p = res.enter();
        try {
            int s = (int) h.invokeExact(p, ts);
            if (s != 0) {
                throw StampedeException.last(Status.of(s), ts, null);
            }
        } catch (Throwable t) {
            throw Native.fail(t);
        } finally {
            res.leave();
        }
    }
}
