package dev.stampede;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

/** Base of the input and output connections: a task's handle on one container. */
abstract sealed class Connection<C extends Container> extends Handle
        permits ChannelInput, ChannelOutput, QueueInput, QueueOutput, RegisterInput,
        RegisterOutput {
    final C container;
    final Task task;

    Connection(MemorySegment ptr, MethodHandle free, String what, C container, Task task) {
        super(ptr, free, what, task.runtime.children, Children.CONNECTION);
        this.container = container;
        this.task = task;
    }

    /** The container this connection reaches. */
    public C container() {
        return container;
    }

    /** The task it belongs to. */
    public Task task() {
        return task;
    }

    /** One try of a get: waits at most {@code waitMs} in the C library, returns the status. */
    interface Attempt {
        int run(long waitMs);
    }

    /**
     * Tries {@code a} until it succeeds, fails otherwise than by finding nothing, or
     * {@code timeoutMs} passes (see {@link Waits}). {@code waiters} wakes a virtual thread
     * when something arrives; without it a virtual thread polls with growing pauses.
     */
    static void await(Attempt a, long timeoutMs, Waiters waiters, Resource res)
            throws InterruptedException {
        int s;
        if (timeoutMs == 0) {
            s = a.run(0);
        } else if (Thread.currentThread().isVirtual()) {
            s = parked(a, timeoutMs, waiters, res);
        } else {
            s = sliced(a, timeoutMs, res);
        }
        if (s == 0) {
            return;
        }
        if (s == Status.UNAVAILABLE.code() && timeoutMs != 0) {
            s = Status.TIMEOUT.code();
        }
        throw StampedeException.last(Status.of(s), null, null);
    }

    private static boolean nothingYet(int s) {
        return s == Status.UNAVAILABLE.code() || s == Status.TIMEOUT.code();
    }

    /** A handle closed by another thread ends the wait. */
    private static void checkOpen(Resource res) {
        if (res.isClosed()) {
            throw new IllegalStateException("the handle was closed while a call waited on it");
        }
    }

    private static int sliced(Attempt a, long timeoutMs, Resource res)
            throws InterruptedException {
        long deadline = Waits.deadline(timeoutMs);
        while (true) {
            int s = a.run(Waits.slice(Waits.left(deadline)));
            if (!nothingYet(s) || Waits.left(deadline) == 0) {
                return s;
            }
            Waits.checkInterrupt();
            checkOpen(res);
        }
    }

    private static int parked(Attempt a, long timeoutMs, Waiters waiters, Resource res)
            throws InterruptedException {
        long deadline = Waits.deadline(timeoutMs);
        long pause = 1_000_000;
        while (true) {
            long seen = waiters == null ? 0 : waiters.epoch();
            int s = a.run(0);
            long left = Waits.left(deadline);
            if (!nothingYet(s) || left == 0) {
                return s;
            }
            Waits.checkInterrupt();
            checkOpen(res);
            long max = left < 0 ? Long.MAX_VALUE : left * 1_000_000;
            if (waiters != null) {
                waiters.await(seen, max);
            } else {
                java.util.concurrent.locks.LockSupport.parkNanos(Math.min(pause, max));
                pause = Math.min(pause * 2, Waiters.PARK_NS);
            }
            Waits.checkInterrupt();
        }
    }
}
