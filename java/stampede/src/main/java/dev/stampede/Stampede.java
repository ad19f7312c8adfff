package dev.stampede;

/** Constants and the library's version. */
public final class Stampede {
    private Stampede() {}

    /** The largest timestamp: a virtual time that holds nothing back. */
    public static final long INFINITY = Long.MAX_VALUE;

    /** A task's virtual time at creation: the lowest allowed now (the zone's floor). */
    public static final long AT_FLOOR = Long.MIN_VALUE;

    /** The C library's version, e.g. {@code "0.1.0"}. */
    public static String version() {
        return Native.version();
    }
}
