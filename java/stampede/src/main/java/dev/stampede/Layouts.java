package dev.stampede;

import static java.lang.foreign.ValueLayout.JAVA_BOOLEAN;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemoryLayout.PathElement;
import java.lang.foreign.StructLayout;
import java.util.List;
import java.util.Map;

/**
 * The C structs of {@code stampede.h}. A test compiles a probe against the header and compares
 * every size and offset with these, so they cannot drift from it unnoticed.
 */
final class Layouts {
    private Layouts() {}

    private static StructLayout u64s(String name, String... fields) {
        MemoryLayout[] members = new MemoryLayout[fields.length];
        for (int i = 0; i < fields.length; i++) {
            members[i] = JAVA_LONG.withName(fields[i]);
        }
        return MemoryLayout.structLayout(members).withName(name);
    }

    static final StructLayout NEIGHBORS = MemoryLayout.structLayout(
            JAVA_BOOLEAN.withName("has_below"), MemoryLayout.paddingLayout(7),
            JAVA_LONG.withName("below"),
            JAVA_BOOLEAN.withName("has_above"), MemoryLayout.paddingLayout(7),
            JAVA_LONG.withName("above")).withName("stp_neighbors");

    static final StructLayout CHANNEL_STATS = u64s("stp_channel_stats",
            "items", "connections", "open", "puts", "gets", "reclaimed", "skipped", "full");

    static final StructLayout QUEUE_STATS = u64s("stp_queue_stats",
            "waiting", "held", "puts", "gets", "consumed", "redelivered", "full");

    static final StructLayout GC_STATS = u64s("stp_gc_stats", "passes", "reclaimed", "floor");

    /** The counters of {@code stp_space_stats}, in order (the Rust {@code SpaceStats}). */
    static final List<String> SPACE_COUNTERS = List.of(
            "served", "malformed", "refused", "unreachable", "cache_hits", "spaces_lost",
            "pushed", "push_skipped", "push_received", "consume_failed", "events_sent",
            "events_received", "events_dropped", "events_lost", "puts_sent", "puts_refused",
            "view_hits", "register_hits", "leased", "lease_hits", "view_snapshots",
            "seen_refused", "sent_as_received", "sent_fresh", "loans_shared", "loans_plain",
            "invocations_sent", "invocations_served", "invocations_unknown", "invocations_failed",
            "answers_late", "denied", "quota_refused");

    static final StructLayout SPACE_STATS =
            u64s("stp_space_stats", SPACE_COUNTERS.toArray(String[]::new));

    static final StructLayout WATERMARK = MemoryLayout.structLayout(
            JAVA_INT.withName("zone"), MemoryLayout.paddingLayout(4),
            JAVA_LONG.withName("local"),
            JAVA_LONG.withName("floor"),
            JAVA_LONG.withName("watermark"),
            JAVA_LONG.withName("holds")).withName("stp_watermark");

    static final StructLayout HOLD = MemoryLayout.structLayout(
            JAVA_LONG.withName("ts"),
            JAVA_INT.withName("cause"), MemoryLayout.paddingLayout(4),
            JAVA_LONG.withName("task"),
            JAVA_LONG.withName("container")).withName("stp_hold");

    static final StructLayout PACER_STATS = u64s("stp_pacer_stats",
            "on_time", "late", "skipped", "resyncs");

    /** Every struct the library binds, by its C name (what the header test checks). */
    static final Map<String, StructLayout> ALL = Map.of(
            "stp_neighbors", NEIGHBORS,
            "stp_channel_stats", CHANNEL_STATS,
            "stp_queue_stats", QUEUE_STATS,
            "stp_gc_stats", GC_STATS,
            "stp_space_stats", SPACE_STATS,
            "stp_watermark", WATERMARK,
            "stp_hold", HOLD,
            "stp_pacer_stats", PACER_STATS);

    static long off(StructLayout s, String field) {
        return s.byteOffset(PathElement.groupElement(field));
    }
}
