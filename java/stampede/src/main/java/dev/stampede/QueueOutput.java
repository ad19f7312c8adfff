package dev.stampede;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.MemorySegment;
import java.time.Duration;

/** A task's output connection to a queue. A failed put hands its item back in
 * {@link StampedeException#item()}. */
public final class QueueOutput extends Connection<Queue> {
    QueueOutput(MemorySegment ptr, Queue queue, Task task) {
        super(ptr, Native.OUTPUT_FREE[Kind.QUEUE.ordinal()], "output connection", queue, task);
    }

    /** Puts {@code item} at {@code ts}, waiting for space as long as it takes; returns its
     * ticket. */
    public long put(long ts, Item item) throws InterruptedException {
        return put(ts, item, Waits.FOREVER);
    }

    /** Puts a bytes item holding a copy of {@code data}. */
    public long put(long ts, byte[] data) throws InterruptedException {
        Item item = Item.of(data);
        long ticket = put(ts, item, Waits.FOREVER);
        // Released after the put, or handed back by its exception.
        item.close();
        return ticket;
    }

    /** Puts, waiting at most {@code timeout} for space ({@code null}: forever). */
    public long put(long ts, Item item, Duration timeout) throws InterruptedException {
        return put(ts, item, Waits.millis(timeout));
    }

    /** Puts without waiting; {@link StampedeException.Full} if the queue is full. */
    public long tryPut(long ts, Item item) {
        try {
            return put(ts, item, 0);
        } catch (InterruptedException e) {
            throw new AssertionError("a put that does not wait was interrupted", e);
        }
    }

    private long put(long ts, Item item, long timeoutMs) throws InterruptedException {
        MemorySegment p = res.enter();
        MemorySegment it = item.res.enter();
        try (Frame f = Frame.open()) {
            MemorySegment ticket = f.mem.asSlice(0, 8);
            Waits.put(timeoutMs, (ms, stop) -> raw(p, ts, it, ms, stop, ticket),
                    s -> StampedeException.last(Status.of(s), ts, item));
            return ticket.get(JAVA_LONG, 0);
        } finally {
            item.res.leave();
            res.leave();
        }
    }

    private static int raw(MemorySegment p, long ts, MemorySegment item, long timeoutMs,
                           MemorySegment stop, MemorySegment ticket) {
        try {
            return (int) Native.QUEUE_PUT.invokeExact(p, ts, item, timeoutMs, stop, ticket);
        } catch (Throwable t) {
            throw Native.fail(t);
        }
    }
}
