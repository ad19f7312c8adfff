package dev.stampede;

import java.lang.foreign.MemorySegment;
import java.util.function.LongConsumer;

/** A channel: time-indexed items, at most one per timestamp, here or in another address
 * space. Tasks reach it through {@link ChannelInput} and {@link ChannelOutput}. */
public final class Channel extends Container {
    Channel(MemorySegment ptr, Runtime rt, String name) {
        super(ptr, Kind.CHANNEL, rt, name);
    }

    @Override
    public Kind kind() {
        return Kind.CHANNEL;
    }

    /** Calls {@code callback} with the timestamp of every item put from now on. */
    public Subscription onArrival(LongConsumer callback) {
        return new Subscription(this, callback);
    }

    /** Calls {@code handler} with every item reclaimed from now on (the channel's one garbage
     * handler: a second call replaces it). For a channel another address space owns, the owner
     * sends each reclaimed item here. */
    public void onGarbage(GarbageHandler handler) {
        garbage(handler);
    }

    /** The channel's counters (zero for a channel another address space owns). */
    public ChannelStats stats() {
        return counters(Layouts.CHANNEL_STATS, Native.CHANNEL_STATS, ChannelStats::read);
    }

    @Override
    public String toString() {
        return "Channel(" + (name() == null ? "unnamed" : name()) + (isLocal() ? "" : ", remote")
                + ")";
    }
}
