package dev.stampede;

import java.lang.foreign.MemorySegment;
import java.util.function.LongConsumer;

/** A queue: items each taken by one getter, here or in another address space. Tasks reach it
 * through {@link QueueInput} and {@link QueueOutput}. */
public final class Queue extends Container {
    Queue(MemorySegment ptr, Runtime rt, String name) {
        super(ptr, Kind.QUEUE, rt, name);
    }

    @Override
    public Kind kind() {
        return Kind.QUEUE;
    }

    /** Calls {@code callback} with the timestamp of every item put from now on. */
    public Subscription onArrival(LongConsumer callback) {
        return new Subscription(this, callback);
    }

    /** Calls {@code handler} with every item consumed from now on (the queue's one garbage
     * handler: a second call replaces it). */
    public void onGarbage(GarbageHandler handler) {
        garbage(handler);
    }

    /** The queue's counters (zero for a queue another address space owns). */
    public QueueStats stats() {
        return counters(Layouts.QUEUE_STATS, Native.QUEUE_STATS, QueueStats::read);
    }

    @Override
    public String toString() {
        return "Queue(" + (name() == null ? "unnamed" : name()) + (isLocal() ? "" : ", remote")
                + ")";
    }
}
