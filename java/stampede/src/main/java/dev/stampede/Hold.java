package dev.stampede;

/**
 * One term of a zone's watermark: a timestamp it holds, and why.
 *
 * @param ts the timestamp it holds
 * @param cause why
 * @param task the task concerned, or 0
 * @param container the container concerned, or 0
 */
public record Hold(long ts, Cause cause, long task, long container) {
    /** Why a timestamp holds a zone's watermark back ({@code stp_hold_cause}). */
    public enum Cause {
        /** A live task's virtual time. */
        VIRTUAL_TIME,
        /** A put blocked on a full container. */
        PENDING_PUT,
        /** The oldest item not yet consumed on a channel input connection. */
        UNCONSUMED,
        /** Nothing at or above this timestamp was ever put in the zone. */
        HORIZON,
        /** The zone has no live task; its floor is kept for tasks that join later. */
        NO_LIVE_TASK,
        /** The lowest term another address space reported. */
        REMOTE,
        /** An unconsumed queue item. */
        QUEUE_ITEM,
        /** A cause this version does not name (see the report's text). */
        OTHER;

        static Cause of(int code) {
            return code >= 0 && code < values().length ? values()[code] : OTHER;
        }
    }
}
