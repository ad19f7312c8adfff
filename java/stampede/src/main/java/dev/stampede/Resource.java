package dev.stampede;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

/**
 * One native handle and the function that frees it. Calls bracket their use with
 * {@link #enter()} and {@link #leave()}, so a handle closed while another thread is inside a
 * call is freed only once that call returns: a closed handle fails with
 * {@link IllegalStateException}, never with a crash. It is the action of the handle's
 * {@link java.lang.ref.Cleaner}, so an unreachable handle is freed too.
 */
final class Resource implements Runnable {
    private final MemorySegment ptr;
    private final MethodHandle free;
    private final String what;
    private final AtomicInteger users = new AtomicInteger();
    private final AtomicBoolean freed = new AtomicBoolean();
    private volatile boolean closing;
    private volatile Runnable beforeFree;
    Children parent;

    Resource(MemorySegment ptr, MethodHandle free, String what) {
        this.ptr = ptr;
        this.free = free;
        this.what = what;
    }

    MemorySegment enter() {
        users.incrementAndGet();
        if (closing) {
            leave();
            throw new IllegalStateException("the " + what + " is closed");
        }
        return ptr;
    }

    void leave() {
        users.decrementAndGet();
    }

    boolean isClosed() {
        return closing;
    }

    /** Runs {@code r} just before the handle is freed (ends subscriptions that use it). */
    void beforeFree(Runnable r) {
        beforeFree = r;
    }

    /** The C library took the handle over: never free it here. */
    void forget() {
        closing = true;
        freed.set(true);
        Children p = parent;
        if (p != null) {
            p.remove(this);
        }
    }

    @Override
    public void run() {
        closing = true;
        if (!freed.compareAndSet(false, true)) {
            return;
        }
        // A call in progress ends within one wait slice.
        while (users.get() > 0) {
            LockSupport.parkNanos(1_000_000);
        }
        Runnable b = beforeFree;
        if (b != null) {
            b.run();
        }
        Native.free(free, ptr);
        Children p = parent;
        if (p != null) {
            p.remove(this);
        }
    }
}
