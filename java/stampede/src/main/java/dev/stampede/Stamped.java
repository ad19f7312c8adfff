package dev.stampede;

/**
 * An item and its timestamp, as a channel get returns them. Closing it closes the item.
 *
 * @param ts the item's timestamp
 * @param item the item
 */
public record Stamped(long ts, Item item) implements AutoCloseable {
    @Override
    public void close() {
        item.close();
    }
}
