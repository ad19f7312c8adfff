package dev.stampede;

import static java.lang.foreign.ValueLayout.ADDRESS;

import java.lang.foreign.MemorySegment;

/**
 * A task: a thread of control with a virtual time, usable from any thread. Its virtual time
 * holds back the garbage collection of its zone; closing the task ends it (its connections
 * detach and it no longer holds the watermark).
 */
public final class Task extends Handle {
    final Runtime runtime;

    Task(MemorySegment ptr, Runtime runtime) {
        super(ptr, Native.TASK_FREE, "task", runtime.children, Children.TASK);
        this.runtime = runtime;
    }

    /** The task's virtual time. */
    public long virtualTime() {
        MemorySegment p = res.enter();
        try {
            return (long) Native.TASK_VT.invokeExact(p);
        } catch (Throwable t) {
            throw Native.fail(t);
        } finally {
            res.leave();
        }
    }

    /** Moves the virtual time to {@code vt} (not below the visibility; {@link
     * Stampede#INFINITY} holds nothing back). */
    public void setVirtualTime(long vt) {
        MemorySegment p = res.enter();
        try {
            Status.check((int) Native.TASK_SET_VT.invokeExact(p, vt));
        } catch (Throwable t) {
            throw Native.fail(t);
        } finally {
            res.leave();
        }
    }

    /** The lowest timestamp the task may still put at or move its virtual time to. */
    public long visibility() {
        MemorySegment p = res.enter();
        try {
            return (long) Native.TASK_VISIBILITY.invokeExact(p);
        } catch (Throwable t) {
            throw Native.fail(t);
        } finally {
            res.leave();
        }
    }

    /** A child task at {@code vt} (not below this task's visibility). */
    public Task child(long vt) {
        MemorySegment p = res.enter();
        try (Frame f = Frame.open()) {
            Status.check((int) Native.TASK_CHILD.invokeExact(p, vt, f.mem));
            return new Task(f.mem.get(ADDRESS, 0), runtime);
        } catch (Throwable t) {
            throw Native.fail(t);
        } finally {
            res.leave();
        }
    }

    private MemorySegment attach(Container c, boolean input) {
        MemorySegment p = res.enter();
        MemorySegment cp = c.res.enter();
        try (Frame f = Frame.open()) {
            int k = c.kind().ordinal();
            int s = input ? (int) Native.ATTACH_INPUT[k].invokeExact(p, cp, f.mem)
                    : (int) Native.ATTACH_OUTPUT[k].invokeExact(p, cp, f.mem);
            Status.check(s);
            return f.mem.get(ADDRESS, 0);
        } catch (Throwable t) {
            throw Native.fail(t);
        } finally {
            c.res.leave();
            res.leave();
        }
    }

    /** An input connection to {@code channel}. */
    public ChannelInput attachInput(Channel channel) {
        return new ChannelInput(attach(channel, true), channel, this);
    }

    /** An output connection to {@code channel}. */
    public ChannelOutput attachOutput(Channel channel) {
        return new ChannelOutput(attach(channel, false), channel, this);
    }

    /** An input connection to {@code queue}. */
    public QueueInput attachInput(Queue queue) {
        return new QueueInput(attach(queue, true), queue, this);
    }

    /** An output connection to {@code queue}. */
    public QueueOutput attachOutput(Queue queue) {
        return new QueueOutput(attach(queue, false), queue, this);
    }

    /** An input connection to {@code register}. */
    public RegisterInput attachInput(Register register) {
        return new RegisterInput(attach(register, true), register, this);
    }

    /** An output connection to {@code register}. */
    public RegisterOutput attachOutput(Register register) {
        return new RegisterOutput(attach(register, false), register, this);
    }

    @Override
    public String toString() {
        return isClosed() ? "Task(closed)" : "Task(vt " + virtualTime() + ")";
    }
}
