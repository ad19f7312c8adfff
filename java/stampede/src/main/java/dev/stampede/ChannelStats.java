package dev.stampede;

import java.lang.foreign.MemorySegment;

/**
 * Counters of a channel.
 *
 * @param items items stored now
 * @param connections input connections attached now
 * @param open items gotten and not consumed, summed over connections
 * @param puts successful puts
 * @param gets successful gets
 * @param reclaimed items reclaimed (by the watermark or by reference counts)
 * @param skipped items passed over unseen by {@code NEWEST_UNSEEN} gets
 * @param full puts that failed because the channel was full
 */
public record ChannelStats(long items, long connections, long open, long puts, long gets,
                           long reclaimed, long skipped, long full) {
    static ChannelStats read(MemorySegment s) {
        long[] v = s.toArray(java.lang.foreign.ValueLayout.JAVA_LONG);
        return new ChannelStats(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
    }
}
