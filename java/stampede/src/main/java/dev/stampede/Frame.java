package dev.stampede;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * Out-parameters of one call that may run Java callbacks (a put runs arrival callbacks on the
 * putting thread): each thread reuses one block, and a call nested inside a callback gets a
 * block of its own.
 */
final class Frame implements AutoCloseable {
    private static final ThreadLocal<Frame> LOCAL =
            ThreadLocal.withInitial(() -> new Frame(Arena.ofAuto(), true));

    private final Arena arena;
    private final boolean pooled;
    private boolean busy;
    /** 64 bytes, 8-aligned. */
    final MemorySegment mem;

    private Frame(Arena arena, boolean pooled) {
        this.arena = arena;
        this.pooled = pooled;
        this.mem = arena.allocate(64, 8);
    }

    static Frame open() {
        Frame f = LOCAL.get();
        if (f.busy) {
            return new Frame(Arena.ofConfined(), false);
        }
        f.busy = true;
        return f;
    }

    @Override
    public void close() {
        if (pooled) {
            busy = false;
        } else {
            arena.close();
        }
    }
}
