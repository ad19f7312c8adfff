/* Prints the size of every struct the Java binding lays out, and the offset of each field,
 * as the C compiler sees them in stampede.h: "name size" and "name.field offset" lines. */
#include <stddef.h>
#include <stdio.h>

#include "stampede.h"

#define SIZE(t) printf("%s %zu\n", #t, sizeof(t))
#define FIELD(t, f) printf("%s.%s %zu\n", #t, #f, offsetof(t, f))

int main(void) {
    SIZE(stp_neighbors);
    FIELD(stp_neighbors, has_below);
    FIELD(stp_neighbors, below);
    FIELD(stp_neighbors, has_above);
    FIELD(stp_neighbors, above);

    SIZE(stp_channel_stats);
    FIELD(stp_channel_stats, items);
    FIELD(stp_channel_stats, connections);
    FIELD(stp_channel_stats, open);
    FIELD(stp_channel_stats, puts);
    FIELD(stp_channel_stats, gets);
    FIELD(stp_channel_stats, reclaimed);
    FIELD(stp_channel_stats, skipped);
    FIELD(stp_channel_stats, full);

    SIZE(stp_queue_stats);
    FIELD(stp_queue_stats, waiting);
    FIELD(stp_queue_stats, held);
    FIELD(stp_queue_stats, puts);
    FIELD(stp_queue_stats, gets);
    FIELD(stp_queue_stats, consumed);
    FIELD(stp_queue_stats, redelivered);
    FIELD(stp_queue_stats, full);

    SIZE(stp_gc_stats);
    FIELD(stp_gc_stats, passes);
    FIELD(stp_gc_stats, reclaimed);
    FIELD(stp_gc_stats, floor);

    SIZE(stp_space_stats);
    FIELD(stp_space_stats, served);
    FIELD(stp_space_stats, malformed);
    FIELD(stp_space_stats, refused);
    FIELD(stp_space_stats, unreachable);
    FIELD(stp_space_stats, cache_hits);
    FIELD(stp_space_stats, spaces_lost);
    FIELD(stp_space_stats, pushed);
    FIELD(stp_space_stats, push_skipped);
    FIELD(stp_space_stats, push_received);
    FIELD(stp_space_stats, consume_failed);
    FIELD(stp_space_stats, events_sent);
    FIELD(stp_space_stats, events_received);
    FIELD(stp_space_stats, events_dropped);
    FIELD(stp_space_stats, events_lost);
    FIELD(stp_space_stats, puts_sent);
    FIELD(stp_space_stats, puts_refused);
    FIELD(stp_space_stats, view_hits);
    FIELD(stp_space_stats, register_hits);
    FIELD(stp_space_stats, leased);
    FIELD(stp_space_stats, lease_hits);
    FIELD(stp_space_stats, view_snapshots);
    FIELD(stp_space_stats, seen_refused);
    FIELD(stp_space_stats, sent_as_received);
    FIELD(stp_space_stats, sent_fresh);
    FIELD(stp_space_stats, loans_shared);
    FIELD(stp_space_stats, loans_plain);
    FIELD(stp_space_stats, invocations_sent);
    FIELD(stp_space_stats, invocations_served);
    FIELD(stp_space_stats, invocations_unknown);
    FIELD(stp_space_stats, invocations_failed);
    FIELD(stp_space_stats, answers_late);
    FIELD(stp_space_stats, denied);
    FIELD(stp_space_stats, quota_refused);

    SIZE(stp_watermark);
    FIELD(stp_watermark, zone);
    FIELD(stp_watermark, local);
    FIELD(stp_watermark, floor);
    FIELD(stp_watermark, watermark);
    FIELD(stp_watermark, holds);

    SIZE(stp_hold);
    FIELD(stp_hold, ts);
    FIELD(stp_hold, cause);
    FIELD(stp_hold, task);
    FIELD(stp_hold, container);

    SIZE(stp_pacer_stats);
    FIELD(stp_pacer_stats, on_time);
    FIELD(stp_pacer_stats, late);
    FIELD(stp_pacer_stats, skipped);
    FIELD(stp_pacer_stats, resyncs);

    /* Enum and scalar sizes the bindings assume. */
    printf("sizeof.stp_status %zu\n", sizeof(stp_status));
    printf("sizeof.stp_dtype %zu\n", sizeof(stp_dtype));
    printf("sizeof.stp_tick %zu\n", sizeof(stp_tick));
    printf("sizeof.size_t %zu\n", sizeof(size_t));
    printf("sizeof.bool %zu\n", sizeof(bool));
    return 0;
}
