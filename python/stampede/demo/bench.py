"""Benchmark hooks: the kiosk pipeline at full speed against the same work in one loop.

Both sides render the same synthetic frames and run the same functions of
:mod:`stampede.demo.vision` on them: change detection and histogram, detection of every
(band x model group) chunk, the join, and the decision's scoring. The pipeline also runs the
low-fidelity tracker, which the sequential loop leaves out, so the comparison if anything
favours the loop. OpenCV is single-threaded on both sides.

``fps`` is frames decided per second after a warmup; ``latency_ms_*`` is the time from a
frame's entry into the pipeline (its put into ``kiosk/frames``) to its decision, and in the
loop from the end of rendering to the end of the decision. With an unpaced digitizer the
bounded channels are full, so the pipeline's latency is about ``capacity / fps``.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .pipeline import LatencyHistogram, PipelineOptions, rss_mb, run_pipeline
from .scene import Image, SyntheticScene
from .vision import (
    attention,
    build_models,
    configure_opencv,
    detect_frame,
    plan_chunks,
    prepare,
    score,
)

_SCENE_KEYS = {"width", "height", "targets", "seed", "noise"}
_LAYOUT_KEYS = {"regions", "model_groups", "capacity", "tolerance"}


def _split_options(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    unknown = set(options) - _SCENE_KEYS - _LAYOUT_KEYS
    if unknown:
        raise TypeError(f"unknown options: {', '.join(sorted(unknown))}")
    scene = {k: v for k, v in options.items() if k in _SCENE_KEYS}
    layout = {k: v for k, v in options.items() if k in _LAYOUT_KEYS}
    return scene, layout


def _warmup(seconds: float) -> float:
    return min(1.0, 0.2 * seconds)


def measure_pipeline(workers: int, seconds: float, **scene_options: Any) -> dict[str, Any]:
    """Runs the kiosk pipeline with ``workers`` detection workers and an unpaced digitizer
    (it goes as fast as the bounded channels accept frames) for ``seconds``.

    ``scene_options``: ``width``, ``height``, ``targets``, ``seed``, ``noise`` for the scene;
    ``regions``, ``model_groups``, ``capacity``, ``tolerance`` for the pipeline's layout.
    Returns ``fps``, ``latency_ms_p50``, ``latency_ms_p99``, ``frames`` (decided),
    ``accuracy`` and some context (frame size and bytes, layout, items reclaimed, peak RSS).
    """
    configure_opencv()
    scene_kw, layout_kw = _split_options(scene_options)
    scene = SyntheticScene(**scene_kw)
    models = build_models(scene.targets)
    options = PipelineOptions(
        workers=workers, fps=None, seconds=seconds, warmup=_warmup(seconds), **layout_kw
    )
    r = run_pipeline(scene, models, options)
    return {
        "fps": r.fps,
        "latency_ms_p50": r.latency_ms_p50,
        "latency_ms_p95": r.latency_ms_p95,
        "latency_ms_p99": r.latency_ms_p99,
        "frames": r.decided,
        "accuracy": r.accuracy,
        "workers": workers,
        "width": scene.width,
        "height": scene.height,
        "frame_bytes": scene.width * scene.height * 3,
        "targets": scene.targets,
        "regions": options.regions,
        "model_groups": options.model_groups,
        "capacity": options.capacity,
        "lowfi_frames": r.lowfi_frames,
        "lowfi_skipped": r.lowfi_skipped,
        "reclaimed": r.reclaimed,
        "rss_mb_peak": r.rss_mb_peak,
    }


def measure_sequential(seconds: float, **scene_options: Any) -> dict[str, Any]:
    """The baseline: the same per-frame work as :func:`measure_pipeline` (rendering, change
    detection and histogram, every chunk's detection, the join, the decision's scoring and
    snapshot copies) in a plain loop on one thread, for ``seconds``.

    Takes the same options and returns the same keys (``workers`` is 0).
    """
    configure_opencv()
    scene_kw, layout_kw = _split_options(scene_options)
    defaults = PipelineOptions()
    regions = int(layout_kw.get("regions", defaults.regions))
    groups = int(layout_kw.get("model_groups", defaults.model_groups))
    tolerance = float(layout_kw.get("tolerance", defaults.tolerance))
    scene = SyntheticScene(**scene_kw)
    models = build_models(scene.targets)
    warmup = _warmup(seconds)
    latency = LatencyHistogram()
    hits = scored = frames = steady = 0
    prev: Image | None = None
    prev_ts: int | None = None
    kept: Image | None = None
    rss_peak = rss_mb()
    start = time.perf_counter()
    steady_first: float | None = None
    now = start
    n = 0
    while now - start < seconds:
        frame = scene.frame(n)
        entered = time.perf_counter()
        hsv, gray, change = prepare(frame, prev, models)
        chunks = plan_chunks(n, scene.height, change.present, regions, groups, prev_ts)
        detections = detect_frame(hsv, chunks, models)
        h, s = score(detections, scene.truth(n), tolerance)
        attention(detections, scene.width, scene.height)
        if frames % defaults.snapshot_every == 0:
            kept = np.array(frame)
        prev, prev_ts = gray, n
        hits, scored, frames, n = hits + h, scored + s, frames + 1, n + 1
        now = time.perf_counter()
        if now - start >= warmup:
            if steady_first is None:
                steady_first = now
            else:
                steady += 1
            latency.add(now - entered)
        if frames % 64 == 0:
            rss_peak = max(rss_peak, rss_mb())
    del kept
    elapsed = now - steady_first if steady_first is not None else 0.0
    return {
        "fps": steady / elapsed if elapsed > 0 else float("nan"),
        "latency_ms_p50": latency.percentile(50),
        "latency_ms_p95": latency.percentile(95),
        "latency_ms_p99": latency.percentile(99),
        "frames": frames,
        "accuracy": hits / scored if scored else float("nan"),
        "workers": 0,
        "width": scene.width,
        "height": scene.height,
        "frame_bytes": scene.width * scene.height * 3,
        "targets": scene.targets,
        "regions": regions,
        "model_groups": groups,
        "capacity": 0,
        "lowfi_frames": 0,
        "lowfi_skipped": 0,
        "reclaimed": 0,
        "rss_mb_peak": rss_peak,
    }
