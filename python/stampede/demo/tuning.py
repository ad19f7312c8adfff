"""The kiosk pipeline's layout picked per deployment by a calibrated model.

How many detection workers and how many horizontal bands a frame is split into depends on
the machine (cores, OpenCV's speed, memory bandwidth) and the scene (frame size, number of
color models): more workers overlap more frames until the cores run out, more bands make
smaller chunks that cost more to plan and join. Rather than a fixed default, the demo can
time the pipeline at a dozen layouts, fit a model of the time per frame over
``(workers, regions)`` with :mod:`stampede.tune` (relative-error least squares, terms
pruned by their confidence intervals), and pick the layout the model predicts fastest
(parameter optimisation, as the thesis does for a radix sort's digit size). The model is
stored with the deployment's fingerprint, which names the frame size and models, so the next
run on the same machine and scene loads it instead of calibrating again.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from .. import tune
from .bench import measure_pipeline

TERMS = ["1", "workers", "workers^-1", "regions", "regions^-1", "workers^-1*regions^-1"]
"""Candidate terms: the frame's work divided among the workers, per-band overheads, and
the workers' own cost."""


def deployment(width: int, height: int, targets: int) -> str:
    """The deployment name stored in the fingerprint: the scene is part of it."""
    return f"kiosk demo, threads in one process, {width}x{height}, {targets} color models"


def spec(max_workers: int = 4, max_regions: int = 4) -> tune.ModelSpec:
    """The model of seconds per decided frame over the layout."""
    return tune.ModelSpec(
        "kiosk_frame",
        [("workers", 1, max_workers, True), ("regions", 1, max_regions, True)],
        TERMS,
    )


def calibrate(
    width: int,
    height: int,
    targets: int,
    *,
    points: int = 12,
    seconds: float = 1.0,
    max_workers: int = 4,
    max_regions: int = 4,
    progress: Callable[[int, int], object] | None = None,
) -> tune.Model:
    """Runs the pipeline unpaced for ``seconds`` at ``points`` layouts (corners first) and
    fits the time per frame."""
    s = spec(max_workers, max_regions)
    samples: list[tuple[list[float], float]] = []
    layouts = s.sample_points(points, seed=7)
    for i, (w, r) in enumerate(layouts):
        m = measure_pipeline(
            int(w), seconds, width=width, height=height, targets=targets, regions=int(r)
        )
        if m["fps"] <= 0:
            raise RuntimeError(f"no frame decided with {int(w)} workers and {int(r)} bands")
        samples.append(([w, r], 1.0 / m["fps"]))
        if progress is not None:
            progress(i + 1, len(layouts))
    return s.fit(samples)


def best(
    model: tune.Model,
    *,
    workers: int | None = None,
    regions: int | None = None,
    max_workers: int = 4,
    max_regions: int = 4,
) -> tuple[int, int, float]:
    """The layout predicted fastest, with its predicted frames per second; a given
    ``workers`` or ``regions`` stays fixed and only the other is chosen."""
    candidates = [
        (w, r, model.predict([w, r]))
        for w in ([workers] if workers else range(1, max_workers + 1))
        for r in ([regions] if regions else range(1, max_regions + 1))
    ]
    w, r, t = min(candidates, key=lambda c: c[2])
    if t == float("inf") or t <= 0:
        raise ValueError("the model does not cover the layouts asked for")
    return w, r, 1.0 / t


def default_path(width: int, height: int, targets: int) -> Path:
    """Where the demo keeps the model for this scene."""
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "stampede"
    return base / f"kiosk-{width}x{height}-{targets}.json"


def load_or_calibrate(
    width: int,
    height: int,
    targets: int,
    *,
    path: str | os.PathLike[str] | None = None,
    recalibrate: bool = False,
    **calibration: object,
) -> tuple[tune.Model, bool]:
    """The stored model for this deployment, or a fresh one (saved); and whether it was
    calibrated now. A model stored for another machine, build or scene is not used."""
    where = Path(path) if path is not None else default_path(width, height, targets)
    name = deployment(width, height, targets)
    if not recalibrate and where.exists():
        try:
            models, _ = tune.load_models(where, name)
            return models[0], False
        except tune.TuneError:
            pass
    model = calibrate(width, height, targets, **calibration)  # type: ignore[arg-type]
    where.parent.mkdir(parents=True, exist_ok=True)
    tune.save_models(where, [model], name)
    return model, True
