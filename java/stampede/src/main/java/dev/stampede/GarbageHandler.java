package dev.stampede;

/** Told of each item reclaimed from a channel, or consumed from a queue. */
@FunctionalInterface
public interface GarbageHandler {
    /**
     * Called on a runtime thread with the item's timestamp and the item, which the handler
     * owns (close it, or let the cleaner release it). It must not throw; what it throws goes
     * to the thread's uncaught-exception handler.
     *
     * @param ts the item's timestamp
     * @param item the reclaimed item
     */
    void reclaimed(long ts, Item item);
}
