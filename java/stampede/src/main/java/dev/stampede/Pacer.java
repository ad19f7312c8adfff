package dev.stampede;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;

/**
 * Paces a loop to real time: tick {@code vt} is due {@code vt} periods after the first tick.
 * A tick reached later than the tolerance is handled as {@link LateAction} says.
 */
public final class Pacer extends Handle {
    /** What a pacer does when a tick is reached later than its tolerance. */
    public enum LateAction {
        /** Go on; later ticks keep their schedule. */
        CONTINUE,
        /** Skip the missed ticks: the tick reports the virtual time to jump to. */
        SKIP,
        /** Rebase the schedule so this tick is due now. */
        RESYNC
    }

    /**
     * The outcome of {@link #sync}.
     *
     * @param kind on time, late, skip or resynced
     * @param skipTo for {@link Kind#SKIP}, the virtual time to jump to
     */
    public record Tick(Kind kind, long skipTo) {
        /** The kinds of tick. */
        public enum Kind {
            /** On time: slept until due, or late within tolerance. */
            ON_TIME,
            /** Late beyond tolerance; going on. */
            LATE,
            /** Late; skip to {@link Tick#skipTo()}. */
            SKIP,
            /** Late; the schedule now treats this tick as due now. */
            RESYNCED
        }
    }

    /**
     * Counters of a pacer.
     *
     * @param onTime ticks reached on time
     * @param late ticks reached late beyond tolerance
     * @param skipped virtual times skipped
     * @param resyncs schedule rebases
     */
    public record Stats(long onTime, long late, long skipped, long resyncs) {}

    /** A pacer of {@code period} per tick, {@code tolerance} of lateness, and {@code late}. */
    public Pacer(Duration period, Duration tolerance, LateAction late) {
        super(create(period, tolerance, late), Native.PACER_FREE, "pacer", null, 0);
    }

    private static MemorySegment create(Duration period, Duration tolerance, LateAction late) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            Status.check((int) Native.PACER_NEW.invokeExact(micros(period), micros(tolerance),
                    late.ordinal(), out));
            return out.get(ADDRESS, 0);
        } catch (Throwable t) {
            throw Native.fail(t);
        }
    }

    private static long micros(Duration d) {
        try {
            return d.toNanos() / 1000;
        } catch (ArithmeticException e) {
            return Long.MAX_VALUE;
        }
    }

    /** Waits until tick {@code vt} is due. */
    public Tick sync(long vt) throws InterruptedException {
        MemorySegment p = res.enter();
        try (Arena a = Arena.ofShared()) {
            MemorySegment tick = a.allocate(JAVA_INT);
            MemorySegment skip = a.allocate(JAVA_LONG);
            Waits.whole(stop -> {
                try {
                    return (int) Native.PACER_SYNC.invokeExact(p, vt, stop, tick, skip);
                } catch (Throwable t) {
                    throw Native.fail(t);
                }
            }, s -> StampedeException.last(Status.of(s), vt, null));
            return new Tick(Tick.Kind.values()[tick.get(JAVA_INT, 0)], skip.get(JAVA_LONG, 0));
        } finally {
            res.leave();
        }
    }

    /** The pacer's counters. */
    public Stats stats() {
        return counters(Layouts.PACER_STATS, Native.PACER_STATS, out -> new Stats(
                out.get(JAVA_LONG, 0), out.get(JAVA_LONG, 8), out.get(JAVA_LONG, 16),
                out.get(JAVA_LONG, 24)));
    }
}
