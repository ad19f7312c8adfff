package dev.stampede;

/**
 * Every failure of a Stampede call: one subclass per {@link Status}, unchecked. A failed put
 * hands its item back ({@link #item()}); a get that found nothing says which timestamps are
 * nearest ({@link #below()}, {@link #above()}). An interrupted wait throws
 * {@link InterruptedException} instead, as the JDK's blocking calls do.
 */
public class StampedeException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final Status status;
    private final Long timestamp;
    private final transient Item item;
    private final Long below;
    private final Long above;

    StampedeException(Status status, String message, Long timestamp, Item item, Long below,
                      Long above) {
        super(message);
        this.status = status;
        this.timestamp = timestamp;
        this.item = item;
        this.below = below;
        this.above = above;
    }

    /** The C library's status for this failure. */
    public Status status() {
        return status;
    }

    /** The timestamp the failed call was about, or {@code null}. */
    public Long timestamp() {
        return timestamp;
    }

    /** The item of a failed put, handed back (the caller still owns it), or {@code null}. */
    public Item item() {
        return item;
    }

    /** The nearest available timestamp below a failed get's request, or {@code null}. */
    public Long below() {
        return below;
    }

    /** The nearest available timestamp above a failed get's request, or {@code null}. */
    public Long above() {
        return above;
    }

    /** The exception of the call that just failed on this thread with {@code status}. */
    static StampedeException last(Status status, Long ts, Item item) {
        String message = Native.lastError();
        if (message.isEmpty()) {
            message = Native.statusName(status.code());
        }
        Long below = null;
        Long above = null;
        if (status == Status.TIMEOUT || status == Status.UNAVAILABLE) {
            Long[] n = Native.lastNeighbors();
            below = n[0];
            above = n[1];
        }
        return make(status, message, ts, item, below, above);
    }

    static StampedeException make(Status status, String message, Long ts, Item item, Long below,
                                  Long above) {
        return switch (status) {
            case FULL -> new Full(message, ts, item);
            case TIMEOUT -> new Timeout(message, below, above);
            case UNAVAILABLE -> new Unavailable(message, below, above);
            case GONE -> new Gone(message, ts);
            case CLOSED -> new Closed(message, ts, item);
            case DETACHED -> new Detached(message, ts, item);
            case DUPLICATE -> new DuplicateTimestamp(message, ts, item);
            case BELOW_VISIBILITY -> new BelowVisibility(message, ts, item);
            case UNREACHABLE -> new Unreachable(message, ts, item);
            case NAME_TAKEN -> new NameTaken(message);
            case NOT_FOUND -> new NotFound(message);
            case WRONG_KIND -> new WrongKind(message);
            case INVALID_NAME -> new InvalidName(message);
            case CONFIG -> new ConfigError(message);
            case CONNECT -> new ConnectError(message);
            case AUTH_REJECTED -> new AuthRejected(message);
            case DENIED -> new Denied(message);
            case TOO_LARGE -> new TooLarge(message, ts, item);
            case PROTOCOL -> new ProtocolError(message);
            case WRONG_TYPE -> new WrongType(message);
            case TASK_EXITED -> new TaskExited(message);
            case ZONE_MISMATCH -> new ZoneMismatch(message);
            case TOO_MANY_CONNECTIONS -> new TooManyConnections(message);
            case UNKNOWN_TICKET -> new UnknownTicket(message);
            case UNSUPPORTED -> new NotLocal(message);
            case INVALID_ARGUMENT -> new InvalidArgument(message, ts, item);
            default -> new StampedeException(status, message, ts, item, null, null);
        };
    }

    /** A bounded container stayed full; the item is handed back. */
    public static final class Full extends StampedeException {
        private static final long serialVersionUID = 1L;

        Full(String m, Long ts, Item item) {
            super(Status.FULL, m, ts, item, null, null);
        }
    }

    /** Base of a get that found nothing; {@link #below()} and {@link #above()} are set. */
    public abstract static class GetFailed extends StampedeException {
        private static final long serialVersionUID = 1L;

        GetFailed(Status s, String m, Long below, Long above) {
            super(s, m, null, null, below, above);
        }
    }

    /** Nothing matched before the timeout. */
    public static final class Timeout extends GetFailed {
        private static final long serialVersionUID = 1L;

        Timeout(String m, Long below, Long above) {
            super(Status.TIMEOUT, m, below, above);
        }
    }

    /** Nothing matched now (a non-blocking get). */
    public static final class Unavailable extends GetFailed {
        private static final long serialVersionUID = 1L;

        Unavailable(String m, Long below, Long above) {
            super(Status.UNAVAILABLE, m, below, above);
        }
    }

    /** The timestamp can never appear again: collected, or consumed on this connection. */
    public static final class Gone extends StampedeException {
        private static final long serialVersionUID = 1L;

        Gone(String m, Long ts) {
            super(Status.GONE, m, ts, null, null, null);
        }
    }

    /** The container was closed (a put's item is handed back). */
    public static final class Closed extends StampedeException {
        private static final long serialVersionUID = 1L;

        Closed(String m, Long ts, Item item) {
            super(Status.CLOSED, m, ts, item, null, null);
        }
    }

    /** The connection was detached or its task exited (a put's item is handed back). */
    public static final class Detached extends StampedeException {
        private static final long serialVersionUID = 1L;

        Detached(String m, Long ts, Item item) {
            super(Status.DETACHED, m, ts, item, null, null);
        }
    }

    /** The channel already holds (or held) an item with this timestamp. */
    public static final class DuplicateTimestamp extends StampedeException {
        private static final long serialVersionUID = 1L;

        DuplicateTimestamp(String m, Long ts, Item item) {
            super(Status.DUPLICATE, m, ts, item, null, null);
        }
    }

    /** A put or virtual time below what the task may use. */
    public static final class BelowVisibility extends StampedeException {
        private static final long serialVersionUID = 1L;

        BelowVisibility(String m, Long ts, Item item) {
            super(Status.BELOW_VISIBILITY, m, ts, item, null, null);
        }
    }

    /** The owner of the container left, died or did not answer in time; a put's item is
     * handed back, and whether the owner stored it is unknown. */
    public static final class Unreachable extends StampedeException {
        private static final long serialVersionUID = 1L;

        Unreachable(String m, Long ts, Item item) {
            super(Status.UNREACHABLE, m, ts, item, null, null);
        }
    }

    /** A container with this name is already registered. */
    public static final class NameTaken extends StampedeException {
        private static final long serialVersionUID = 1L;

        NameTaken(String m) {
            super(Status.NAME_TAKEN, m, null, null, null, null);
        }
    }

    /** No container of this name appeared before the lookup's timeout. */
    public static final class NotFound extends StampedeException {
        private static final long serialVersionUID = 1L;

        NotFound(String m) {
            super(Status.NOT_FOUND, m, null, null, null, null);
        }
    }

    /** The name belongs to a container of another kind. */
    public static final class WrongKind extends StampedeException {
        private static final long serialVersionUID = 1L;

        WrongKind(String m) {
            super(Status.WRONG_KIND, m, null, null, null, null);
        }
    }

    /** An argument out of range or of the wrong form. */
    public static class InvalidArgument extends StampedeException {
        private static final long serialVersionUID = 1L;

        InvalidArgument(String m, Long ts, Item item) {
            super(Status.INVALID_ARGUMENT, m, ts, item, null, null);
        }

        InvalidArgument(Status s, String m) {
            super(s, m, null, null, null, null);
        }
    }

    /** A name that cannot be registered. */
    public static final class InvalidName extends InvalidArgument {
        private static final long serialVersionUID = 1L;

        InvalidName(String m) {
            super(Status.INVALID_NAME, m);
        }
    }

    /** An invalid setting for joining an application. */
    public static final class ConfigError extends StampedeException {
        private static final long serialVersionUID = 1L;

        ConfigError(String m) {
            super(Status.CONFIG, m, null, null, null, null);
        }
    }

    /** Joining failed: no router or peer reachable, or a bad endpoint. */
    public static final class ConnectError extends StampedeException {
        private static final long serialVersionUID = 1L;

        ConnectError(String m) {
            super(Status.CONNECT, m, null, null, null, null);
        }
    }

    /** A router or peer refused this address space's credentials or certificate. */
    public static final class AuthRejected extends StampedeException {
        private static final long serialVersionUID = 1L;

        AuthRejected(String m) {
            super(Status.AUTH_REJECTED, m, null, null, null, null);
        }
    }

    /**
     * The container's owner does not allow this address space's user the operation; the
     * message names the user, the operation and the container.
     */
    public static final class Denied extends StampedeException {
        private static final long serialVersionUID = 1L;

        Denied(String m) {
            super(Status.DENIED, m, null, null, null, null);
        }
    }

    /** A put's item is larger than the container's owner accepts from another address
     * space (its quota); the item is handed back. */
    public static final class TooLarge extends StampedeException {
        private static final long serialVersionUID = 1L;

        TooLarge(String m, Long ts, Item item) {
            super(Status.TOO_LARGE, m, ts, item, null, null);
        }
    }

    /** A message from another address space could not be decoded. */
    public static final class ProtocolError extends StampedeException {
        private static final long serialVersionUID = 1L;

        ProtocolError(String m) {
            super(Status.PROTOCOL, m, null, null, null, null);
        }
    }

    /** An item read as another type than it holds (an array accessor on text, say). */
    public static final class WrongType extends StampedeException {
        private static final long serialVersionUID = 1L;

        WrongType(String m) {
            super(Status.WRONG_TYPE, m, null, null, null, null);
        }
    }

    /** The task has exited. */
    public static final class TaskExited extends StampedeException {
        private static final long serialVersionUID = 1L;

        TaskExited(String m) {
            super(Status.TASK_EXITED, m, null, null, null, null);
        }
    }

    /** An output connection to a container of another time zone. */
    public static final class ZoneMismatch extends StampedeException {
        private static final long serialVersionUID = 1L;

        ZoneMismatch(String m) {
            super(Status.ZONE_MISMATCH, m, null, null, null, null);
        }
    }

    /** The channel has as many input connections as it accepts. */
    public static final class TooManyConnections extends StampedeException {
        private static final long serialVersionUID = 1L;

        TooManyConnections(String m) {
            super(Status.TOO_MANY_CONNECTIONS, m, null, null, null, null);
        }
    }

    /** No queue item with this ticket is held on this connection. */
    public static final class UnknownTicket extends StampedeException {
        private static final long serialVersionUID = 1L;

        UnknownTicket(String m) {
            super(Status.UNKNOWN_TICKET, m, null, null, null, null);
        }
    }

    /** A feature only the container's owner has (counters, garbage handler) asked of a
     * container another address space owns, or of an embedded runtime (space counters). */
    public static final class NotLocal extends StampedeException {
        private static final long serialVersionUID = 1L;

        NotLocal(String m) {
            super(Status.UNSUPPORTED, m, null, null, null, null);
        }
    }
}
