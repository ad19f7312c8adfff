package dev.stampede;

import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

/**
 * How blocking calls wait so that {@link Thread#interrupt()} ends them within half a second
 * and virtual threads do not hold their carrier for the whole wait.
 *
 * <ul>
 *   <li>Gets on a platform thread wait in the C library in slices of {@link #SLICE_MS}; the
 *       interrupt status is checked between slices.</li>
 *   <li>Gets on a virtual thread try without waiting, then park until the container's
 *       arrival callback ({@link Waiters}) says something new was put.</li>
 *   <li>Puts and pacer sleeps wait as one call (a waiting put keeps its place and counts once
 *       as full) with a stop flag the C library polls; {@link #watch} sets it when the thread
 *       is interrupted. On a virtual thread the call runs on a platform thread of
 *       {@link #BLOCKING} while the virtual thread parks.</li>
 * </ul>
 */
final class Waits {
    private Waits() {}

    /** The longest single wait in the C library on behalf of a platform thread. */
    static final long SLICE_MS = 100;

    /** How often the interrupt watcher looks at the threads it watches. */
    private static final long WATCH_NS = 20_000_000;

    /** {@code timeoutMs} for "wait forever", as in the C library. */
    static final long FOREVER = -1;

    static long millis(Duration d) {
        if (d == null) {
            return FOREVER;
        }
        if (d.isNegative()) {
            throw new IllegalArgumentException("a negative timeout: " + d);
        }
        try {
            return d.toMillis() == 0 && !d.isZero() ? 1 : d.toMillis();
        } catch (ArithmeticException e) {
            return FOREVER;
        }
    }

    /** The deadline (nanoTime) of a wait of {@code timeoutMs}, or {@code Long.MAX_VALUE}. */
    static long deadline(long timeoutMs) {
        return timeoutMs < 0 ? Long.MAX_VALUE : System.nanoTime() + timeoutMs * 1_000_000;
    }

    /** Milliseconds left until {@code deadline} (0 when past, FOREVER when unbounded). */
    static long left(long deadline) {
        if (deadline == Long.MAX_VALUE) {
            return FOREVER;
        }
        long ns = deadline - System.nanoTime();
        return ns <= 0 ? 0 : Math.max(1, ns / 1_000_000);
    }

    static long slice(long leftMs) {
        return leftMs < 0 ? SLICE_MS : Math.min(leftMs, SLICE_MS);
    }

    static void checkInterrupt() throws InterruptedException {
        if (Thread.interrupted()) {
            throw new InterruptedException();
        }
    }

    // The stop flags the C library polls, one per thread, and the watcher that sets them.

    private static final ThreadLocal<MemorySegment> FLAG =
            ThreadLocal.withInitial(() -> Arena.ofAuto().allocate(JAVA_INT));

    static MemorySegment flag() {
        MemorySegment f = FLAG.get();
        f.set(JAVA_INT, 0, 0);
        return f;
    }

    /** This thread's stop flag, set: a call given it stops before it would wait. */
    static MemorySegment raisedFlag() {
        MemorySegment f = FLAG.get();
        f.set(JAVA_INT, 0, 1);
        return f;
    }

    private static final Map<Thread, MemorySegment> WATCHED = new ConcurrentHashMap<>();
    private static volatile Thread watcher;
    private static volatile boolean watcherIdle;

    /** Sets {@code flag} if {@code thread} is interrupted while watched. */
    static void watch(Thread thread, MemorySegment flag) {
        WATCHED.put(thread, flag);
        Thread w = watcher;
        if (w == null) {
            synchronized (Waits.class) {
                if (watcher == null) {
                    w = Thread.ofPlatform().daemon().name("stampede-interrupts")
                            .start(Waits::watchLoop);
                    watcher = w;
                }
            }
        } else if (watcherIdle) {
            LockSupport.unpark(w);
        }
    }

    static void unwatch(Thread thread) {
        WATCHED.remove(thread);
    }

    /** How long the watcher keeps polling after the last watched call, before it parks
     * until the next: waking it for every put would cost more than the put. */
    private static final long LINGER_NS = 2_000_000_000L;

    private static void watchLoop() {
        long lastBusy = System.nanoTime();
        while (true) {
            if (WATCHED.isEmpty()) {
                if (System.nanoTime() - lastBusy > LINGER_NS) {
                    watcherIdle = true;
                    if (WATCHED.isEmpty()) {
                        LockSupport.park();
                    }
                    watcherIdle = false;
                    lastBusy = System.nanoTime();
                }
            } else {
                lastBusy = System.nanoTime();
                for (Map.Entry<Thread, MemorySegment> e : WATCHED.entrySet()) {
                    if (e.getKey().isInterrupted()) {
                        e.getValue().set(JAVA_INT, 0, 1);
                    }
                }
            }
            LockSupport.parkNanos(WATCH_NS);
        }
    }

    /** A put: {@code call(timeoutMs, stop)} makes it and returns the C status. */
    interface Put {
        int call(long timeoutMs, MemorySegment stop);
    }

    /**
     * Makes a put that waits at most {@code timeoutMs}: at once when it may not wait; on a
     * virtual thread first as a try (a stop flag set beforehand stops the put before it would
     * wait: stored, or sent on its way to another space, if it need not); otherwise, or when
     * the try would have waited, as one whole wait ({@link #whole}). {@code fail} makes the
     * exception of a failed status.
     */
    static void put(long timeoutMs, Put put, java.util.function.IntFunction<RuntimeException> fail)
            throws InterruptedException {
        if (timeoutMs == 0) {
            int s = put.call(0, MemorySegment.NULL);
            if (s != 0) {
                throw fail.apply(s);
            }
            return;
        }
        if (Thread.currentThread().isVirtual()) {
            int s = put.call(timeoutMs, raisedFlag());
            if (s == 0) {
                return;
            }
            if (s != Status.INTERRUPTED.code()) {
                throw fail.apply(s);
            }
        }
        whole(stop -> put.call(timeoutMs, stop), fail);
    }

    /** A call that waits as a whole: {@code status(stop)} returns the C status. */
    interface Whole {
        int call(MemorySegment stop);
    }

    /** The platform threads that make whole waits on behalf of virtual threads. */
    private static final ExecutorService BLOCKING = Executors.newCachedThreadPool(new ThreadFactory() {
        private final AtomicInteger n = new AtomicInteger();

        @Override
        public Thread newThread(Runnable r) {
            return Thread.ofPlatform().daemon().name("stampede-blocking-" + n.incrementAndGet())
                    .unstarted(r);
        }
    });

    /**
     * Runs a whole wait and returns its status; {@code STP_INTERRUPTED} becomes
     * {@link InterruptedException}. {@code onFail} turns any other failure into the exception
     * to throw, on the thread that made the call (the C library's last error is per thread).
     */
    static int whole(Whole w, java.util.function.IntFunction<RuntimeException> onFail)
            throws InterruptedException {
        checkInterrupt();
        Thread me = Thread.currentThread();
        MemorySegment stop = flag();
        int status;
        if (me.isVirtual()) {
            Callable<Integer> job = () -> {
                int s = w.call(stop);
                if (s != 0 && s != Status.INTERRUPTED.code()) {
                    throw onFail.apply(s);
                }
                return s;
            };
            Future<Integer> f = BLOCKING.submit(job);
            status = awaitOffloaded(f, stop);
        } else {
            watch(me, stop);
            try {
                status = w.call(stop);
            } finally {
                unwatch(me);
            }
            if (status != 0 && status != Status.INTERRUPTED.code()) {
                throw onFail.apply(status);
            }
        }
        if (status == Status.INTERRUPTED.code()) {
            Thread.interrupted();
            throw new InterruptedException();
        }
        return status;
    }

    private static int awaitOffloaded(Future<Integer> f, MemorySegment stop)
            throws InterruptedException {
        boolean interrupted = false;
        while (true) {
            try {
                int s = f.get();
                if (interrupted && s == 0) {
                    // Done before it saw the flag: keep the interrupt for the caller.
                    Thread.currentThread().interrupt();
                }
                return s;
            } catch (InterruptedException e) {
                interrupted = true;
                stop.set(JAVA_INT, 0, 1);
            } catch (ExecutionException e) {
                if (interrupted) {
                    Thread.currentThread().interrupt();
                }
                Throwable c = e.getCause();
                if (c instanceof RuntimeException r) {
                    throw r;
                }
                if (c instanceof Error err) {
                    throw err;
                }
                throw new IllegalStateException(c);
            }
        }
    }
}
