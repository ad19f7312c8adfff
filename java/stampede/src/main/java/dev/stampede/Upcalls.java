package dev.stampede;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.function.LongConsumer;

/**
 * C function pointers that call Java: arrival callbacks ({@code stp_arrival_fn}) and garbage
 * handlers ({@code stp_garbage_fn}). A Java exception must not unwind into the C library, so
 * the targets catch everything and report it to the thread's uncaught-exception handler.
 */
final class Upcalls {
    private Upcalls() {}

    static final FunctionDescriptor ARRIVAL = FunctionDescriptor.ofVoid(ADDRESS, JAVA_LONG);
    static final FunctionDescriptor GARBAGE = FunctionDescriptor.ofVoid(ADDRESS, JAVA_LONG, ADDRESS);

    private static final MethodHandle ARRIVED;
    private static final MethodHandle COLLECTED;

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            ARRIVED = l.findStatic(Upcalls.class, "arrived",
                    MethodType.methodType(void.class, LongConsumer.class, MemorySegment.class,
                            long.class));
            COLLECTED = l.findStatic(Upcalls.class, "collected",
                    MethodType.methodType(void.class, GarbageHandler.class, MemorySegment.class,
                            long.class, MemorySegment.class));
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    static void report(Throwable t) {
        Thread me = Thread.currentThread();
        try {
            me.getUncaughtExceptionHandler().uncaughtException(me, t);
        } catch (Throwable ignored) {
            // Nothing more can be done from inside a C callback.
        }
    }

    private static void arrived(LongConsumer target, MemorySegment ctx, long ts) {
        try {
            target.accept(ts);
        } catch (Throwable t) {
            report(t);
        }
    }

    private static void collected(GarbageHandler target, MemorySegment ctx, long ts,
                                  MemorySegment item) {
        try {
            Item it = Item.adopt(Native.cloneItem(item));
            target.reclaimed(ts, it);
        } catch (Throwable t) {
            report(t);
        }
    }

    /** A C arrival callback that calls {@code target}, valid while {@code arena} is open. */
    static MemorySegment arrival(LongConsumer target, Arena arena) {
        return Native.LINKER.upcallStub(ARRIVED.bindTo(target), ARRIVAL, arena);
    }

    /** A C garbage handler that calls {@code target}, valid while {@code arena} is open. */
    static MemorySegment garbage(GarbageHandler target, Arena arena) {
        return Native.LINKER.upcallStub(COLLECTED.bindTo(target), GARBAGE, arena);
    }
}
