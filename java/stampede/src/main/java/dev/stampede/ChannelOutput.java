package dev.stampede;

import static java.lang.foreign.ValueLayout.ADDRESS;

import java.lang.foreign.MemorySegment;
import java.time.Duration;

/**
 * A task's output connection to a channel. A put into a bounded, full channel waits for space;
 * a put into another address space's channel returns once sent, and a refusal only the owner
 * can see comes back from the next put or {@link #flush()}. A failed put hands its item back
 * in {@link StampedeException#item()}.
 */
public final class ChannelOutput extends Connection<Channel> {
    ChannelOutput(MemorySegment ptr, Channel channel, Task task) {
        super(ptr, Native.OUTPUT_FREE[Kind.CHANNEL.ordinal()], "output connection", channel,
                task);
    }

    /** Puts {@code item} at {@code ts}, waiting for space as long as it takes. The caller keeps
     * the item (the channel shares it). */
    public void put(long ts, Item item) throws InterruptedException {
        put(ts, item, 0, Waits.FOREVER);
    }

    /** Puts a bytes item holding a copy of {@code data}. */
    public void put(long ts, byte[] data) throws InterruptedException {
        putOwned(ts, Item.of(data));
    }

    /** Puts a text item. */
    public void put(long ts, String text) throws InterruptedException {
        putOwned(ts, Item.of(text));
    }

    /** Puts an item made for this put: released after it, or handed back by the exception. */
    private void putOwned(long ts, Item item) throws InterruptedException {
        put(ts, item, 0, Waits.FOREVER);
        item.close();
    }

    /** Puts, waiting at most {@code timeout} for space ({@code null}: forever). */
    public void put(long ts, Item item, Duration timeout) throws InterruptedException {
        put(ts, item, 0, Waits.millis(timeout));
    }

    /** Puts with a reference count: the item is reclaimed once {@code consumers} connections
     * consumed it (0: by the watermark only). */
    public void put(long ts, Item item, int consumers, Duration timeout)
            throws InterruptedException {
        put(ts, item, consumers, Waits.millis(timeout));
    }

    /** Puts without waiting; {@link StampedeException.Full} if the channel is full. */
    public void tryPut(long ts, Item item) {
        try {
            put(ts, item, 0, 0);
        } catch (InterruptedException e) {
            throw new AssertionError("a put that does not wait was interrupted", e);
        }
    }

    private void put(long ts, Item item, int consumers, long timeoutMs)
            throws InterruptedException {
        MemorySegment p = res.enter();
        MemorySegment it = item.res.enter();
        try {
            Waits.put(timeoutMs, (ms, stop) -> raw(p, ts, it, consumers, ms, stop),
                    s -> StampedeException.last(Status.of(s), ts, item));
        } finally {
            item.res.leave();
            res.leave();
        }
    }

    private static int raw(MemorySegment p, long ts, MemorySegment item, int consumers,
                           long timeoutMs, MemorySegment stop) {
        try {
            return (int) Native.CHANNEL_PUT.invokeExact(p, ts, item, consumers, timeoutMs, stop);
        } catch (Throwable t) {
            throw Native.fail(t);
        }
    }

    /** Waits until every put made on this connection is stored or refused, and throws a
     * refusal not reported yet. Puts into a local channel are stored when they return. */
    public void flush() {
        MemorySegment p = res.enter();
        try {
            Status.check((int) Native.CHANNEL_FLUSH.invokeExact(p));
        } catch (Throwable t) {
            throw Native.fail(t);
        } finally {
            res.leave();
        }
    }

    /** Lends {@code len} zeroed bytes to fill in place and put as a bytes item: for a channel
     * of another address space on this host, shared memory, so the put copies nothing. */
    public Loan loan(long len) {
        MemorySegment p = res.enter();
        try (Frame f = Frame.open()) {
            MemorySegment out = f.mem.asSlice(0, 8);
            MemorySegment data = f.mem.asSlice(8, 8);
            Status.check((int) Native.ITEM_LOAN.invokeExact(p, len, out, data));
            return new Loan(out.get(ADDRESS, 0), data.get(ADDRESS, 0), len);
        } catch (Throwable t) {
            throw Native.fail(t);
        } finally {
            res.leave();
        }
    }

    /** Lends an array of {@code dtype} and {@code shape} to fill in place and put. */
    public Loan loanArray(DType dtype, long[] shape) {
        long len = dtype.size();
        for (long d : shape) {
            len = Math.multiplyExact(len, d);
        }
        MemorySegment p = res.enter();
        try (Frame f = Frame.open(); java.lang.foreign.Arena a = java.lang.foreign.Arena.ofConfined()) {
            MemorySegment out = f.mem.asSlice(0, 8);
            MemorySegment data = f.mem.asSlice(8, 8);
            MemorySegment dims = a.allocateFrom(java.lang.foreign.ValueLayout.JAVA_LONG, shape);
            Status.check((int) Native.ITEM_LOAN_ARRAY.invokeExact(p, dtype.code(),
                    (long) shape.length, dims, out, data));
            return new Loan(out.get(ADDRESS, 0), data.get(ADDRESS, 0), len);
        } catch (Throwable t) {
            throw Native.fail(t);
        } finally {
            res.leave();
        }
    }
}
