"""Face detection on Concurrent Collections: the application of Chandramowlishwaran, Knobe
and Vuduc, "Performance evaluation of Concurrent Collections on high-performance multicore
computing systems" (IPDPS 2010, §4), against its sequential, OpenMP-style and PThreads-style
yardsticks.

Every image goes through a cascade of three Haar classifiers (OpenCV's cascades):

1. ``face``: ``haarcascade_frontalface_alt2`` over the whole image finds face candidates;
2. ``eyes``: each candidate, scaled to a ``NORM`` × ``NORM`` square, must show at least one
   eye (``haarcascade_eye``) in its upper 60 %;
3. ``mouth``: a candidate with an eye must show a mouth (``haarcascade_smile``) in its lower
   45 %.

An image *has a face* when a candidate passes all three stages; its detections are the boxes
that do. An image without a candidate costs one stage, one with a candidate two or three; the
later stages search an upscaled face finely, so at 500 × 500 an image with a face costs three
to four times one without.

The workload (:func:`generate`) is deterministic from a seed: grey images whose backgrounds are
crops, flips and rotations of scikit-image's textures (grass, gravel, brick, moon), four
quadrants each, and in some of them a real face (the astronaut's, or one of the 100 faces of
the LFW subset) pasted with a feathered edge at a random place, width and brightness. Faces
are dense in the first third of the sequence and sparse after it, so a static even split in
contiguous chunks gives the first thread most of the work.

Versions, each with ``cv2.setNumThreads(1)`` so OpenCV itself adds no threads:

- ``sequential``: one loop;
- ``static``: contiguous chunks of n/N images on N threads (the paper's OpenMP yardstick);
- ``queue``: N threads taking images from one shared queue (its PThreads yardstick);
- ``cnc``: a :mod:`stampede.cnc` graph with a step collection per stage; the face step puts
  a tag for the eye step only for images with candidates, the eye step one for the mouth step
  only for candidates with an eye, and whichever step rejects an image (or the mouth step)
  puts its detections;
- ``snet``: the :mod:`stampede.snet` network of ``apps/face_detect.snet`` (the S-Net paper's
  Fig. 3): a box per stage, the first two with two output types so a rejected image leaves
  the cascade at once, and a ``collect`` subnetwork counting the images with a face through a
  synchrocell.

OpenCV releases the GIL inside ``detectMultiScale``, so the threads of every parallel version
run the classifiers in parallel.

``run_benchmark`` returns a list of flat records (dicts), one per measured configuration:

- ``metric``: ``"face_detect_throughput"`` (the versions side by side at the default
  workload), ``"face_detect_image_size"`` (time against image side, the paper's Fig. 5) or
  ``"face_detect_image_count"`` (time against the number of images, its Fig. 6); the
  ``snet`` version's rows are named ``"snet_face_detect_images_per_s"``,
  ``"snet_face_detect_image_size"`` and ``"snet_face_detect_image_count"``;
- ``version``: ``"sequential"``, ``"static"``, ``"queue"``, ``"cnc"`` or ``"snet"``;
- ``workers`` (int; 1 for ``sequential``), ``images`` (int), ``size`` (int, the side of the
  square images in pixels), ``repeats`` (int);
- ``seconds``: the median wall time of the repeats (float), ``images_per_s``: ``images``
  divided by it (float), ``runs``: every repeat's wall time (list of float);
- ``vs_sequential``, ``vs_static``: the sequential (static) version's median over this
  one's, in the same experiment (float, or None when that version was not run);
- ``others_cpu_s``: the median CPU seconds other processes used during a repeat (float, or
  None off Linux): a loaded machine shows here;
- ``face_rate``: the fraction of images with a detected face, ``agreement``: the fraction
  whose verdict matches the generator's truth (floats), ``identical``: whether the version's
  detections equal the first version's (the sequential one's) on the same workload (bool);
- ``vs_cnc``: the CnC version's median over this one's (float, or None);
- on the ``cnc`` throughput record only, ``target`` (str) and ``met`` (bool): CnC at
  least 1.7× the sequential loop and 1.1× the static split; on the ``snet`` one, S-Net at
  least 0.9× CnC.

Command line: ``python apps/face_detect.py --help``.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

from stampede import cnc, snet

Image = NDArray[np.uint8]
Box = tuple[int, int, int, int]
Detections = tuple[Box, ...]

VERSIONS = ("sequential", "static", "queue", "cnc", "snet")
NETWORK = Path(__file__).with_name("face_detect.snet")
STAGES = ("face", "eyes", "mouth")

# Side of the square a face candidate is scaled to before the eye and mouth stages: eyes and
# mouths then have one size whatever the face's, well above the eye and smile cascades'
# windows (20 x 20, 36 x 18), so one set of parameters serves every face.
NORM = 192
EYE_ROWS = 0.60
MOUTH_ROWS = 0.55
# Pasted face widths in pixels, and the face stage's smallest window, below the narrowest.
FACE_WIDTHS = (80.0, 150.0)
MIN_FACE = 64
BRIGHTNESS = (0.75, 1.25)
# Probability of a face in the first third of the sequence and in the rest.
HEAD_RATE = 0.75
TAIL_RATE = 0.10
# Agreement with the truth that the command line and the tests require.
MIN_AGREEMENT = 0.9


def configure_opencv() -> None:
    """One OpenCV thread and no OpenCL, in every version: the parallelism is ours."""
    cv2.setNumThreads(1)
    cv2.ocl.setUseOpenCL(False)


# --- the workload ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """Images and, per image, the box of the pasted face (``None``: no face)."""

    images: list[Image]
    truth: list[Box | None]
    seed: int
    size: int

    def __len__(self) -> int:
        return len(self.images)


@dataclass(frozen=True)
class _Sources:
    textures: list[Image]
    # The astronaut's face with a margin, and where the face is in it.
    astronaut: Image
    astronaut_face: Box
    lfw: list[Image]


@cache
def _sources() -> _Sources:
    from skimage import data

    def load(name: str) -> NDArray[Any]:
        # scikit-image's loaders carry no annotations.
        loader: Callable[[], object] = getattr(data, name)
        return np.asarray(loader())

    textures = [load(t).astype(np.uint8) for t in ("grass", "gravel", "brick", "moon")]
    grey = cv2.cvtColor(load("astronaut"), cv2.COLOR_RGB2GRAY)
    # The face's box in astronaut.png, as OpenCV's frontal-face cascades find it.
    x, y, w, h = 177, 66, 95, 95
    m = int(0.3 * w)
    crop = np.ascontiguousarray(grey[y - m:y + h + m, x - m:x + w + m]).astype(np.uint8)
    # The first 100 entries of the LFW subset are faces (25 x 25, floats in [0, 1]).
    lfw = [np.round(f * 255.0).astype(np.uint8) for f in load("lfw_subset")[:100]]
    return _Sources(textures, crop, (m, m, w, h), lfw)


def _texture(rng: np.random.Generator, h: int, w: int) -> NDArray[np.float32]:
    """A crop of a random texture, rotated, flipped and with a random gain."""
    src = _sources().textures
    t = np.rot90(src[int(rng.integers(len(src)))], int(rng.integers(4)))
    if rng.integers(2):
        t = t[:, ::-1]
    if h > t.shape[0] or w > t.shape[1]:
        # Mirrored tiles, so the texture continues across the seams.
        tile = np.block([[t, t[:, ::-1]], [t[::-1], t[::-1, ::-1]]])
        t = np.tile(tile, (h // tile.shape[0] + 1, w // tile.shape[1] + 1))
    oy = int(rng.integers(t.shape[0] - h + 1))
    ox = int(rng.integers(t.shape[1] - w + 1))
    gain = rng.uniform(0.7, 1.2)
    return (t[oy:oy + h, ox:ox + w].astype(np.float32) * np.float32(gain)).clip(0, 255)


def _background(rng: np.random.Generator, size: int) -> NDArray[np.float32]:
    """Four quadrants of textures, split at a random point of the middle half."""
    img = np.empty((size, size), np.float32)
    cy = int(rng.integers(size // 4, 3 * size // 4))
    cx = int(rng.integers(size // 4, 3 * size // 4))
    for y0, y1 in ((0, cy), (cy, size)):
        for x0, x1 in ((0, cx), (cx, size)):
            img[y0:y1, x0:x1] = _texture(rng, y1 - y0, x1 - x0)
    return img


def _paste_face(rng: np.random.Generator, img: NDArray[np.float32]) -> Box:
    """Pastes a face at a random place, width and brightness; returns the face's box."""
    src = _sources()
    width = rng.uniform(*FACE_WIDTHS)
    if rng.integers(2):
        crop, (fx, fy, fw, fh) = src.astronaut, src.astronaut_face
        # The crop's margin shows the astronaut's surroundings: an ellipse inside the crop.
        inner, feather = 1.0, 0.25
    else:
        crop = src.lfw[int(rng.integers(len(src.lfw)))]
        fx, fy, fw, fh = 0, 0, crop.shape[1], crop.shape[0]
        # A tight crop: keep nearly all of it.
        inner, feather = 1.15, 0.3
    scale = width / fw
    ch, cw = round(crop.shape[0] * scale), round(crop.shape[1] * scale)
    interp = cv2.INTER_AREA if scale < 1 else cv2.INTER_CUBIC
    face = cv2.resize(crop, (cw, ch), interpolation=interp).astype(np.float32)
    face = (face * np.float32(rng.uniform(*BRIGHTNESS))).clip(0, 255)
    yy, xx = np.mgrid[0:ch, 0:cw].astype(np.float32)
    r = ((yy - (ch - 1) / 2) / (ch / 2)) ** 2 + ((xx - (cw - 1) / 2) / (cw / 2)) ** 2
    alpha = ((inner - r) / feather).clip(0, 1)
    size = img.shape[0]
    py = int(rng.integers(size - ch + 1))
    px = int(rng.integers(size - cw + 1))
    region = img[py:py + ch, px:px + cw]
    region[:] = region * (1 - alpha) + face * alpha
    return (px + round(fx * scale), py + round(fy * scale), round(fw * scale), round(fh * scale))


def generate(count: int = 400, size: int = 500, seed: int = 2010,
             head_rate: float = HEAD_RATE, tail_rate: float = TAIL_RATE) -> Workload:
    """``count`` grey ``size`` × ``size`` images; image ``i`` depends only on ``seed``,
    ``size``, ``i`` and whether it lies in the first third (where faces have probability
    ``head_rate``, against ``tail_rate`` after it)."""
    if size < 2 * FACE_WIDTHS[1]:
        raise ValueError(f"images must be at least {2 * FACE_WIDTHS[1]:.0f} pixels wide")
    images: list[Image] = []
    truth: list[Box | None] = []
    for i in range(count):
        rng = np.random.default_rng([seed, size, i])
        img = _background(rng, size)
        rate = head_rate if 3 * i < count else tail_rate
        truth.append(_paste_face(rng, img) if rng.random() < rate else None)
        images.append(np.round(img).astype(np.uint8))
    return Workload(images, truth, seed, size)


# --- the detector ---------------------------------------------------------------------------


class Detector:
    """The three classifier stages. OpenCV's cascades keep per-call state, so a detector
    serves one thread at a time (:class:`DetectorPool`)."""

    def __init__(self) -> None:
        path = _cascades()
        self._face = cv2.CascadeClassifier(path + "haarcascade_frontalface_alt2.xml")
        self._eye = cv2.CascadeClassifier(path + "haarcascade_eye.xml")
        self._mouth = cv2.CascadeClassifier(path + "haarcascade_smile.xml")
        if self._face.empty() or self._eye.empty() or self._mouth.empty():
            raise RuntimeError(f"OpenCV's Haar cascades are missing from {path}")

    def faces(self, image: Image) -> list[Box]:
        """Stage 1: face candidates, in a fixed order."""
        found = self._face.detectMultiScale(image, 1.2, 3, minSize=(MIN_FACE, MIN_FACE))
        return sorted(_box(b) for b in found)

    def eyes(self, image: Image, candidates: Sequence[Box]) -> list[Box]:
        """Stage 2: the candidates with at least one eye in their upper part."""
        rows = round(NORM * EYE_ROWS)
        return [b for b in candidates
                if len(self._eye.detectMultiScale(_normalised(image, b)[:rows], 1.1, 3,
                                                  minSize=(NORM // 10, NORM // 10))) > 0]

    def mouths(self, image: Image, candidates: Sequence[Box]) -> list[Box]:
        """Stage 3: the candidates with a mouth in their lower part."""
        top = round(NORM * MOUTH_ROWS)
        return [b for b in candidates
                if len(self._mouth.detectMultiScale(_normalised(image, b)[top:], 1.05, 15,
                                                    minSize=(NORM // 6, NORM // 12))) > 0]


def _cascades() -> str:
    """Where OpenCV 4.x keeps its Haar cascades (``cv2.data``, which its stubs leave out)."""
    path: str = getattr(cv2, "data").haarcascades
    return path


def _box(b: Sequence[int]) -> Box:
    return (int(b[0]), int(b[1]), int(b[2]), int(b[3]))


def _normalised(image: Image, box: Box) -> Image:
    x, y, w, h = box
    out = cv2.resize(image[y:y + h, x:x + w], (NORM, NORM), interpolation=cv2.INTER_LINEAR)
    return out.astype(np.uint8, copy=False)


class DetectorPool:
    """Detectors for whichever threads run stages: a stage borrows one and gives it back, so
    a pool warmed with one per worker never loads a cascade while a version is timed."""

    def __init__(self) -> None:
        self._idle: queue.SimpleQueue[Detector] = queue.SimpleQueue()

    def warm(self, count: int) -> None:
        """Makes sure ``count`` detectors are idle."""
        have = self._idle.qsize()
        for _ in range(count - have):
            self._idle.put(Detector())

    @contextmanager
    def borrow(self) -> Iterator[Detector]:
        try:
            det = self._idle.get_nowait()
        except queue.Empty:
            det = Detector()
        try:
            yield det
        finally:
            self._idle.put(det)


detectors = DetectorPool()


# --- the versions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class StageRecord:
    """One stage run on one image: seconds since the run started, and who ran it."""

    image: int
    stage: str
    worker: int
    start: float
    end: float


@dataclass
class Run:
    """One version's run over a workload."""

    version: str
    workers: int
    seconds: float
    detections: list[Detections]
    records: list[StageRecord] = field(default_factory=list)


class _Recorder:
    """Times the stages of whole-image jobs (the versions other than CnC)."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.records: list[StageRecord] = []
        self._lock = threading.Lock()

    def stage(self, image: int, stage: str, worker: int, start: float) -> None:
        end = time.perf_counter()
        rec = StageRecord(image, stage, worker, start - self.t0, end - self.t0)
        with self._lock:
            self.records.append(rec)


def _detect(index: int, image: Image, worker: int, rec: _Recorder) -> Detections:
    """The three stages on one image, as one job."""
    with detectors.borrow() as det:
        start = time.perf_counter()
        found = det.faces(image)
        rec.stage(index, "face", worker, start)
        if not found:
            return ()
        start = time.perf_counter()
        found = det.eyes(image, found)
        rec.stage(index, "eyes", worker, start)
        if not found:
            return ()
        start = time.perf_counter()
        found = det.mouths(image, found)
        rec.stage(index, "mouth", worker, start)
        return tuple(found)


def run_sequential(work: Workload) -> Run:
    """One loop over the images."""
    configure_opencv()
    detectors.warm(1)
    t0 = time.perf_counter()
    rec = _Recorder(t0)
    out = [_detect(i, img, 0, rec) for i, img in enumerate(work.images)]
    return Run("sequential", 1, time.perf_counter() - t0, out, rec.records)


def _threads(workers: int, body: Callable[[int], None]) -> None:
    threads = [threading.Thread(target=body, args=(k,), name=f"face-{k}")
               for k in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def run_static(work: Workload, workers: int) -> Run:
    """Thread ``k`` of ``workers`` takes the ``k``-th contiguous chunk of n/N images, like
    an OpenMP ``parallel for`` with the default static schedule."""
    configure_opencv()
    detectors.warm(workers)
    n = len(work)
    out: list[Detections] = [()] * n
    errors: list[BaseException] = []
    t0 = time.perf_counter()
    rec = _Recorder(t0)

    def body(k: int) -> None:
        try:
            for i in range(k * n // workers, (k + 1) * n // workers):
                out[i] = _detect(i, work.images[i], k, rec)
        except Exception as e:  # re-raised on the calling thread
            errors.append(e)

    _threads(workers, body)
    seconds = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return Run("static", workers, seconds, out, rec.records)


def run_queue(work: Workload, workers: int) -> Run:
    """``workers`` threads take image indices from one shared queue until it is empty,
    like a PThreads work queue."""
    configure_opencv()
    detectors.warm(workers)
    n = len(work)
    out: list[Detections] = [()] * n
    errors: list[BaseException] = []
    jobs: queue.SimpleQueue[int] = queue.SimpleQueue()
    for i in range(n):
        jobs.put(i)
    t0 = time.perf_counter()
    rec = _Recorder(t0)

    def body(k: int) -> None:
        try:
            while True:
                try:
                    i = jobs.get_nowait()
                except queue.Empty:
                    return
                out[i] = _detect(i, work.images[i], k, rec)
        except Exception as e:  # re-raised on the calling thread
            errors.append(e)

    _threads(workers, body)
    seconds = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return Run("queue", workers, seconds, out, rec.records)


_TAG_INT = re.compile(r"-?\d+")


def run_cnc(work: Workload, workers: int, executor: cnc.Executor | None = None) -> Run:
    """The cascade as a CnC graph: a step collection per stage, each prescribed by the tags
    the stage before puts for the images that pass it. ``executor``: a
    :class:`stampede.cnc.Executor` no other graph uses meanwhile (its trace is this run's),
    or ``None`` for a new one with ``workers`` workers."""
    configure_opencv()
    ex = cnc.Executor(workers=workers) if executor is None else executor
    detectors.warm(ex.workers)
    tracing = ex.tracing
    ex.tracing = True
    ex.take_trace()
    g = cnc.Graph(executor=ex)
    images = g.items("images")
    candidates = g.items("candidates")
    eyed = g.items("eyed")
    faces = g.items("faces")
    image_ids = g.tags("image_ids")
    candidate_ids = g.tags("candidate_ids")
    eyed_ids = g.tags("eyed_ids")

    def face(ctx: cnc.StepContext, tag: tuple[int | str, ...]) -> None:
        with detectors.borrow() as det:
            found = det.faces(ctx.get(images, tag))
        if found:
            ctx.put(candidates, tag, found)
            ctx.put_tag(candidate_ids, tag)
        else:
            ctx.put(faces, tag, ())

    def eyes(ctx: cnc.StepContext, tag: tuple[int | str, ...]) -> None:
        with detectors.borrow() as det:
            found = det.eyes(ctx.get(images, tag), ctx.get(candidates, tag))
        if found:
            ctx.put(eyed, tag, found)
            ctx.put_tag(eyed_ids, tag)
        else:
            ctx.put(faces, tag, ())

    def mouth(ctx: cnc.StepContext, tag: tuple[int | str, ...]) -> None:
        with detectors.borrow() as det:
            found = det.mouths(ctx.get(images, tag), ctx.get(eyed, tag))
        ctx.put(faces, tag, tuple(found))

    image_ids.prescribes(g.steps("face", face))
    candidate_ids.prescribes(g.steps("eyes", eyes))
    eyed_ids.prescribes(g.steps("mouth", mouth))

    t0 = time.perf_counter()
    for i, img in enumerate(work.images):
        g.put(images, (i,), img)
        g.put_tag(image_ids, (i,))
    g.wait()
    out = [_detections(g.get(faces, (i,)), i) for i in range(len(work))]
    seconds = time.perf_counter() - t0
    trace = ex.take_trace()
    ex.tracing = tracing
    origin = min((e.start for e in trace), default=0.0)
    records = [StageRecord(int(_TAG_INT.findall(e.tag)[0]), e.step, e.worker,
                           e.start - origin, e.end - origin) for e in trace]
    return Run("cnc", ex.workers, seconds, out, records)


_ID = re.compile(r"\bid=(\d+)")


def run_snet(work: Workload, workers: int, executor: cnc.Executor | None = None,
             policy: str = "furthest-advanced") -> Run:
    """The cascade as the S-Net network of ``face_detect.snet``: each stage a box, the
    images' verdicts counted by the ``collect`` synchrocell. ``executor`` as for
    :func:`run_cnc`."""
    configure_opencv()
    ex = cnc.Executor(workers=workers) if executor is None else executor
    detectors.warm(ex.workers)
    tracing = ex.tracing
    ex.tracing = True
    ex.take_trace()
    net = snet.Network.load(NETWORK)

    def passes(ctx: snet.BoxContext, img: Image, found: list[Box], id_: int) -> None:
        """A stage's two output types: the image with what it found, or no face."""
        if found:
            ctx.emit(0, img, found, id_)
        else:
            ctx.emit(1, (), id_, 0)

    def face(ctx: snet.BoxContext, img: Image, id_: int) -> None:
        with detectors.borrow() as det:
            passes(ctx, img, det.faces(img), id_)

    def eyes(ctx: snet.BoxContext, img: Image, cands: list[Box], id_: int) -> None:
        with detectors.borrow() as det:
            passes(ctx, img, det.eyes(img, cands), id_)

    def mouth(ctx: snet.BoxContext, img: Image, cands: list[Box], id_: int) -> None:
        with detectors.borrow() as det:
            found = tuple(det.mouths(img, cands))
        ctx.emit(0, found, id_, int(bool(found)))

    def count(ctx: snet.BoxContext, dets: Detections, id_: int, found: int, n: int,
              faces: int) -> None:
        ctx.emit(1, dets, id_)
        if n > 1:
            ctx.emit(0, n - 1, faces + found)
        else:
            ctx.emit(2, faces + found)

    run = net.run({"face": face, "eyes": eyes, "mouth": mouth, "count": count},
                  executor=ex, policy=policy)
    t0 = time.perf_counter()
    run.send({"<n>": len(work), "<faces>": 0})
    for i, img in enumerate(work.images):
        run.send({"img": img, "<id>": i})
    results = run.finish()
    seconds = time.perf_counter() - t0
    out: list[Detections | None] = [None] * len(work)
    total = None
    for r in results:
        if "<faces>" in r:
            total = r["<faces>"]
        else:
            out[r["<id>"]] = tuple(_box(b) for b in r["dets"])
    missing = [i for i, d in enumerate(out) if d is None]
    if missing or total != sum(bool(d) for d in out):
        raise RuntimeError(f"the network finished without answers for images {missing[:5]} "
                           f"or with a wrong count ({total})")
    trace = ex.take_trace()
    ex.tracing = tracing
    origin = min((e.start for e in trace), default=0.0)
    records = [StageRecord(int(m.group(1)), e.step, e.worker, e.start - origin,
                           e.end - origin)
               for e in trace if e.step in STAGES and (m := _ID.search(e.tag))]
    return Run("snet", ex.workers, seconds, [d for d in out if d is not None], records)


def _detections(value: Any, index: int) -> Detections:
    """An image's answer from the graph (unpickled: lists may come back for tuples)."""
    if value is None:
        raise RuntimeError(f"the graph finished without an answer for image {index}")
    return tuple(_box(b) for b in value)


def run_version(version: str, work: Workload, workers: int) -> Run:
    """Runs one of :data:`VERSIONS`."""
    if version == "sequential":
        return run_sequential(work)
    if version == "static":
        return run_static(work, workers)
    if version == "queue":
        return run_queue(work, workers)
    if version == "cnc":
        return run_cnc(work, workers)
    if version == "snet":
        return run_snet(work, workers)
    raise ValueError(f"unknown version {version!r}; one of {', '.join(VERSIONS)}")


# --- the accumulator ------------------------------------------------------------------------


@dataclass(frozen=True)
class Accuracy:
    """A run's verdicts against the generator's truth."""

    images: int
    faces_true: int
    faces_found: int
    agreement: float
    false_positives: int
    false_negatives: int
    # Images with a true face whose detections include a box centred on that face.
    located: int

    @property
    def face_rate(self) -> float:
        return self.faces_found / self.images if self.images else 0.0


def accuracy(work: Workload, detections: Sequence[Detections]) -> Accuracy:
    """Compares per-image verdicts (any detection = a face) with the truth."""
    agree = fp = fn = located = 0
    for truth, found in zip(work.truth, detections, strict=True):
        if (truth is not None) == bool(found):
            agree += 1
        elif truth is None:
            fp += 1
        else:
            fn += 1
        if truth is not None and any(_centred(b, truth) for b in found):
            located += 1
    n = len(work)
    return Accuracy(n, sum(t is not None for t in work.truth), sum(map(bool, detections)),
                    agree / n if n else 1.0, fp, fn, located)


def _centred(box: Box, face: Box) -> bool:
    x, y, w, h = box
    fx, fy, fw, fh = face
    cx, cy = x + w / 2, y + h / 2
    return fx <= cx <= fx + fw and fy <= cy <= fy + fh


def identical(runs: Sequence[Run]) -> bool:
    """Whether every run found the same boxes in every image."""
    return all(r.detections == runs[0].detections for r in runs[1:])


# --- the timeline ---------------------------------------------------------------------------

STAGE_COLOURS = {"face": "#4c72b0", "eyes": "#dd8452", "mouth": "#55a868"}


def draw_timeline(runs: Sequence[Run], path: Path) -> None:
    """Per version, a bar per stage run: x = time, y = worker, colour = stage (the paper's
    Fig. 7). Writes a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib.patches import Patch

    fig, axes = plt.subplots(len(runs), 1, figsize=(11, 1.2 + 1.1 * sum(r.workers for r in runs)),
                             sharex=True, squeeze=False)
    for ax, run in zip(axes[:, 0], runs, strict=True):
        for stage in STAGES:
            for w in range(run.workers):
                bars = [(r.start, r.end - r.start) for r in run.records
                        if r.worker == w and r.stage == stage]
                ax.broken_barh(bars, (w - 0.4, 0.8), facecolors=STAGE_COLOURS[stage],
                               edgecolor="none")
        ax.set_yticks(range(run.workers))
        ax.set_yticklabels([f"worker {w}" for w in range(run.workers)])
        ax.set_ylim(-0.6, run.workers - 0.4)
        ax.set_title(f"{run.version}: {len(run.detections)} images in {run.seconds:.2f} s",
                     loc="left", fontsize=10)
    axes[-1, 0].set_xlabel("time (s)")
    fig.legend(handles=[Patch(color=c, label=s) for s, c in STAGE_COLOURS.items()],
               loc="upper right", ncols=3, fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --- the benchmark --------------------------------------------------------------------------


def default_workers() -> int:
    """One per core."""
    return os.cpu_count() or 1


# The targets on two or more cores: CnC against the sequential loop and the static split.
TARGET_VS_SEQUENTIAL = 1.7
TARGET_VS_STATIC = 1.1
TARGET_SNET_VS_CNC = 0.9
SNET_METRICS = {
    "face_detect_throughput": "snet_face_detect_images_per_s",
    "face_detect_image_size": "snet_face_detect_image_size",
    "face_detect_image_count": "snet_face_detect_image_count",
}


def _busy_cpu_seconds() -> float | None:
    """CPU seconds every processor has spent busy since boot (Linux), or None."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(v) for v in f.readline().split()[1:]]
    except OSError:
        return None
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return (sum(ticks) - idle) / os.sysconf("SC_CLK_TCK")


def _timed(version: str, work: Workload, workers: int) -> tuple[Run, float | None]:
    """A run, and the CPU seconds other processes took meanwhile."""
    busy, ours = _busy_cpu_seconds(), time.process_time()
    run = run_version(version, work, workers)
    after, ours = _busy_cpu_seconds(), time.process_time() - ours
    others = None if busy is None or after is None else max(0.0, after - busy - ours)
    return run, others


def _measure(metric: str, version: str, work: Workload, workers: int, repeats: int,
             reference: list[Detections] | None) -> tuple[dict[str, Any], Run]:
    timed = [_timed(version, work, workers) for _ in range(repeats)]
    runs = [r for r, _ in timed]
    others = [o for _, o in timed if o is not None]
    seconds = statistics.median(r.seconds for r in runs)
    acc = accuracy(work, runs[0].detections)
    same = identical(runs) and (reference is None or runs[0].detections == reference)
    record: dict[str, Any] = {
        "metric": metric,
        "version": version,
        "workers": 1 if version == "sequential" else workers,
        "images": len(work),
        "size": work.size,
        "repeats": repeats,
        "seconds": seconds,
        "images_per_s": len(work) / seconds,
        "runs": [r.seconds for r in runs],
        "vs_sequential": None,
        "vs_static": None,
        "vs_cnc": None,
        "others_cpu_s": statistics.median(others) if others else None,
        "face_rate": acc.face_rate,
        "agreement": acc.agreement,
        "identical": same,
    }
    return record, runs[0]


def _compare(records: list[dict[str, Any]]) -> None:
    """Fills in one experiment's speedups, and the targets on the CnC throughput record."""
    seconds = {r["version"]: r["seconds"] for r in records}
    for r in records:
        if "sequential" in seconds:
            r["vs_sequential"] = seconds["sequential"] / r["seconds"]
        if "static" in seconds:
            r["vs_static"] = seconds["static"] / r["seconds"]
        if "cnc" in seconds:
            r["vs_cnc"] = seconds["cnc"] / r["seconds"]
        if r["metric"] == "face_detect_throughput" and r["version"] == "cnc":
            r["target"] = (f">={TARGET_VS_SEQUENTIAL}x sequential, "
                           f">={TARGET_VS_STATIC}x static")
            r["met"] = (r["vs_sequential"] is not None and r["vs_static"] is not None
                        and r["vs_sequential"] >= TARGET_VS_SEQUENTIAL
                        and r["vs_static"] >= TARGET_VS_STATIC)
        if r["metric"] == "face_detect_throughput" and r["version"] == "snet":
            r["target"] = f">={TARGET_SNET_VS_CNC}x cnc"
            r["met"] = r["vs_cnc"] is not None and r["vs_cnc"] >= TARGET_SNET_VS_CNC


def run_benchmark(images: int = 400, size: int = 500, workers: int | None = None,
                  repeats: int = 3, sizes: Sequence[int] = (300, 400, 500, 600, 700),
                  counts: Sequence[int] = (100, 200, 300, 400), sweep_images: int = 200,
                  sweep_repeats: int = 1, seed: int = 2010,
                  versions: Sequence[str] = VERSIONS,
                  log: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """The versions side by side on ``images`` images of ``size`` pixels (``repeats`` runs
    each, the median reported), then time against image size (``sweep_images`` images of
    each of ``sizes``) and against the number of images (``counts``, at ``size``), with
    ``workers`` threads (one per core by default). Returns the records described in the
    module documentation; ``log`` gets a line per record."""
    n_workers = workers or default_workers()
    records: list[dict[str, Any]] = []

    def measure(metric: str, work: Workload, reps: int) -> None:
        reference: list[Detections] | None = None
        batch: list[dict[str, Any]] = []
        for version in versions:
            record, run = _measure(metric, version, work, n_workers, reps, reference)
            if reference is None:
                reference = run.detections
            batch.append(record)
        _compare(batch)
        # S-Net's rows under names of their own, so that no CnC target reads them.
        for r in batch:
            if r["version"] == "snet":
                r["metric"] = SNET_METRICS[r["metric"]]
        records.extend(batch)
        if log:
            for r in batch:
                log(_describe(r))

    measure("face_detect_throughput", generate(images, size, seed), repeats)
    for s in sizes:
        measure("face_detect_image_size", generate(sweep_images, s, seed), sweep_repeats)
    for c in counts:
        measure("face_detect_image_count", generate(c, size, seed), sweep_repeats)
    return records


def _describe(r: dict[str, Any]) -> str:
    line = (f"{r['metric']:<24} {r['version']:<10} {r['images']:>4} x {r['size']:>3} px "
            f"{r['seconds']:6.2f} s {r['images_per_s']:6.1f} images/s")
    if r["vs_sequential"] is not None:
        line += f"  {r['vs_sequential']:4.2f}x sequential"
    if r["vs_static"] is not None:
        line += f"  {r['vs_static']:4.2f}x static"
    if r.get("vs_cnc") is not None and r["version"] not in ("sequential", "static", "queue"):
        line += f"  {r['vs_cnc']:4.2f}x cnc"
    if r["others_cpu_s"]:
        line += f"  (other processes: {r['others_cpu_s']:.1f} CPU s)"
    if "met" in r:
        line += f"  [{r['target']}: {'met' if r['met'] else 'missed'}]"
    return line


# --- the command line -----------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(
        prog="python apps/face_detect.py",
        description="Face detection as a three-stage cascade of Haar classifiers on a "
        "generated workload: sequential, a static split, a shared queue and Concurrent "
        "Collections, with their detections checked against each other and the truth.",
    )
    add = p.add_argument
    add("--images", type=int, default=400, help="images in the workload (400)")
    add("--size", type=int, default=500, help="side of the square images in pixels (500)")
    add("--seed", type=int, default=2010, help="seed of the workload (2010)")
    add("--workers", type=int, default=default_workers(),
        help="threads of the parallel versions (one per core)")
    add("--versions", default=",".join(VERSIONS),
        help=f"comma-separated versions to run ({','.join(VERSIONS)})")
    add("--timeline", type=Path, default=Path("demo-output/face-detect-timeline.png"),
        help="the stage timeline of the static and CnC versions "
        "(demo-output/face-detect-timeline.png)")
    add("--benchmark", action="store_true",
        help="run the benchmark sweeps instead (throughput, Fig. 5 and Fig. 6)")
    add("--repeats", type=int, default=3, help="runs per version with --benchmark (3)")
    add("--out", type=Path, help="with --benchmark: write the records as JSON here")
    args = p.parse_args(argv)
    args.versions = [v for v in args.versions.split(",") if v]
    unknown = sorted(set(args.versions) - set(VERSIONS))
    if unknown:
        p.error(f"unknown versions {', '.join(unknown)}; choose from {', '.join(VERSIONS)}")
    if args.images < 1 or args.workers < 1 or args.repeats < 1:
        p.error("--images, --workers and --repeats must be at least 1")
    if args.size < 2 * FACE_WIDTHS[1]:
        p.error(f"--size must be at least {2 * FACE_WIDTHS[1]:.0f}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Runs the versions, prints their rates and the accuracy; 0 when every version agrees
    and the agreement with the truth reaches MIN_AGREEMENT, 1 otherwise."""
    args = parse_args(argv)
    configure_opencv()
    if args.benchmark:
        records = run_benchmark(args.images, args.size, args.workers, args.repeats,
                                seed=args.seed, versions=args.versions, log=print)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(records, indent=2) + "\n")
        return 0 if all(r["identical"] for r in records) else 1

    work = generate(args.images, args.size, args.seed)
    print(f"{len(work)} images of {work.size} x {work.size}, "
          f"{sum(t is not None for t in work.truth)} with a face; {args.workers} workers")
    runs = [run_version(v, work, args.workers) for v in args.versions]
    seconds = {r.version: r.seconds for r in runs}
    for run in runs:
        line = f"{run.version:<11} {run.seconds:7.2f} s  {len(work) / run.seconds:7.1f} images/s"
        for base in ("sequential", "static", "cnc"):
            if VERSIONS.index(base) >= VERSIONS.index(run.version):
                continue
            if base in seconds:
                line += f"  {seconds[base] / run.seconds:4.2f}x {base}"
        print(line)
    acc = accuracy(work, runs[0].detections)
    same = identical(runs)
    print(f"faces found in {acc.faces_found} of {acc.images} images ({acc.face_rate:.1%}); "
          f"agreement with the truth {acc.agreement:.1%} ({acc.false_negatives} missed, "
          f"{acc.false_positives} false, {acc.located} of {acc.faces_true} located)")
    print("every version found the same boxes" if same else "the versions' detections DIFFER")
    drawn = [r for r in runs if r.version in ("static", "cnc", "snet")]
    if drawn:
        draw_timeline(drawn, args.timeline)
        print(f"timeline: {args.timeline}")
    return 0 if same and acc.agreement >= MIN_AGREEMENT else 1


if __name__ == "__main__":
    sys.exit(main())
