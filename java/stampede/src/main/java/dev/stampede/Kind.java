package dev.stampede;

/** The kinds of container; their order indexes the C library's per-kind functions. */
public enum Kind {
    /** Time-indexed items, each gotten by any number of connections. */
    CHANNEL,
    /** Items each taken by one getter. */
    QUEUE,
    /** One current value. */
    REGISTER
}
