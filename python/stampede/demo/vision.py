"""The color tracker's image processing, free of any threading or Stampede calls.

The pipeline stages and the sequential baseline both call these functions, so they do the
same work per frame. The heavy steps are OpenCV calls on whole images or bands, which
release the GIL: workers on different threads really run on different cores.

Stages, after the paper's color tracker (histogram, change detection, target detection):

- :func:`prepare`: HSV conversion, change detection against the previous frame, and a hue
  histogram of the saturated pixels that says which color models can be present at all;
- :func:`plan_chunks`: the splitter's work units, (horizontal band) x (group of models);
- :func:`detect_chunk`: a worker's job: back-projection of each model's hue-saturation
  histogram, smoothing, thresholding, morphological opening and connected components,
  giving blobs with their moments;
- :func:`join_blobs`: the joiner's job: merge blobs cut by band borders, pick each model's
  target;
- :func:`lowfi_detect`: the cheap low-fidelity tracker on a quarter-size image;
- :func:`score`, :func:`annotate`: the decision stage's bookkeeping and the snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import cv2
import numpy as np
import numpy.typing as npt

from .scene import Image, Truth, bgr_of_hue, hue_of

# Pixels saturated and bright enough to belong to a colored target.
SAT_MIN = 90
VAL_MIN = 50
# Back-projection (0..255) above which a smoothed pixel belongs to the model.
PROB_THRESHOLD = 60
# Connected components smaller than this are noise (a band may cut a target into a sliver,
# so this stays small; the joiner applies the real size test after merging).
CHUNK_MIN_AREA = 4
# A merged blob must be at least this large to be a target.
TARGET_MIN_AREA = 40
# Hue-histogram mass (pixels) a model needs before the splitter sends work for it.
PRESENCE_MIN_PIXELS = 20

_KERNEL = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (5, 5))


def configure_opencv() -> None:
    """Makes every OpenCV call single-threaded, so the pipeline's K workers are the only
    parallelism (and the sequential baseline really is sequential)."""
    cv2.setNumThreads(1)


@dataclass(frozen=True)
class ColorModel:
    """A target model: a hue-saturation histogram learnt from a swatch of its color."""

    index: int
    hue: int
    bgr: tuple[int, int, int]
    hist: npt.NDArray[np.float32]


def build_models(count: int, *, seed: int = 7, noise: float = 6.0) -> list[ColorModel]:
    """``count`` color models at evenly spread hues (the same hues the synthetic scene uses
    for its targets), each learnt from a noisy swatch like the camera would show."""
    rng = np.random.default_rng(seed)
    models = []
    for i in range(count):
        hue = hue_of(i, count)
        bgr = bgr_of_hue(hue)
        swatch = np.empty((48, 48, 3), dtype=np.float32)
        swatch[:] = bgr
        # Shade the swatch (lighting varies over a target) and add camera noise.
        swatch *= np.linspace(0.75, 1.1, 48, dtype=np.float32)[:, None, None]
        swatch += rng.normal(0.0, noise * 1.5, size=swatch.shape).astype(np.float32)
        patch = np.asarray(swatch.clip(0, 255).astype(np.uint8))
        hsv = cv2.cvtColor(patch, cv2.COLOR_BGR2HSV)
        mask = cv2.inRange(hsv, (0, SAT_MIN, VAL_MIN), (180, 255, 255))
        hist = cv2.calcHist([hsv], [0, 1], mask, [45, 16], [0, 180, 0, 256])
        cv2.normalize(hist, hist, 0, 255, cv2.NORM_MINMAX)
        models.append(ColorModel(i, hue, bgr, np.asarray(hist, dtype=np.float32)))
    return models


class Change(NamedTuple):
    """The histogram/change-detection stage's summary of a frame."""

    motion: float
    """Fraction of pixels that changed since the previous frame."""
    bbox: tuple[int, int, int, int]
    """Bounding box (x, y, w, h) of the changed pixels (zeros when nothing changed)."""
    present: tuple[int, ...]
    """Models whose hues occur often enough in the frame to be worth searching for."""


def prepare(
    frame: Image, prev_gray: Image | None, models: list[ColorModel]
) -> tuple[Image, Image, Change]:
    """HSV conversion, change detection and the hue histogram of one frame.

    Returns the HSV image (what the detection workers read), this frame's grey image (the
    next call's ``prev_gray``) and the frame's :class:`Change` summary.
    """
    hsv = np.asarray(cv2.cvtColor(frame, cv2.COLOR_BGR2HSV), dtype=np.uint8)
    gray = np.asarray(cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY), dtype=np.uint8)
    motion, bbox = 0.0, (0, 0, 0, 0)
    if prev_gray is not None and prev_gray.shape == gray.shape:
        diff = cv2.absdiff(gray, prev_gray)
        _, moved = cv2.threshold(diff, 25, 255, cv2.THRESH_BINARY)
        moved = cv2.morphologyEx(moved, cv2.MORPH_OPEN, _KERNEL)
        changed = cv2.countNonZero(moved)
        motion = changed / float(gray.size)
        if changed:
            x, y, w, h = cv2.boundingRect(moved)
            bbox = (int(x), int(y), int(w), int(h))
    saturated = cv2.inRange(hsv, (0, SAT_MIN, VAL_MIN), (180, 255, 255))
    hue_hist = np.asarray(cv2.calcHist([hsv], [0], saturated, [180], [0, 180]), dtype=np.float32)
    hue_hist = hue_hist.ravel()
    present = tuple(m.index for m in models if _hue_mass(hue_hist, m.hue) >= PRESENCE_MIN_PIXELS)
    return hsv, gray, Change(motion, bbox, present)


def _hue_mass(hist: npt.NDArray[np.float32], hue: int, spread: int = 6) -> float:
    idx = [(hue + d) % 180 for d in range(-spread, spread + 1)]
    return float(hist[idx].sum())


class Chunk(NamedTuple):
    """One unit of detection work: a horizontal band of one frame and a group of models."""

    ts: int
    part: int
    parts: int
    """How many chunks the frame was split into (the joiner waits for all of them)."""
    y0: int
    y1: int
    models: tuple[int, ...]
    prev_ts: int | None
    """The previous frame the splitter split, so the joiner emits frames in order."""


class InnerChunk(NamedTuple):
    """A piece of an outer chunk that an inner splitter cut (the two-level split, paper
    Figs. 22-23), with the frame's HSV image it fetched: the inner joiner gathers
    ``chunk.parts`` of them per outer chunk."""

    outer: Chunk
    chunk: Chunk
    image: Image | None
    """The frame's HSV image (None when the chunk has no models to look for)."""


def split_chunk(
    outer: Chunk, regions: int, model_groups: int, image: Image | None = None
) -> list[InnerChunk]:
    """An inner splitter's pieces of ``outer``: its band cut into ``regions`` bands, crossed
    with its models dealt into ``model_groups`` groups."""
    inner = plan_chunks(outer.ts, outer.y1 - outer.y0, outer.models, regions, model_groups,
                        outer.prev_ts)
    return [
        InnerChunk(outer, c._replace(y0=c.y0 + outer.y0, y1=c.y1 + outer.y0), image)
        for c in inner
    ]


def bands(height: int, regions: int) -> list[tuple[int, int]]:
    """``regions`` horizontal bands covering ``height`` rows, as (first, end) rows."""
    regions = max(1, min(regions, height))
    edges = [round(i * height / regions) for i in range(regions + 1)]
    return [(edges[i], edges[i + 1]) for i in range(regions)]


def plan_chunks(
    ts: int,
    height: int,
    present: tuple[int, ...],
    regions: int,
    model_groups: int,
    prev_ts: int | None,
) -> list[Chunk]:
    """The splitter's chunks for one frame: every band crossed with every model group (the
    models that may be present, dealt round-robin into ``model_groups`` groups)."""
    groups = [g for g in (present[i::model_groups] for i in range(max(1, model_groups))) if g]
    if not groups:
        # Nothing to look for: one empty chunk still carries the frame to the joiner.
        return [Chunk(ts, 0, 1, 0, height, (), prev_ts)]
    cells = [(y0, y1, g) for (y0, y1) in bands(height, regions) for g in groups]
    return [
        Chunk(ts, i, len(cells), y0, y1, g, prev_ts) for i, (y0, y1, g) in enumerate(cells)
    ]


class Blob(NamedTuple):
    """A connected region of one model's mask, with the moments needed to merge it."""

    model: int
    area: int
    sx: float
    """Sum of x over the blob's pixels."""
    sy: float
    """Sum of y over the blob's pixels."""
    x0: int
    y0: int
    x1: int
    """Exclusive."""
    y1: int
    """Exclusive."""


def detect_chunk(
    hsv: Image, y0: int, y1: int, model_ids: tuple[int, ...], models: list[ColorModel]
) -> list[Blob]:
    """Color segmentation of rows ``y0:y1`` of ``hsv`` for each model of the chunk.

    Per model: back-projection of its histogram, a Gaussian blur (a back-projection is
    speckled), a threshold, a morphological opening and connected components. Blob
    coordinates are in the full frame.
    """
    band = hsv[y0:y1]
    out: list[Blob] = []
    for mid in model_ids:
        model = models[mid]
        prob = cv2.calcBackProject([band], [0, 1], model.hist, [0, 180, 0, 256], 1)
        prob = cv2.GaussianBlur(prob, (7, 7), 0)
        _, mask = cv2.threshold(prob, PROB_THRESHOLD, 255, cv2.THRESH_BINARY)
        mask = cv2.morphologyEx(mask, cv2.MORPH_OPEN, _KERNEL)
        mask = cv2.morphologyEx(mask, cv2.MORPH_CLOSE, _KERNEL)
        n, _labels, stats, centroids = cv2.connectedComponentsWithStats(mask, connectivity=8)
        for i in range(1, n):
            x, y, w, h, area = (int(v) for v in stats[i])
            if area < CHUNK_MIN_AREA:
                continue
            cx, cy = float(centroids[i][0]), float(centroids[i][1]) + y0
            out.append(Blob(mid, area, cx * area, cy * area, x, y + y0, x + w, y + y0 + h))
    return out


class Detection(NamedTuple):
    """A model's target in one frame."""

    model: int
    x: float
    y: float
    area: int
    bbox: tuple[int, int, int, int]
    """(x0, y0, x1, y1), exclusive ends."""


def join_blobs(blobs: list[Blob], models: int) -> list[Detection | None]:
    """Merges blobs that a band border cut apart (one ends on the border row, the other
    starts there, and they overlap in x), then takes each model's largest merged blob as
    its target. Returns one entry per model (``None`` where the model was not found)."""
    by_model: dict[int, list[Blob]] = {}
    for b in blobs:
        by_model.setdefault(b.model, []).append(b)
    result: list[Detection | None] = [None] * models
    for mid, group in by_model.items():
        parent = list(range(len(group)))

        def find(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for i, a in enumerate(group):
            for j in range(i + 1, len(group)):
                b = group[j]
                touching = a.y1 == b.y0 or b.y1 == a.y0
                if touching and a.x0 < b.x1 and b.x0 < a.x1:
                    parent[find(i)] = find(j)
        merged: dict[int, list[Blob]] = {}
        for i, b in enumerate(group):
            merged.setdefault(find(i), []).append(b)
        best: Detection | None = None
        for parts in merged.values():
            area = sum(p.area for p in parts)
            if area < TARGET_MIN_AREA or (best is not None and area <= best.area):
                continue
            sx, sy = sum(p.sx for p in parts), sum(p.sy for p in parts)
            box = (
                min(p.x0 for p in parts),
                min(p.y0 for p in parts),
                max(p.x1 for p in parts),
                max(p.y1 for p in parts),
            )
            best = Detection(mid, sx / area, sy / area, area, box)
        if 0 <= mid < models:
            result[mid] = best
    return result


def detect_frame(
    hsv: Image, chunks: list[Chunk], models: list[ColorModel]
) -> list[Detection | None]:
    """All of a frame's chunks, one after the other, then the join: what the workers and
    the joiner do together, as one call (the sequential baseline)."""
    blobs: list[Blob] = []
    for c in chunks:
        blobs.extend(detect_chunk(hsv, c.y0, c.y1, c.models, models))
    return join_blobs(blobs, len(models))


class LowFi(NamedTuple):
    """The low-fidelity tracker's view: saturated blobs on a quarter-size image."""

    found: int
    centers: tuple[tuple[int, int], ...]


def lowfi_detect(frame: Image) -> LowFi:
    """Finds colored blobs of any hue on a quarter-size copy of the frame: cheap enough to
    run on the newest frame whatever the rest of the pipeline is doing."""
    # Plain subsampling: a quarter of the cost of averaging, and fine for a coarse view.
    size = (frame.shape[1] // 4, frame.shape[0] // 4)
    small = cv2.resize(frame, size, interpolation=cv2.INTER_NEAREST)
    hsv = cv2.cvtColor(small, cv2.COLOR_BGR2HSV)
    mask = cv2.inRange(hsv, (0, SAT_MIN + 40, VAL_MIN), (180, 255, 255))
    mask = cv2.morphologyEx(mask, cv2.MORPH_OPEN, cv2.getStructuringElement(cv2.MORPH_RECT, (3, 3)))
    n, _labels, stats, centroids = cv2.connectedComponentsWithStats(mask, connectivity=8)
    centers = tuple(
        (int(centroids[i][0] * 4), int(centroids[i][1] * 4))
        for i in range(1, n)
        if int(stats[i][cv2.CC_STAT_AREA]) >= 4
    )
    return LowFi(len(centers), centers)


def attention(detections: list[Detection | None], width: int, height: int) -> int | None:
    """The decision: the kiosk attends to the target nearest the middle of its view."""
    cx, cy = width / 2.0, height / 2.0
    best: tuple[float, int] | None = None
    for d in detections:
        if d is None:
            continue
        dist = (d.x - cx) ** 2 + (d.y - cy) ** 2
        if best is None or dist < best[0]:
            best = (dist, d.model)
    return None if best is None else best[1]


def score(
    detections: list[Detection | None], truth: list[Truth], tolerance: float
) -> tuple[int, int]:
    """(hits, scored): how many unambiguous targets were detected within ``tolerance``
    pixels of where they really are."""
    hits = scored = 0
    for t in truth:
        if not t.scored:
            continue
        scored += 1
        d = detections[t.index] if t.index < len(detections) else None
        if d is not None and (d.x - t.x) ** 2 + (d.y - t.y) ** 2 <= tolerance**2:
            hits += 1
    return hits, scored


def annotate(
    frame: Image,
    detections: list[Detection | None],
    truth: list[Truth],
    models: list[ColorModel],
    lowfi: LowFi | None,
    attended: int | None,
    lines: list[str],
) -> Image:
    """A copy of ``frame`` with the detections (boxes, centroids, labels), the ground truth
    (white crosses), the low-fi tracker's blobs (small grey circles), the attended target
    (double box) and some status lines."""
    img = np.array(frame, dtype=np.uint8, copy=True)
    if lowfi is not None:
        for x, y in lowfi.centers:
            cv2.circle(img, (x, y), 4, (200, 200, 200), 1, cv2.LINE_AA)
    for t in truth:
        x, y = int(round(t.x)), int(round(t.y))
        cv2.drawMarker(img, (x, y), (255, 255, 255), cv2.MARKER_CROSS, 10, 1)
    for d in detections:
        if d is None:
            continue
        color = models[d.model].bgr
        x0, y0, x1, y1 = d.bbox
        cv2.rectangle(img, (x0 - 2, y0 - 2), (x1 + 1, y1 + 1), color, 2)
        if d.model == attended:
            cv2.rectangle(img, (x0 - 6, y0 - 6), (x1 + 5, y1 + 5), (255, 255, 255), 1)
        cv2.circle(img, (int(round(d.x)), int(round(d.y))), 2, (0, 0, 0), -1)
        cv2.putText(
            img, f"#{d.model}", (x0, max(12, y0 - 6)), cv2.FONT_HERSHEY_SIMPLEX, 0.45,
            (255, 255, 255), 1, cv2.LINE_AA,
        )
    if lines:
        # Darken a banner under the text so it reads on any background.
        banner = img[: 10 + 18 * len(lines)]
        banner //= 3
    for i, line in enumerate(lines):
        org = (8, 18 + 18 * i)
        cv2.putText(img, line, org, cv2.FONT_HERSHEY_SIMPLEX, 0.5, (255, 255, 255), 1, cv2.LINE_AA)
    return img
