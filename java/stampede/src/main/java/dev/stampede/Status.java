package dev.stampede;

/**
 * The outcome codes of the C library ({@code stp_status}): the one table from which every
 * {@link StampedeException} is made. The numbers are the core's stable error codes.
 */
public enum Status {
    /** Success. */
    OK(0),
    /** A null handle, a bad length or another invalid argument. */
    INVALID_ARGUMENT(1),
    /** A bounded container stayed full. */
    FULL(2),
    /** No item matched before the timeout. */
    TIMEOUT(3),
    /** No item matched now (a non-blocking get). */
    UNAVAILABLE(4),
    /** The requested item can never appear again (collected or consumed). */
    GONE(5),
    /** The container was closed. */
    CLOSED(6),
    /** The connection was detached or its task exited. */
    DETACHED(7),
    /** A channel already holds (or held) an item with this timestamp. */
    DUPLICATE(8),
    /** A timestamp or virtual time below the task's visibility. */
    BELOW_VISIBILITY(9),
    /** The container's address space left, died or did not answer in time. */
    UNREACHABLE(10),
    /** A container with this name is already registered. */
    NAME_TAKEN(11),
    /** No container of this name appeared in time. */
    NOT_FOUND(12),
    /** The name belongs to a container of another kind. */
    WRONG_KIND(13),
    /** The name cannot be used. */
    INVALID_NAME(14),
    /** The join configuration is invalid. */
    CONFIG(15),
    /** No router or peer could be reached. */
    CONNECT(16),
    /** The credentials or certificate were rejected. */
    AUTH_REJECTED(17),
    /** A malformed message arrived. */
    PROTOCOL(18),
    /** The item is not of the asked type. */
    WRONG_TYPE(19),
    /** The task has exited. */
    TASK_EXITED(20),
    /** An output connection to a container of another time zone. */
    ZONE_MISMATCH(21),
    /** The channel accepts no more input connections. */
    TOO_MANY_CONNECTIONS(22),
    /** No item with this ticket is held on this connection. */
    UNKNOWN_TICKET(23),
    /** A waiting call gave up because its thread was interrupted. */
    INTERRUPTED(26),
    /** The operation is not available on this container where it lives. */
    UNSUPPORTED(27),
    /** A cluster task ended by failing or panicking. */
    TASK_FAILED(28),
    /** A cluster task was cancelled, or a wait gave up because its task was. */
    CANCELLED(29),
    /** The container's owner does not allow this space's user the operation. */
    DENIED(30),
    /** A put's item is larger than the container's owner accepts from another space. */
    TOO_LARGE(31),
    /** An internal error was caught at the boundary. */
    INTERNAL(99);

    private final int code;

    Status(int code) {
        this.code = code;
    }

    /** The C library's number for this status. */
    public int code() {
        return code;
    }

    /** The status of a C code; {@link #INTERNAL} for a number this version does not know. */
    public static Status of(int code) {
        for (Status s : values()) {
            if (s.code == code) {
                return s;
            }
        }
        return INTERNAL;
    }

    /** Throws the exception of a failed call made on this thread just now. */
    static void check(int code) {
        if (code != 0) {
            throw StampedeException.last(of(code), null, null);
        }
    }
}
