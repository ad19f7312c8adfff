package dev.stampede;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.MemorySegment;
import java.time.Duration;

/** A task's input connection to a queue: takes items, each gotten by one getter, and consumes
 * them by ticket. Items held when the connection goes are redelivered to another getter. */
public final class QueueInput extends Connection<Queue> {
    QueueInput(MemorySegment ptr, Queue queue, Task task) {
        super(ptr, Native.INPUT_FREE[Kind.QUEUE.ordinal()], "input connection", queue, task);
    }

    /** Takes the next item, waiting as long as it takes. */
    public QueueItem get() throws InterruptedException {
        return get(Waits.FOREVER);
    }

    /** Takes the next item, waiting at most {@code timeout} ({@code null}: forever). */
    public QueueItem get(Duration timeout) throws InterruptedException {
        return get(Waits.millis(timeout));
    }

    /** Takes the next item without waiting; {@link StampedeException.Unavailable} if none. */
    public QueueItem tryGet() {
        try {
            return get(0);
        } catch (InterruptedException e) {
            throw new AssertionError("a get that does not wait was interrupted", e);
        }
    }

    private QueueItem get(long timeoutMs) throws InterruptedException {
        MemorySegment p = res.enter();
        try (Frame f = Frame.open()) {
            MemorySegment ts = f.mem.asSlice(0, 8);
            MemorySegment ticket = f.mem.asSlice(8, 8);
            MemorySegment item = f.mem.asSlice(16, 8);
            Attempt a = waitMs -> {
                try {
                    return (int) Native.QUEUE_GET.invokeExact(p, waitMs, ts, ticket, item);
                } catch (Throwable t) {
                    throw Native.fail(t);
                }
            };
            await(a, timeoutMs, timeoutMs == 0 ? null : container.waitersFor(), res);
            return new QueueItem(ts.get(JAVA_LONG, 0), ticket.get(JAVA_LONG, 0),
                    Item.adopt(item.get(ADDRESS, 0)));
        } finally {
            res.leave();
        }
    }

    /** Consumes the item held under {@code ticket}. */
    public void consume(long ticket) {
        MemorySegment p = res.enter();
        try {
            Status.check((int) Native.QUEUE_CONSUME.invokeExact(p, ticket));
        } catch (Throwable t) {
            throw Native.fail(t);
        } finally {
            res.leave();
        }
    }

    /** Consumes {@code item}. */
    public void consume(QueueItem item) {
        consume(item.ticket());
    }
}
