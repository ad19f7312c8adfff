package dev.stampede;

import java.lang.foreign.MemorySegment;

/**
 * Counters of a queue.
 *
 * @param waiting items waiting to be gotten
 * @param held items gotten and not yet consumed
 * @param puts successful puts
 * @param gets successful gets
 * @param consumed items consumed
 * @param redelivered held items put back for another getter because their connection went
 * @param full puts that failed because the queue was full
 */
public record QueueStats(long waiting, long held, long puts, long gets, long consumed,
                         long redelivered, long full) {
    static QueueStats read(MemorySegment s) {
        long[] v = s.toArray(java.lang.foreign.ValueLayout.JAVA_LONG);
        return new QueueStats(v[0], v[1], v[2], v[3], v[4], v[5], v[6]);
    }
}
