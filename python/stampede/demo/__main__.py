"""``python -m stampede.demo``: the Smart Kiosk color tracker, live.

Runs the pipeline of :mod:`stampede.demo.pipeline` on a synthetic scene (or ``--video``),
prints a status line while it runs, checks the tracks against the scene's ground truth and
writes an annotated snapshot. ``--dashboard`` serves a live web page of the run.
``--distributed`` runs the same stages in three address spaces
on this host (:mod:`stampede.demo.distributed`). Exit status: 0 when the accuracy check
passes (or is skipped for a video), 1 when it fails, 2 when the pipeline fails, 130 when
interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys

import stampede as sp

from .distributed import SpaceReport, run_distributed
from .pipeline import Kiosk, PipelineOptions, RunResult, rss_mb, run_pipeline
from .report import StatusLine, print_summary
from .scene import FrameSource, SyntheticScene, VideoSource
from .vision import build_models, configure_opencv


AUTO = -1
"""``--workers auto`` / ``--regions auto``: chosen by the layout model."""


def _count_or_auto(text: str) -> int:
    return AUTO if text == "auto" else int(text)


def choose_layout(args: argparse.Namespace, width: int, height: int) -> None:
    """Replaces ``auto`` workers or regions by the layout model's choice for this machine
    and scene, calibrating it first if none is stored."""
    from . import tuning

    model, fresh = tuning.load_or_calibrate(
        width, height, args.targets, recalibrate=args.retune,
        progress=lambda done, total: print(f"  calibrating the layout: {done}/{total}",
                                           end="\r", flush=True),
    )
    workers, regions, fps = tuning.best(
        model,
        workers=None if args.workers == AUTO else args.workers,
        regions=None if args.regions == AUTO else args.regions,
    )
    how = "calibrated now" if fresh else "stored for this machine and scene"
    print(f"layout model ({how}): {model.formula}; picks {workers} workers and {regions} "
          f"bands, predicted {fps:.1f} frames/s unpaced")
    args.workers, args.regions = workers, regions


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
    add("--workers", type=_count_or_auto, default=2, help="detection workers K, or auto: "
        "chosen by the layout model calibrated for this machine and scene (2)")
    add("--seconds", type=float, default=20.0, help="how long the digitizer runs (20)")
    add("--fps", type=float, default=30.0, help="digitizer rate; 0 = unpaced, as fast as "
        "the bounded channels take frames (30)")
    add("--video", metavar="FILE", help="read frames from a video file instead of the "
        "synthetic scene (no ground truth, so no accuracy check)")
    add("--snapshot", metavar="PATH", default=os.path.join("demo-output", "kiosk.png"),
        help="annotated snapshot to write (demo-output/kiosk.png)")
    add("--quiet", action="store_true", help="no live status line, only the summary")
    add("--regions", type=_count_or_auto, default=2, help="horizontal bands per frame, or "
        "auto (2)")
    add("--retune", action="store_true", help="calibrate the layout model again even if "
        "one is stored for this machine and scene")
    add("--model-groups", type=int, default=4, help="groups the models are dealt into (4)")
    add("--capacity", type=int, default=4, help="capacity of every channel (4)")
    add("--tolerance", type=float, default=3.0, help="pixels a centroid may be off (3)")
    add("--min-accuracy", type=float, default=0.9, help="fraction of hits to pass (0.9)")
    add("--distributed", action="store_true", help="run the stages in three address spaces "
        "on this host: camera, analysis and display (this process, the Zenoh router)")
    add("--dashboard", nargs="?", const="127.0.0.1:0", metavar="HOST:PORT", help="serve "
        "a live web dashboard of the run (loopback, a free port unless given) and print its "
        "address")
    args = p.parse_args(argv)
    for name in ("targets", "workers", "regions", "model_groups", "capacity"):
        if getattr(args, name) != AUTO and getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.seconds <= 0 or args.fps < 0:
        p.error("--seconds must be positive and --fps not negative")
    return args


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
    if AUTO in (args.workers, args.regions):
        choose_layout(args, source.width, source.height)
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
        + (", distributed over three address spaces" if args.distributed else "")
    )
    status = StatusLine(args.quiet)

    def show(rt: sp.Runtime, kiosk: Kiosk, elapsed: float) -> None:
        status.show(
            kiosk,
            elapsed,
            reclaimed=rt.gc_stats().reclaimed,
            lowfi_skipped=kiosk.frames.stats().skipped,
            rss=rss_mb(),
        )

    def serve_dashboard(rt: sp.Runtime) -> sp.Dashboard:
        # A distributed run's display space shows every space; a local run its runtime.
        d = rt.dashboard(args.dashboard, title="Smart Kiosk")
        print(f"dashboard: {d.url}", flush=True)
        return d

    on_start = serve_dashboard if args.dashboard else None
    r: RunResult
    spaces: list[SpaceReport] = []
    try:
        if args.distributed:
            r, spaces = run_distributed(
                source, models, options, video=args.video, status=status,
                on_start=on_start,
            )
        else:
            r = run_pipeline(source, models, options, status=show, on_start=on_start)
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
    return print_summary(r, source, args, [s.line() for s in spaces])


if __name__ == "__main__":
    sys.exit(main())
