"""Video texture analysis: the L2 distance between every pair of frames (the lower
triangle of the matrix), as the Stampede paper's Fig. 10 computes it.

A *digitizer* task puts frame ``i`` into channel ``vt/frames`` at timestamp ``i`` and the
triangle's tiles into queue ``vt/work``; *worker* tasks take a tile, get its frames from the
channel, compare them and put the block into queue ``vt/results``; a *completion
recognizer* assembles the matrix and ends the run. A tile compares a block of frames with
another in *stripes* of pixel lines, so the working set (the tile's frames' stripe) stays in
cache: the compiled kernel sums squared differences of 8-bit pixels exactly, stripe by
stripe, without the GIL, so workers run in parallel.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np

import stampede as sp
from stampede._stampede import _ssd_stripes

Tile = tuple[int, int, int, int]
"""Rows ``[r0, r1)`` and columns ``[c0, c1)`` of the lower triangle (``c0 <= r0``)."""


def tiles(frames: int, size: int) -> list[Tile]:
    """The square tiles of side ``size`` that cover the lower triangle of a
    ``frames × frames`` matrix (the diagonal tiles included)."""
    if frames < 1 or size < 1:
        raise ValueError("tiles need frames and a positive size")
    edges = list(range(0, frames, size)) + [frames]
    out: list[Tile] = []
    for a in range(len(edges) - 1):
        for b in range(a + 1):
            out.append((edges[a], edges[a + 1], edges[b], edges[b + 1]))
    return out


def block(
    rows: np.ndarray, cols: np.ndarray, stripe_lines: int, *, lower: bool = False
) -> np.ndarray:
    """Squared L2 distances between every frame of ``rows`` and every frame of ``cols``
    (uint8, ``r × h × w × c`` and ``k × h × w × c``), compared in stripes of
    ``stripe_lines`` lines of pixels; exact. With ``lower`` (a tile on the diagonal, rows
    and columns the same frames) only the pairs below the diagonal are computed."""
    if stripe_lines < 1:
        raise ValueError("a stripe has at least one line")
    a = np.ascontiguousarray(rows, dtype=np.uint8)
    b = np.ascontiguousarray(cols, dtype=np.uint8)
    if a.shape[1:] != b.shape[1:] or a.ndim != 4:
        raise ValueError("rows and cols must be frames of one shape")
    line = a.shape[2] * a.shape[3]
    sums = _ssd_stripes(a.data, b.data, line * a.shape[1], line, stripe_lines, lower)
    return np.array(sums, dtype=np.float64).reshape(a.shape[0], b.shape[0])


def direct(frames: np.ndarray) -> np.ndarray:
    """The distance matrix computed directly, pair by pair: the reference."""
    n = frames.shape[0]
    f = frames.reshape(n, -1).astype(np.float64)
    d = np.zeros((n, n))
    for i in range(n):
        for j in range(i):
            d[i, j] = d[j, i] = float(np.sqrt(((f[i] - f[j]) ** 2).sum()))
    return d


@dataclass
class Analysis:
    """A finished analysis: the symmetric distance matrix and how it was computed."""

    distances: np.ndarray
    seconds: float
    workers: int
    tile: int
    stripe_lines: int
    tiles_done: dict[str, int] = field(default_factory=dict)
    """Tiles each worker compared."""
    worker_times: dict[str, WorkerTimes] = field(default_factory=dict)
    """Where each worker's time went."""

    @property
    def pairs(self) -> int:
        n = int(self.distances.shape[0])
        return n * (n - 1) // 2


def sequential(frames: np.ndarray, *, tile: int = 16, stripe_lines: int = 2) -> Analysis:
    """The same kernel, tiles and stripes on this thread, without Stampede: the baseline."""
    t0 = time.perf_counter()
    n = frames.shape[0]
    sq = np.zeros((n, n))
    for r0, r1, c0, c1 in tiles(n, tile):
        sq[r0:r1, c0:c1] = block(frames[r0:r1], frames[c0:c1], stripe_lines, lower=r0 == c0)
    d = _symmetric(sq)
    return Analysis(d, time.perf_counter() - t0, 0, tile, stripe_lines)


def _symmetric(sq: np.ndarray) -> np.ndarray:
    low = np.tril(np.sqrt(sq), -1)
    d: np.ndarray = low + low.T
    return d


class _Run:
    """The containers of one analysis and what its tasks share."""

    def __init__(self, rt: sp.Runtime, n: int, plan: list[Tile]) -> None:
        self.frames = rt.channel("vt/frames")
        self.work = rt.queue("vt/work")
        self.results = rt.queue("vt/results")
        self.n, self.plan = n, plan
        self.error: BaseException | None = None
        self.lock = threading.Lock()

    def fail(self, e: BaseException) -> None:
        with self.lock:
            if self.error is None:
                self.error = e
        for c in (self.frames, self.work, self.results):
            c.close()


def _digitizer(task: sp.Task, run: _Run, frames: np.ndarray) -> None:
    try:
        out = task.attach_output(run.frames)
        work = task.attach_output(run.work)
        for i in range(run.n):
            out.put(i, np.ascontiguousarray(frames[i]))
        for k, t in enumerate(run.plan):
            work.put(k, t)
    except sp.Closed:
        pass
    except BaseException as e:
        run.fail(e)
        raise


class TileComparer:
    """A worker's view of a frames channel: compares a tile's frames, got once each.

    It keeps the seconds spent getting frames (waiting for them and moving them: the
    worker's communication) apart from the seconds spent comparing."""

    def __init__(self, frames: sp.ChannelInput, stripe_lines: int) -> None:
        self._in, self._stripe = frames, stripe_lines
        self._cache: dict[int, np.ndarray] = {}
        self.get_seconds = 0.0
        self.compare_seconds = 0.0

    def _frame(self, i: int) -> np.ndarray:
        if i not in self._cache:
            t0 = time.perf_counter()
            self._cache[i] = np.asarray(self._in.get(i)[1])
            self.get_seconds += time.perf_counter() - t0
        return self._cache[i]

    def compare(self, t: Tile) -> np.ndarray:
        """The squared distances of tile ``t`` (rows × columns)."""
        r0, r1, c0, c1 = t
        rows = np.stack([self._frame(i) for i in range(r0, r1)])
        cols = np.stack([self._frame(i) for i in range(c0, c1)])
        t0 = time.perf_counter()
        out = block(rows, cols, self._stripe, lower=r0 == c0)
        self.compare_seconds += time.perf_counter() - t0
        return out

    def times(self) -> WorkerTimes:
        return WorkerTimes(self.get_seconds, self.compare_seconds)


@dataclass(frozen=True)
class WorkerTimes:
    """Where a worker's time went."""

    getting: float
    """Seconds getting frames: waiting for them and moving them (communication)."""
    comparing: float
    """Seconds in the kernel."""


def tile_pairs(t: Tile) -> int:
    """Frame pairs a tile compares (a diagonal tile only those below the diagonal)."""
    r0, r1, c0, c1 = t
    return (r1 - r0) * (r1 - r0 - 1) // 2 if r0 == c0 else (r1 - r0) * (c1 - c0)


def speedup_limit(plan: list[Tile], workers: int) -> float:
    """The speedup the tiling itself allows ``workers`` workers that take tiles in the
    plan's order, each as it becomes free, at a cost proportional to its pairs: the
    whole work over the busiest worker's (the bound Fig. 13 compares with)."""
    if workers < 1:
        raise ValueError("at least one worker")
    busy = [0] * workers
    for t in plan:
        k = busy.index(min(busy))
        busy[k] += tile_pairs(t)
    return sum(busy) / max(max(busy), 1)


def _worker(task: sp.Task, run: _Run, stripe_lines: int) -> tuple[int, WorkerTimes]:
    done = 0
    comparer: TileComparer | None = None
    try:
        comparer = TileComparer(task.attach_input(run.frames), stripe_lines)
        work = task.attach_input(run.work)
        results = task.attach_output(run.results)
        while True:
            job = work.get()
            t: Tile = job.value
            results.put(job.ts, (t, comparer.compare(t)))
            work.consume(job.ticket)
            done += 1
    except sp.Closed:
        return done, comparer.times() if comparer is not None else WorkerTimes(0.0, 0.0)
    except BaseException as e:
        run.fail(e)
        raise


def _recognizer(task: sp.Task, run: _Run) -> np.ndarray:
    try:
        results = task.attach_input(run.results)
        sq = np.zeros((run.n, run.n))
        for _ in run.plan:
            got = results.get()
            (r0, r1, c0, c1), b = got.value
            sq[r0:r1, c0:c1] = b
            results.consume(got.ticket)
        # Every tile is in: the workers end on the closed work queue.
        run.work.close()
        return sq
    except BaseException as e:
        run.fail(e)
        raise


def analyze(
    frames: np.ndarray,
    *,
    workers: int = 2,
    tile: int = 16,
    stripe_lines: int = 2,
    runtime: sp.Runtime | None = None,
) -> Analysis:
    """The distance matrix of ``frames`` (``n × h × w × 3`` uint8) by ``workers`` worker
    tasks over tiles of ``tile`` frames compared in stripes of ``stripe_lines`` lines, in
    ``runtime`` (a new embedded one by default)."""
    if frames.ndim != 4 or frames.shape[0] < 2 or frames.dtype != np.uint8:
        raise ValueError("frames must be uint8, n × height × width × channels with n >= 2")
    if workers < 1:
        raise ValueError("at least one worker")
    n = frames.shape[0]
    plan = tiles(n, tile)
    own = runtime is None
    rt = sp.Runtime() if runtime is None else runtime
    try:
        run = _Run(rt, n, plan)
        t0 = time.perf_counter()
        threads = [
            rt.spawn(_worker, run, stripe_lines, name=f"worker{k}") for k in range(workers)
        ]
        recognizer = rt.spawn(_recognizer, run, name="completion")
        rt.spawn(_digitizer, run, frames, name="digitizer")
        try:
            sq = recognizer.result()
        except BaseException:
            if run.error is not None:
                raise run.error from None
            raise
        ended = {f"worker{k}": t.result() for k, t in enumerate(threads)}
        seconds = time.perf_counter() - t0
        for c in (run.frames, run.work, run.results):
            c.close()
        rt.join_all()
    finally:
        if own:
            rt.close()
    return Analysis(
        _symmetric(sq), seconds, workers, tile, stripe_lines,
        {w: e[0] for w, e in ended.items()}, {w: e[1] for w, e in ended.items()},
    )
