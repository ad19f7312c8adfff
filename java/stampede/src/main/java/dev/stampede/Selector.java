package dev.stampede;

/**
 * Which item a channel get asks for ({@code stp_selector}).
 *
 * @param kind the C selector code
 * @param ts the timestamp of an exact get (0 otherwise)
 */
public record Selector(int kind, long ts) {
    /** The oldest item not consumed on this connection. */
    public static final Selector OLDEST = new Selector(1, 0);
    /** The newest item not consumed on this connection. */
    public static final Selector NEWEST = new Selector(2, 0);
    /** The newest item this connection has never gotten; skips stale items. */
    public static final Selector NEWEST_UNSEEN = new Selector(3, 0);
    /** The oldest unconsumed item newer than this connection's last get (in-order
     * streaming). */
    public static final Selector NEXT_UNSEEN = new Selector(4, 0);

    /** The item with exactly timestamp {@code ts}. */
    public static Selector exact(long ts) {
        return new Selector(0, ts);
    }

    @Override
    public String toString() {
        return switch (kind) {
            case 0 -> "exact(" + ts + ")";
            case 1 -> "OLDEST";
            case 2 -> "NEWEST";
            case 3 -> "NEWEST_UNSEEN";
            default -> "NEXT_UNSEEN";
        };
    }
}
