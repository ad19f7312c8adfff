package dev.stampede;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.invoke.MethodHandle;
import java.lang.ref.Cleaner;
import java.util.function.Function;

/** Base of every public handle: an {@link AutoCloseable} over one {@link Resource}. */
abstract class Handle implements AutoCloseable {
    static final Cleaner CLEANER = Cleaner.create();

    final Resource res;
    private final Cleaner.Cleanable cleanable;

    Handle(MemorySegment ptr, MethodHandle free, String what, Children owner, int rank) {
        this(ptr, free, what, owner, rank, null);
    }

    /** A handle that releases {@code made}, what was made from it, before itself: when closed
     * and when cleaned. */
    Handle(MemorySegment ptr, MethodHandle free, String what, Children owner, int rank,
           Children made) {
        res = new Resource(ptr, free, what);
        if (owner != null) {
            owner.add(res, rank);
        }
        cleanable = CLEANER.register(this, made == null ? res : made.releasing(res));
    }

    /** Releases the handle (idempotent). Calls on it afterwards throw
     * {@link IllegalStateException}. */
    @Override
    public void close() {
        cleanable.clean();
    }

    /** Counters: {@code fill(handle, out)} (an {@code stp_*_stats} call) writes a struct of
     * {@code layout}, which {@code read} turns into a record. */
    <T> T counters(StructLayout layout, MethodHandle fill, Function<MemorySegment, T> read) {
        MemorySegment p = res.enter();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(layout);
            Status.check((int) fill.invokeExact(p, out));
            return read.apply(out);
        } catch (Throwable t) {
            throw Native.fail(t);
        } finally {
            res.leave();
        }
    }

    /** Whether {@link #close()} was called. */
    public boolean isClosed() {
        return res.isClosed();
    }
}
