package dev.stampede;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * Per-thread native memory for the out-parameters of calls that cannot call back into Java
 * (so no other use on the same thread can overlap). Calls that may run callbacks allocate
 * their out-parameters in an arena of their own.
 */
final class Scratch {
    private Scratch() {}

    private static final ThreadLocal<MemorySegment> LOCAL =
            ThreadLocal.withInitial(() -> Arena.ofAuto().allocate(64, 8));

    /** 64 bytes, 8-aligned, of this thread's scratch memory. */
    static MemorySegment out() {
        return LOCAL.get();
    }
}
