package dev.stampede;

import static java.lang.foreign.ValueLayout.ADDRESS;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * A handle to a channel, queue or register, here or in another address space. Closing the
 * handle releases it; {@link #shut()} closes the container itself, wherever it lives.
 */
public abstract sealed class Container extends Handle permits Channel, Queue, Register {
    final Runtime runtime;
    private final String name;
    private final boolean local;
    private volatile Waiters waiters;
    /** The key of this handle's garbage handler ({@link Upcalls}), 0 until it has one. */
    private long garbageKey;

    Container(MemorySegment ptr, Kind kind, Runtime runtime, String name) {
        super(ptr, Native.CONTAINER_FREE[kind.ordinal()], kind.name().toLowerCase(),
                runtime.children, Children.CONTAINER);
        this.runtime = runtime;
        this.name = name;
        try {
            this.local = (boolean) Native.CONTAINER_IS_LOCAL[kind.ordinal()].invokeExact(ptr);
        } catch (Throwable t) {
            throw Native.fail(t);
        }
    }

    /** What kind of container it is. */
    public abstract Kind kind();

    /** The name it was made or looked up with, or {@code null}. */
    public String name() {
        return name;
    }

    /** Whether the container lives in this runtime (rather than another address space). */
    public boolean isLocal() {
        return local;
    }

    /** The runtime the handle belongs to. */
    public Runtime runtime() {
        return runtime;
    }

    /** Closes the container wherever it lives: puts fail, gets drain what is stored. */
    public void shut() {
        MemorySegment p = res.enter();
        try {
            Status.check((int) Native.CONTAINER_CLOSE[kind().ordinal()].invokeExact(p));
        } catch (Throwable t) {
            throw Native.fail(t);
        } finally {
            res.leave();
        }
    }

    /** What wakes a virtual thread waiting on this container: its arrival hook, made on first
     * need; {@code null} on a platform thread, which waits in the C library. */
    Waiters waitersFor() {
        return Thread.currentThread().isVirtual() && kind() != Kind.REGISTER ? waiters() : null;
    }

    private Waiters waiters() {
        Waiters w = waiters;
        if (w == null) {
            synchronized (this) {
                w = waiters;
                if (w == null) {
                    w = new Waiters();
                    w.subscriptions = List.of(new Subscription(this, w));
                    // Not this::something: what the cleaner runs must not reach the handle.
                    res.beforeFree(w::end);
                    waiters = w;
                }
            }
        }
        return w;
    }

    /** Registers {@code handler} for reclaimed (channel) or consumed (queue) items; a second
     * registration through the same handle replaces the first under the same key. */
    synchronized void garbage(GarbageHandler handler) {
        MemorySegment p = res.enter();
        try {
            if (garbageKey == 0) {
                garbageKey = Upcalls.newKey();
                runtime.children.addGarbageKey(garbageKey);
            }
            long key = garbageKey;
            // Known before the C library can call it; put back as it was if the call fails.
            Object before = runtime.callbacks.put(key, handler);
            Upcalls.setGarbageHandler(key, handler);
            int s = (int) Native.ON_GARBAGE[kind().ordinal()].invokeExact(p, Upcalls.COLLECTED,
                    MemorySegment.ofAddress(key));
            if (s != 0) {
                RuntimeException e = StampedeException.last(Status.of(s), null, null);
                if (before == null) {
                    runtime.callbacks.remove(key);
                    Upcalls.forgetGarbageHandler(key);
                } else {
                    runtime.callbacks.put(key, before);
                    Upcalls.setGarbageHandler(key, (GarbageHandler) before);
                }
                throw e;
            }
        } catch (Throwable t) {
            throw Native.fail(t);
        } finally {
            res.leave();
        }
    }

    /** Creates a new container: {@code stp_*_new}. */
    static MemorySegment create(Runtime rt, Kind kind, String name, long capacity, int zone) {
        MemorySegment r = rt.res.enter();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            MemorySegment n = name == null ? MemorySegment.NULL : a.allocateFrom(name);
            Status.check((int) Native.CONTAINER_NEW[kind.ordinal()].invokeExact(r, n, capacity,
                    zone, out));
            return out.get(ADDRESS, 0);
        } catch (Throwable t) {
            throw Native.fail(t);
        } finally {
            rt.res.leave();
        }
    }

    /** Looks a container up by name, waiting up to {@code timeoutMs}. */
    static MemorySegment lookup(Runtime rt, Kind kind, String name, long timeoutMs)
            throws InterruptedException {
        long deadline = Waits.deadline(timeoutMs);
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            MemorySegment n = a.allocateFrom(name);
            while (true) {
                long left = Waits.left(deadline);
                long slice = timeoutMs == 0 ? 0 : Waits.slice(left);
                int s;
                MemorySegment r = rt.res.enter();
                try {
                    s = (int) Native.CONTAINER_LOOKUP[kind.ordinal()].invokeExact(r, n, slice,
                            out);
                } catch (Throwable t) {
                    throw Native.fail(t);
                } finally {
                    rt.res.leave();
                }
                if (s == 0) {
                    return out.get(ADDRESS, 0);
                }
                if (s != Status.NOT_FOUND.code() || Waits.left(deadline) == 0) {
                    throw StampedeException.last(Status.of(s), null, null);
                }
                Waits.checkInterrupt();
            }
        }
    }
}
