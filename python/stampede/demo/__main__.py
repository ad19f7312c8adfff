"""``python -m stampede.demo``: the Smart Kiosk color tracker, live.

Runs the pipeline of :mod:`stampede.demo.pipeline` on a synthetic scene (or ``--video``),
prints a status line while it runs, checks the tracks against the scene's ground truth and
writes an annotated snapshot. Exit status: 0 when the accuracy check passes (or is skipped
for a video), 1 when it fails, 2 when the pipeline fails.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import cv2

import stampede as sp

from .pipeline import Kiosk, PipelineOptions, RunResult, rss_mb, run_pipeline
from .scene import FrameSource, SyntheticScene, VideoSource
from .vision import annotate, build_models, configure_opencv


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(
        prog="python -m stampede.demo",
        description=(
            "Smart Kiosk color tracker on Stampede: a paced digitizer, histogram/change "
            "detection, a splitter with K detection workers and a joiner, a low-fi tracker "
            "on the newest frame, and a decision stage correlating tracks with frames."
        ),
    )
    add = p.add_argument
    add("--width", type=int, help="frame width (default 640; a video keeps its own)")
    add("--height", type=int, help="frame height (default 480; a video keeps its own)")
    add("--targets", type=int, default=8, help="targets in the scene = color models (8)")
    add("--workers", type=int, default=2, help="detection workers K (2)")
    add("--seconds", type=float, default=20.0, help="how long the digitizer runs (20)")
    add("--fps", type=float, default=30.0, help="digitizer rate; 0 = unpaced, as fast as "
        "the bounded channels take frames (30)")
    add("--video", metavar="FILE", help="read frames from a video file instead of the "
        "synthetic scene (no ground truth, so no accuracy check)")
    add("--snapshot", metavar="PATH", default=os.path.join("demo-output", "kiosk.png"),
        help="annotated snapshot to write (demo-output/kiosk.png)")
    add("--quiet", action="store_true", help="no live status line, only the summary")
    add("--regions", type=int, default=2, help="horizontal bands per frame (2)")
    add("--model-groups", type=int, default=4, help="groups the models are dealt into (4)")
    add("--capacity", type=int, default=4, help="capacity of every channel (4)")
    add("--tolerance", type=float, default=3.0, help="pixels a centroid may be off (3)")
    add("--min-accuracy", type=float, default=0.9, help="fraction of hits to pass (0.9)")
    args = p.parse_args(argv)
    for name in ("targets", "workers", "regions", "model_groups", "capacity"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.seconds <= 0 or args.fps < 0:
        p.error("--seconds must be positive and --fps not negative")
    return args


class StatusLine:
    """The live status line: rewritten in place on a terminal, one line a second otherwise."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.tty = sys.stdout.isatty()
        self.last_print = 0.0
        self.width = 0

    def __call__(self, rt: sp.Runtime, kiosk: Kiosk, elapsed: float) -> None:
        if self.quiet:
            return
        now = time.perf_counter()
        if not self.tty and now - self.last_print < 0.95:
            return
        self.last_print = now
        mon = kiosk.monitor
        fps, latency = mon.window(min(1.0, max(elapsed, 0.1)), now)
        acc = mon.accuracy()
        with mon.lock:
            skipped, attended = mon.lowfi_skipped, mon.last_attended
        line = (
            f"{elapsed:5.1f}s | {fps:5.1f} fps | latency {_ms(latency)} | "
            f"low-fi skipped {skipped} | reclaimed {rt.gc_stats().reclaimed:,} | "
            f"RSS {rss_mb():.0f} MB"
        )
        if kiosk.source.has_truth:
            line += f" | accuracy {_pct(acc)}"
        line += f" | attending {'#' + str(attended) if attended is not None else '-'}"
        if self.tty:
            pad = max(0, self.width - len(line))
            self.width = len(line)
            sys.stdout.write("\r" + line + " " * pad)
        else:
            sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def end(self) -> None:
        """Leaves the status line's row."""
        if self.tty and not self.quiet and self.width:
            sys.stdout.write("\n")
            sys.stdout.flush()


def _ms(v: float) -> str:
    return "  - ms" if math.isnan(v) else f"{v:4.0f} ms"


def _pct(v: float) -> str:
    return "-" if math.isnan(v) else f"{100 * v:.1f}%"


def write_snapshot(
    path: str, r: RunResult, source: FrameSource, args: argparse.Namespace
) -> bool:
    """Annotates the last kept frame and writes it to ``path``; false when there is none."""
    snap = r.snapshot
    if snap is None:
        return False
    models = build_models(args.targets)
    lines = [
        f"Stampede kiosk  frame {snap.ts}  {args.workers} workers",
        f"{r.fps:.1f} fps  latency p50 {r.latency_ms_p50:.0f} ms",
    ]
    if source.has_truth:
        lines.append(f"accuracy {_pct(r.accuracy)} (+ = truth)")
    img = annotate(
        snap.frame, snap.detections, snap.truth, models, snap.lowfi, snap.attended, lines
    )
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    if not cv2.imwrite(path, img):
        raise OSError(f"could not write {path}")
    return True


def main(argv: list[str] | None = None) -> int:
    """Runs the demo; returns the exit status."""
    args = parse_args(argv)
    configure_opencv()
    source: FrameSource
    if args.video:
        source = VideoSource(args.video, args.width, args.height)
    else:
        source = SyntheticScene(
            args.width or 640, args.height or 480, args.targets, fps=args.fps or 30.0
        )
    models = build_models(args.targets)
    options = PipelineOptions(
        workers=args.workers,
        regions=args.regions,
        model_groups=args.model_groups,
        fps=args.fps or None,
        seconds=args.seconds,
        capacity=args.capacity,
        tolerance=args.tolerance,
    )
    rate = f"{args.fps:g} fps" if args.fps else "unpaced"
    origin = f"video {args.video}" if args.video else "synthetic scene"
    print(
        f"Stampede Smart Kiosk color tracker: {source.width}x{source.height} {origin}, "
        f"{args.targets} color models, "
        f"{args.workers} workers, {args.regions} bands x {args.model_groups} model groups, "
        f"digitizer {rate}, {args.seconds:g} s"
    )
    status = StatusLine(args.quiet)
    try:
        r = run_pipeline(source, models, options, status=status)
    except KeyboardInterrupt:
        status.end()
        print("interrupted")
        return 130
    except Exception as e:  # a stage failed: report it and exit with the pipeline status
        status.end()
        print(f"pipeline failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    finally:
        if isinstance(source, VideoSource):
            source.close()
    status.end()
    late = f" ({r.digitizer_skipped} late ticks skipped by the digitizer)"
    print(
        f"frames: {r.produced} digitized, {r.decided} decided in {r.seconds:.1f} s"
        + (late if r.digitizer_skipped else "")
    )
    print(
        f"rate: {r.fps:.1f} fps; end-to-end latency p50 {r.latency_ms_p50:.1f} ms, "
        f"p95 {r.latency_ms_p95:.1f} ms, p99 {r.latency_ms_p99:.1f} ms"
    )
    print(
        f"low-fi tracker: {r.lowfi_frames} frames, {r.lowfi_skipped} skipped as stale "
        "(newest unseen)"
    )
    print(
        f"memory: {r.reclaimed:,} items reclaimed by the watermark; "
        f"peak RSS {r.rss_mb_peak:.0f} MB"
    )
    if write_snapshot(args.snapshot, r, source, args):
        print(f"snapshot: {args.snapshot}")
    else:
        print("snapshot: no frame was decided, nothing written")
    if not source.has_truth:
        print("accuracy: no ground truth for a video, check skipped")
        return 0
    ok = r.scored > 0 and r.accuracy >= args.min_accuracy
    print(
        f"accuracy: {_pct(r.accuracy)} of {r.scored:,} target positions within "
        f"{args.tolerance:g} px of the ground truth (need {100 * args.min_accuracy:.0f}%): "
        f"{'PASS' if ok else 'FAIL'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
