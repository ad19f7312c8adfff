package dev.stampede;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.lang.ref.Cleaner;

/** Base of every public handle: an {@link AutoCloseable} over one {@link Resource}. */
abstract class Handle implements AutoCloseable {
    static final Cleaner CLEANER = Cleaner.create();

    final Resource res;
    private final Cleaner.Cleanable cleanable;

    Handle(MemorySegment ptr, MethodHandle free, String what, Children owner, int rank) {
        res = new Resource(ptr, free, what);
        if (owner != null) {
            owner.add(res, rank);
        }
        cleanable = CLEANER.register(this, res);
    }

    /** Releases the handle (idempotent). Calls on it afterwards throw
     * {@link IllegalStateException}. */
    @Override
    public void close() {
        cleanable.clean();
    }

    /** Whether {@link #close()} was called. */
    public boolean isClosed() {
        return res.isClosed();
    }
}
