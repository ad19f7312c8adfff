package dev.stampede;

/**
 * Garbage-collection counters of one time zone.
 *
 * @param passes collection passes run
 * @param reclaimed items reclaimed
 * @param floor everything below this timestamp has been reclaimed
 */
public record GcStats(long passes, long reclaimed, long floor) {}
