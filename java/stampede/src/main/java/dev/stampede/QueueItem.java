package dev.stampede;

/**
 * An item taken from a queue: its timestamp, the ticket to consume it with, and the item.
 * Closing it closes the item (it does not consume it).
 *
 * @param ts the item's timestamp
 * @param ticket what {@link QueueInput#consume(long)} takes
 * @param item the item
 */
public record QueueItem(long ts, long ticket, Item item) implements AutoCloseable {
    @Override
    public void close() {
        item.close();
    }
}
