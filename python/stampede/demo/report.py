"""What the demo prints: the live status line, the summary and the annotated snapshot, the
same whether the pipeline ran in one process or over several."""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Sequence

import cv2

from .pipeline import Kiosk, RunResult
from .scene import FrameSource
from .vision import annotate, build_models


class StatusLine:
    """The live status line: rewritten in place on a terminal, one line a second otherwise."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.tty = sys.stdout.isatty()
        self.last_print = 0.0
        self.width = 0

    def show(
        self,
        kiosk: Kiosk,
        elapsed: float,
        *,
        reclaimed: int,
        lowfi_skipped: int,
        rss: float,
    ) -> None:
        """Shows the figures of ``kiosk``'s monitor with those the runtimes counted."""
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
            attended = mon.last_attended
        line = (
            f"{elapsed:5.1f}s | {fps:5.1f} fps | latency {ms(latency)} | "
            f"low-fi skipped {lowfi_skipped} | reclaimed {reclaimed:,} | RSS {rss:.0f} MB"
        )
        if kiosk.source.has_truth:
            line += f" | accuracy {pct(acc)}"
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


def ms(v: float) -> str:
    """Milliseconds, or a dash for none."""
    return "  - ms" if math.isnan(v) else f"{v:4.0f} ms"


def pct(v: float) -> str:
    """A percentage, or a dash for none."""
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
        lines.append(f"accuracy {pct(r.accuracy)} (+ = truth)")
    img = annotate(
        snap.frame, snap.detections, snap.truth, models, snap.lowfi, snap.attended, lines
    )
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    if not cv2.imwrite(path, img):
        raise OSError(f"could not write {path}")
    return True


def print_summary(
    r: RunResult,
    source: FrameSource,
    args: argparse.Namespace,
    spaces: Sequence[str] = (),
) -> int:
    """Prints the run's figures (and a line per address space of a distributed run),
    writes the snapshot and checks the accuracy; returns the exit status (0 when the check
    passes or is skipped, 1 when it fails)."""
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
    if r.correlator_skipped:
        print(f"decision: {r.correlator_skipped} tracks skipped, no frame to match them with")
    summed = " (summed over the address spaces)" if spaces else ""
    print(
        f"memory: {r.reclaimed:,} items reclaimed by the watermark; "
        f"peak RSS {r.rss_mb_peak:.0f} MB{summed}"
    )
    if spaces:
        print("address spaces:")
        for line in spaces:
            print(line)
    if write_snapshot(args.snapshot, r, source, args):
        print(f"snapshot: {args.snapshot}")
    else:
        print("snapshot: no frame was decided, nothing written")
    if not source.has_truth:
        print("accuracy: no ground truth for a video, check skipped")
        return 0
    ok = r.scored > 0 and r.accuracy >= args.min_accuracy
    print(
        f"accuracy: {pct(r.accuracy)} of {r.scored:,} target positions within "
        f"{args.tolerance:g} px of the ground truth (need {100 * args.min_accuracy:.0f}%): "
        f"{'PASS' if ok else 'FAIL'}"
    )
    return 0 if ok else 1
