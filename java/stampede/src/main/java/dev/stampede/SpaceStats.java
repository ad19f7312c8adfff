package dev.stampede;

import java.lang.foreign.MemorySegment;

/**
 * Counters of an address space joined to a distributed application (the Rust
 * {@code SpaceStats}; the same names in every face).
 *
 * @param served requests served for other address spaces
 * @param malformed requests that could not be decoded
 * @param refused requests refused because their address space had left
 * @param unreachable operations that failed because an owner was unreachable
 * @param cacheHits gets answered from this space's cache of remote items
 * @param spacesLost address spaces seen leaving or dying
 * @param pushed items pushed ahead to remote readers (one per reader)
 * @param pushSkipped new items not pushed because the pusher was behind
 * @param pushReceived items other spaces pushed here
 * @param consumeFailed consumes sent without waiting that this space, their owner, refused
 * @param eventsSent arrival and garbage events sent to subscribed spaces
 * @param eventsReceived events received from owners and dispatched here
 * @param eventsDropped events dropped because a queue was full or a send failed
 * @param eventsLost events an owner numbered that never arrived here
 * @param putsSent puts into remote channels sent without waiting for their owner
 * @param putsRefused of those, puts their owner refused (reported by the next put or flush)
 * @param viewHits gets on remote channels answered from pushed items, without a round trip
 * @param registerHits reads of remote registers answered from pushed values
 * @param leased items of remote queues taken ahead into leases
 * @param leaseHits gets on remote queues answered from a lease
 * @param viewSnapshots snapshots of remote channels taken to start or rebuild a view
 * @param seenRefused gets answered from a view that this space, as owner, found no longer valid
 * @param sentAsReceived large items sent in the buffer they arrived or were lent in
 * @param sentFresh large items handed to Zenoh afresh (copied once)
 * @param loansShared loans for remote channels lent in shared memory
 * @param loansPlain loans for remote channels lent in plain memory instead
 * @param invocationsSent invocations of named code this space sent (calls and one-way)
 * @param invocationsServed invocations this space ran a handler for
 * @param invocationsUnknown invocations that reached this space for a name it does not serve
 * @param invocationsFailed failures of this space's invocations reported back to it
 * @param answersLate answers that arrived after their call stopped waiting
 * @param denied requests this space, as owner, refused under its access rules
 * @param quotaRefused requests this space, as owner, refused as over a quota
 */
public record SpaceStats(
        long served,
        long malformed,
        long refused,
        long unreachable,
        long cacheHits,
        long spacesLost,
        long pushed,
        long pushSkipped,
        long pushReceived,
        long consumeFailed,
        long eventsSent,
        long eventsReceived,
        long eventsDropped,
        long eventsLost,
        long putsSent,
        long putsRefused,
        long viewHits,
        long registerHits,
        long leased,
        long leaseHits,
        long viewSnapshots,
        long seenRefused,
        long sentAsReceived,
        long sentFresh,
        long loansShared,
        long loansPlain,
        long invocationsSent,
        long invocationsServed,
        long invocationsUnknown,
        long invocationsFailed,
        long answersLate,
        long denied,
        long quotaRefused) {
    static SpaceStats read(MemorySegment s) {
        long[] v = s.toArray(java.lang.foreign.ValueLayout.JAVA_LONG);
        return new SpaceStats(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13], v[14], v[15], v[16], v[17], v[18], v[19], v[20], v[21], v[22], v[23], v[24], v[25],
                v[26], v[27], v[28], v[29], v[30], v[31], v[32]);
    }
}
