package dev.stampede;

import java.util.List;

/**
 * A zone's watermark and what holds it ({@link Runtime#explain}).
 *
 * @param zone the zone
 * @param local the lowest of this runtime's own terms (what it reports to other spaces)
 * @param floor everything below this has been reclaimed
 * @param watermark the watermark the terms give now
 * @param holds every term, lowest first
 * @param text a readable report
 */
public record WatermarkReport(int zone, long local, long floor, long watermark, List<Hold> holds,
                              String text) {}
