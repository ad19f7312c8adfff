package dev.stampede;

import static java.lang.foreign.ValueLayout.ADDRESS;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.LongConsumer;

/**
 * A registered arrival callback: {@link #close()} ends it, and so does releasing the runtime of
 * its container. The callback runs on the putting thread for a container of this runtime, and
 * in order on the runtime's event thread for one another address space owns; it must be quick
 * and must not throw.
 */
public final class Subscription implements AutoCloseable {
    private final Registration registration;
    /** Where the runtime holds the callback (see {@link Upcalls}). */
    private final Map<Long, Object> callbacks;

    Subscription(Container container, LongConsumer callback) {
        long key = Upcalls.newKey();
        AtomicBoolean closed = new AtomicBoolean();
        // Freeing the native subscription returns once no call is running on another thread
        // and none can start, so a close from inside the callback does not wait for itself.
        LongConsumer counted = ts -> {
            if (!closed.get()) {
                callback.accept(ts);
            }
        };
        MemorySegment c = container.res.enter();
        callbacks = container.runtime.callbacks;
        callbacks.put(key, counted);
        Upcalls.setArrival(key, counted);
        MemorySegment sub = null;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            int s;
            try {
                s = (int) Native.ON_ARRIVAL[container.kind().ordinal()]
                        .invokeExact(c, Upcalls.ARRIVED, MemorySegment.ofAddress(key), out);
            } catch (Throwable t) {
                throw Native.fail(t);
            }
            if (s != 0) {
                throw StampedeException.last(Status.of(s), null, null);
            }
            sub = out.get(ADDRESS, 0);
        } finally {
            container.res.leave();
            if (sub == null) {
                Upcalls.forgetArrival(key);
                callbacks.remove(key);
            }
        }
        registration = new Registration(key, sub, closed, container.runtime.children);
        registration.children.addCloser(registration, Children.CONNECTION);
    }

    /** Ends the subscription: no call starts after this returns, and the calls running now on
     * other threads have returned (closed from inside the callback, that call goes on). */
    @Override
    public void close() {
        registration.run();
        callbacks.remove(registration.key);
    }

    /**
     * What ends the subscription, for {@link #close()} and for the release of its runtime,
     * which holds it among its {@link Children}: so it refers neither to the callback nor to
     * the runtime, which the callback may refer to.
     */
    private record Registration(long key, MemorySegment sub, AtomicBoolean closed,
                                Children children) implements Runnable {
        @Override
        public void run() {
            if (!closed.compareAndSet(false, true)) {
                return;
            }
            Native.free(Native.SUBSCRIPTION_FREE, sub);
            Upcalls.forgetArrival(key);
            children.remove(this);
        }
    }
}
