package dev.stampede;

/**
 * A register's value and the sequence number of the write that made it.
 *
 * @param seq the write's sequence number (increasing)
 * @param item the value
 */
public record RegisterValue(long seq, Item item) implements AutoCloseable {
    @Override
    public void close() {
        item.close();
    }
}
