package dev.stampede;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.LongConsumer;

/**
 * Virtual threads waiting for something new in one container. The container's arrival
 * callback bumps the epoch and unparks them; a waiter reads the epoch, tries its get without
 * waiting, and parks only if the epoch is unchanged, so no arrival between the try and the
 * park is missed.
 */
final class Waiters implements LongConsumer {
    /** The longest park between tries: a safety net for what arrivals do not signal
     * (redelivered queue items, a collected timestamp). */
    static final long PARK_NS = 50_000_000;

    private final AtomicLong epoch = new AtomicLong();
    private final Set<Thread> parked = ConcurrentHashMap.newKeySet();
    /** The arrival subscriptions that feed it: its container's, or each of a correlator's
     * channels'. */
    java.util.List<Subscription> subscriptions = java.util.List.of();

    long epoch() {
        return epoch.get();
    }

    @Override
    public void accept(long ts) {
        epoch.incrementAndGet();
        if (!parked.isEmpty()) {
            for (Thread t : parked) {
                LockSupport.unpark(t);
            }
        }
    }

    /** Ends the subscriptions and wakes the waiting threads: their handle is being closed. */
    void end() {
        for (Subscription s : subscriptions) {
            s.close();
        }
        accept(Long.MIN_VALUE);
    }

    /** Parks the calling thread until the epoch moves past {@code seen}, at most
     * {@code maxNs}. */
    void await(long seen, long maxNs) {
        Thread me = Thread.currentThread();
        parked.add(me);
        try {
            if (epoch.get() == seen) {
                LockSupport.parkNanos(this, Math.min(maxNs, PARK_NS));
            }
        } finally {
            parked.remove(me);
        }
    }
}
