package dev.stampede;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.function.LongConsumer;

/**
 * A registered arrival callback: {@link #close()} ends it. The callback runs on the putting
 * thread for a container of this runtime, and in order on the runtime's event thread for one
 * another address space owns; it must be quick and must not throw.
 */
public final class Subscription implements AutoCloseable {
    private final Arena arena = Arena.ofShared();
    private final AtomicInteger inside = new AtomicInteger();
    private final AtomicBoolean closed = new AtomicBoolean();
    private final MemorySegment sub;

    Subscription(Container container, LongConsumer callback) {
        LongConsumer counted = ts -> {
            inside.incrementAndGet();
            try {
                if (!closed.get()) {
                    callback.accept(ts);
                }
            } finally {
                inside.decrementAndGet();
            }
        };
        MemorySegment stub = Upcalls.arrival(counted, arena);
        MemorySegment c = container.res.enter();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(java.lang.foreign.ValueLayout.ADDRESS);
            int s;
            try {
                s = (int) Native.ON_ARRIVAL[container.kind().ordinal()]
                        .invokeExact(c, stub, MemorySegment.NULL, out);
            } catch (Throwable t) {
                throw Native.fail(t);
            }
            if (s != 0) {
                RuntimeException e = StampedeException.last(Status.of(s), null, null);
                arena.close();
                throw e;
            }
            sub = out.get(java.lang.foreign.ValueLayout.ADDRESS, 0);
        } finally {
            container.res.leave();
        }
    }

    /** Ends the subscription: no call starts after this returns, and the calls running now
     * have returned. */
    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        Native.free(Native.SUBSCRIPTION_FREE, sub);
        // A call that entered the stub just before the unsubscription is let finish before
        // the stub's memory goes.
        do {
            LockSupport.parkNanos(2_000_000);
        } while (inside.get() > 0);
        arena.close();
    }
}
