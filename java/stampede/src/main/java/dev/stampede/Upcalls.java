package dev.stampede;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.ref.WeakReference;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongConsumer;

/**
 * C function pointers that call Java: arrival callbacks ({@code stp_arrival_fn}) and garbage
 * handlers ({@code stp_garbage_fn}). A Java exception must not unwind into the C library, so
 * the targets catch everything and report it to the thread's uncaught-exception handler.
 *
 * <p>There is one stub of each, made once and never freed, and the C library's context
 * pointer carries a key to the Java target. A stub of its own per target could not be freed
 * safely: the C library fires the arrivals it collected under a container's lock after
 * releasing the lock, so a call can start after {@code stp_subscription_free} returns, and it
 * calls a garbage handler for as long as the container lives, which no Java handle sees the
 * end of. A call that comes after its target was forgotten finds no key and does nothing.
 *
 * <p>The targets are held by their runtime ({@link Runtime#callbacks}) and here only weakly,
 * so that a callback that refers to its runtime, or to any handle made from it, does not keep
 * the runtime reachable. A subscription's key is forgotten when it closes, a garbage
 * handler's once its runtime is released.
 */
final class Upcalls {
    private Upcalls() {}

    static final FunctionDescriptor ARRIVAL = FunctionDescriptor.ofVoid(ADDRESS, JAVA_LONG);
    static final FunctionDescriptor GARBAGE = FunctionDescriptor.ofVoid(ADDRESS, JAVA_LONG, ADDRESS);

    /** The one C arrival callback; its context pointer is a key of {@link #ARRIVALS}. */
    static final MemorySegment ARRIVED;
    /** The one C garbage handler; its context pointer is a key of {@link #HANDLERS}. */
    static final MemorySegment COLLECTED;

    private static final Map<Long, WeakReference<LongConsumer>> ARRIVALS =
            new ConcurrentHashMap<>();
    private static final Map<Long, WeakReference<GarbageHandler>> HANDLERS =
            new ConcurrentHashMap<>();
    private static final AtomicLong KEYS = new AtomicLong();

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            ARRIVED = Native.LINKER.upcallStub(l.findStatic(Upcalls.class, "arrived",
                    MethodType.methodType(void.class, MemorySegment.class, long.class)),
                    ARRIVAL, Arena.global());
            COLLECTED = Native.LINKER.upcallStub(l.findStatic(Upcalls.class, "collected",
                    MethodType.methodType(void.class, MemorySegment.class, long.class,
                            MemorySegment.class)), GARBAGE, Arena.global());
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

    private static void arrived(MemorySegment ctx, long ts) {
        try {
            WeakReference<LongConsumer> arrival = ARRIVALS.get(ctx.address());
            LongConsumer target = arrival == null ? null : arrival.get();
            if (target != null) {
                target.accept(ts);
            }
        } catch (Throwable t) {
            report(t);
        }
    }

    private static void collected(MemorySegment ctx, long ts, MemorySegment item) {
        try {
            WeakReference<GarbageHandler> handler = HANDLERS.get(ctx.address());
            GarbageHandler target = handler == null ? null : handler.get();
            if (target != null) {
                target.reclaimed(ts, Item.adopt(Native.cloneItem(item)));
            }
        } catch (Throwable t) {
            report(t);
        }
    }

    /** A new key: never 0, which is NULL as a context pointer. */
    static long newKey() {
        return KEYS.incrementAndGet();
    }

    /** Calls of {@link #ARRIVED} with the context {@code key} go to {@code target}. */
    static void setArrival(long key, LongConsumer target) {
        ARRIVALS.put(key, new WeakReference<>(target));
    }

    static void forgetArrival(long key) {
        ARRIVALS.remove(key);
    }

    /** Calls of {@link #COLLECTED} with the context {@code key} go to {@code target}. */
    static void setGarbageHandler(long key, GarbageHandler target) {
        HANDLERS.put(key, new WeakReference<>(target));
    }

    static void forgetGarbageHandler(long key) {
        HANDLERS.remove(key);
    }
}
