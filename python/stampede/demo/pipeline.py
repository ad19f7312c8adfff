"""The Smart Kiosk color tracker as a graph of Stampede tasks.

Tasks, and the containers they get from and put into:

- digitizer: -> ``kiosk/frames`` (BGR frames), ``kiosk/meta`` (when each frame entered);
- histogram: ``kiosk/frames`` (next unseen) -> ``kiosk/hsv`` (HSV frames), ``kiosk/change``;
- splitter: ``kiosk/change`` -> ``kiosk/chunks`` (a queue of (band x model group) chunks);
- K workers: ``kiosk/chunks`` + ``kiosk/hsv`` (by exact timestamp) -> ``kiosk/blobs`` (queue);
- joiner: ``kiosk/blobs`` -> ``kiosk/tracks`` (each model's target, per frame);
- low-fi tracker: ``kiosk/frames`` (newest unseen) -> ``kiosk/lowfi``;
- decision: a Correlator over ``kiosk/tracks``, ``kiosk/frames``, ``kiosk/meta`` and
  ``kiosk/change`` (same timestamp), plus the newest of ``kiosk/lowfi`` ->
  ``kiosk/attention`` (a register).

The stages see containers only through their connections, so the same functions run in one
process (:func:`run_pipeline`) or split over address spaces (:mod:`stampede.demo.distributed`),
where a ``Kiosk`` holds this process's own containers and the others' it found by name.

Every task has a virtual time: the digitizer's is the next frame number, the splitter's the
next frame it may split, the others run at ``INFINITY`` and inherit timestamps from what
they get. Each consumes what it is done with, so the garbage-collection watermark follows
the slowest stage and every bounded channel stays within its capacity; a full channel makes
its producer wait (backpressure).

Workers read the HSV frame from ``kiosk/hsv`` by exact timestamp, as in the paper, where the
splitter only describes the work. A worker keeps the frame of its last chunk open (its next
chunk is often of the same frame) and, when it has nothing to do for a while, detaches so an
idle worker never holds the watermark back; it attaches again with its next chunk, whose
frame stays visible because the held chunk keeps the worker's visibility at its timestamp.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import deque
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

import numpy as np

import stampede as sp

from .scene import FrameSource, Image, Truth
from .vision import (
    Change,
    Chunk,
    ColorModel,
    Detection,
    InnerChunk,
    LowFi,
    attention,
    detect_chunk,
    join_blobs,
    lowfi_detect,
    plan_chunks,
    prepare,
    score,
    split_chunk,
)

# How long a blocking get waits before the task checks whether the run was aborted.
_POLL = 0.25
# A worker idle this long detaches from the frames so it does not hold the watermark back.
_WORKER_IDLE = 0.05


@dataclass
class PipelineOptions:
    """How the pipeline is laid out and run."""

    workers: int = 2
    """Detection workers (K)."""
    regions: int = 2
    """Horizontal bands a frame is split into."""
    model_groups: int = 4
    """Groups the color models are dealt into; chunks per frame = regions x groups."""
    fps: float | None = 30.0
    """Digitizer rate; ``None`` runs it as fast as the bounded channels let it."""
    seconds: float = 20.0
    """How long the digitizer produces frames (the pipeline then drains)."""
    max_frames: int | None = None
    """Stop the digitizer after this many frames (whichever comes first)."""
    capacity: int = 4
    """Capacity of every channel, so the number of frames in flight."""
    tolerance: float = 3.0
    """A detection within this many pixels of the truth counts as a hit."""
    snapshot_every: int = 15
    """The decision stage keeps a copy of every n-th frame for the snapshot."""
    warmup: float = 0.0
    """Seconds at the start left out of the steady-state figures."""


class LatencyHistogram:
    """Latencies in logarithmic buckets (1% wide): percentiles in constant memory, however
    long the demo runs."""

    _BASE_MS = 0.01
    _STEP = math.log(1.01)
    _BUCKETS = 1700  # 0.01 ms .. about 200 s

    def __init__(self) -> None:
        self.counts = np.zeros(self._BUCKETS, dtype=np.int64)
        self.total = 0

    def add(self, seconds: float) -> None:
        """Records one latency."""
        ms = max(seconds * 1e3, self._BASE_MS)
        b = min(int(math.log(ms / self._BASE_MS) / self._STEP), self._BUCKETS - 1)
        self.counts[b] += 1
        self.total += 1

    def percentile(self, q: float) -> float:
        """The ``q``-th percentile (0..100) in milliseconds (NaN when empty)."""
        if self.total == 0:
            return float("nan")
        rank = max(1, math.ceil(q / 100.0 * self.total))
        b = int(np.searchsorted(np.cumsum(self.counts), rank))
        # The bucket's geometric middle.
        return self._BASE_MS * math.exp((b + 0.5) * self._STEP)


@dataclass
class Snapshot:
    """What the decision stage keeps of a frame for the annotated snapshot."""

    ts: int
    frame: Image
    detections: list[Detection | None]
    truth: list[Truth]
    lowfi: LowFi | None
    attended: int | None


@dataclass
class Monitor:
    """Counters the stages update and the status line reads (all under ``lock``)."""

    warmup: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    started: float = 0.0
    produced: int = 0
    digitizer_skipped: int = 0
    decided: int = 0
    hits: int = 0
    scored: int = 0
    lowfi_frames: int = 0
    correlator_skipped: int = 0
    worker_attaches: int = 0
    chunks: int = 0
    latency: LatencyHistogram = field(default_factory=LatencyHistogram)
    steady_latency: LatencyHistogram = field(default_factory=LatencyHistogram)
    steady_first: float | None = None
    steady_last: float = 0.0
    steady_count: int = 0
    recent: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=512))
    snapshot: Snapshot | None = None
    last_attended: int | None = None
    last_motion: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)
    """CPU seconds each stage's thread used (filled in as stages end)."""

    def record(self, now: float, latency: float, hits: int, scored: int) -> None:
        """One frame decided ``latency`` seconds after it entered the pipeline."""
        with self.lock:
            self.decided += 1
            self.hits += hits
            self.scored += scored
            self.latency.add(latency)
            self.recent.append((now, latency))
            if now - self.started >= self.warmup:
                if self.steady_first is None:
                    self.steady_first = now
                else:
                    self.steady_count += 1
                self.steady_last = now
                self.steady_latency.add(latency)

    def steady_fps(self) -> float:
        """Frames decided per second after the warmup (NaN before two frames)."""
        with self.lock:
            if self.steady_first is None or self.steady_last <= self.steady_first:
                return float("nan")
            return self.steady_count / (self.steady_last - self.steady_first)

    def window(self, seconds: float, now: float) -> tuple[float, float]:
        """(fps, median latency in ms) over the last ``seconds``."""
        with self.lock:
            lat = [l for (t, l) in self.recent if now - t <= seconds]
        if not lat:
            return 0.0, float("nan")
        return len(lat) / seconds, float(np.median(lat)) * 1e3

    def accuracy(self) -> float:
        """Fraction of scored targets found within the tolerance (NaN when none scored)."""
        with self.lock:
            return self.hits / self.scored if self.scored else float("nan")


CHANNELS = ("frames", "meta", "hsv", "change", "tracks", "lowfi")
QUEUES = ("chunks", "blobs")
REGISTERS = ("attention",)
CONTAINERS = CHANNELS + QUEUES + REGISTERS
"""Every container of the pipeline, by short name (registered as ``kiosk/<name>``)."""


class Kiosk:
    """The containers of one pipeline run, and what its stages share.

    ``rt`` is a :class:`stampede.Runtime`, or a :class:`stampede.Space` (a runtime joined to
    an application). ``names`` limits the containers to those this process's stages use (all
    by default); of those, it creates the ones in ``owns`` (all by default) and looks the
    others up by name, waiting up to ``lookup_timeout`` seconds for another address space
    to create them. Those in ``private`` it creates without a name: this space's own, which
    no other space can find (an inner node's queues, whose names the front space has). ``parties`` is the number of threads that meet at ``ready`` (by default
    every stage, the workers and the digitizer).
    """

    frames: sp.Channel
    meta: sp.Channel
    hsv: sp.Channel
    change: sp.Channel
    tracks: sp.Channel
    lowfi: sp.Channel
    chunks: sp.Queue
    blobs: sp.Queue
    attention: sp.Register

    def __init__(
        self,
        rt: sp.Runtime,
        source: FrameSource,
        models: list[ColorModel],
        options: PipelineOptions,
        monitor: Monitor,
        *,
        names: Collection[str] = CONTAINERS,
        owns: Collection[str] | None = None,
        lookup_timeout: float = 60.0,
        parties: int | None = None,
        private: Collection[str] = (),
    ) -> None:
        self.source, self.models, self.options = source, models, options
        self.monitor = monitor
        cap = options.capacity
        per_frame = max(1, options.regions) * max(1, min(options.model_groups, len(models)))
        self._opened: list[sp.Channel | sp.Queue | sp.Register] = []
        for name in CONTAINERS:
            if name not in names:
                continue
            full = f"kiosk/{name}"
            mine: str | None = None if name in private else full
            here = owns is None or name in owns or name in private
            c: sp.Channel | sp.Queue | sp.Register
            if name in QUEUES:
                # Room for two frames of chunks lets the splitter run one frame ahead of the
                # workers.
                c = (
                    rt.queue(mine, capacity=2 * per_frame)
                    if here
                    else rt.lookup_queue(full, timeout=lookup_timeout)
                )
            elif name in REGISTERS:
                c = rt.register(mine) if here else rt.lookup_register(full, lookup_timeout)
            else:
                c = (
                    rt.channel(mine, capacity=cap)
                    if here
                    else rt.lookup_channel(full, timeout=lookup_timeout)
                )
            setattr(self, name, c)
            self._opened.append(c)
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.failed_at: float | None = None
        """When ``error`` was recorded (``time.monotonic()``)."""
        # Every stage attaches its connections before the digitizer puts its first frame
        # (a task at INFINITY sees only items put after it attached).
        self.ready = threading.Barrier(
            parties if parties is not None else len(STAGES) + 1 + options.workers
        )
        self._workers_left = options.workers
        self._lock = threading.Lock()

    def containers(self) -> list[sp.Channel | sp.Queue | sp.Register]:
        """Every container of the run that this process holds."""
        return list(self._opened)

    def abort(self, error: BaseException | None = None) -> None:
        """Stops the run: every blocked stage wakes up (its containers are closed, wherever
        they live)."""
        with self._lock:
            if error is not None and self.error is None:
                self.error = error
                self.failed_at = time.monotonic()
        self.stop.set()
        self.ready.abort()
        for c in self.containers():
            try:
                c.close()
            except sp.UnreachableError:
                pass  # its owner is gone: nobody is left waiting on it there

    def worker_done(self) -> bool:
        """Counts a worker out; true for the last one (which closes the blobs queue)."""
        with self._lock:
            self._workers_left -= 1
            return self._workers_left == 0


R = TypeVar("R")


def _arrivals(
    get: Callable[[], R], kiosk: Kiosk, on_idle: Callable[[], None] | None = None
) -> Iterator[R]:
    """What ``get`` (a get with a timeout) returns, until its container is closed or the
    run stops; ``on_idle`` runs each time it times out."""
    while True:
        try:
            got = get()
        except sp.Timeout:
            if on_idle is not None:
                on_idle()
            if kiosk.stop.is_set():
                return
            continue
        except sp.Closed:
            return
        yield got


def _stage(fn: Callable[..., R]) -> Callable[..., R | None]:
    """Runs a stage; a closed container ends it quietly, any other error aborts the run."""

    def run(task: sp.Task, kiosk: Kiosk, *args: Any) -> R | None:
        try:
            return fn(task, kiosk, *args)
        except (sp.Closed, threading.BrokenBarrierError):
            if kiosk.stop.is_set():
                return None
            raise
        except BaseException as e:
            kiosk.abort(e)
            raise
        finally:
            with kiosk.monitor.lock:
                kiosk.monitor.cpu[task.name] = time.thread_time()

    run.__name__ = fn.__name__
    run.__doc__ = fn.__doc__
    return run


@_stage
def digitizer(task: sp.Task, kiosk: Kiosk) -> int:
    """Grabs frames and puts frame n at timestamp n, paced to real time (paper, Fig. 6).

    Puts wait while ``kiosk/frames`` is full. When the pacer finds a frame late beyond its
    tolerance it skips the missed ticks: those frame numbers are never produced. Returns the
    number of frames produced.
    """
    opts, mon = kiosk.options, kiosk.monitor
    frames_out = task.attach_output(kiosk.frames)
    meta_out = task.attach_output(kiosk.meta)
    pacer = None
    if opts.fps:
        period = 1.0 / opts.fps
        pacer = task.pacer(period, tolerance=period / 2, on_late=sp.SKIP)
    kiosk.ready.wait()
    start = time.perf_counter()
    with mon.lock:
        mon.started = start
    n = produced = 0
    try:
        while not kiosk.stop.is_set():
            if time.perf_counter() - start >= opts.seconds:
                break
            if opts.max_frames is not None and produced >= opts.max_frames:
                break
            img = kiosk.source.frame(n)
            frames_out.put(n, img)
            # The frame's entry into the pipeline: the decision measures latency from here.
            meta_out.put(n, time.perf_counter())
            produced += 1
            n += 1
            task.set_virtual_time(n)
            with mon.lock:
                mon.produced = produced
            if pacer is not None:
                tick = pacer.sync(n)
                if tick.kind == "skip" and tick.skip_to is not None:
                    with mon.lock:
                        mon.digitizer_skipped += tick.skip_to - n
                    n = tick.skip_to
                    task.set_virtual_time(n)
    finally:
        kiosk.frames.close()
        kiosk.meta.close()
    return produced


@_stage
def histogram(task: sp.Task, kiosk: Kiosk) -> int:
    """Converts every frame to HSV and summarises it (change detection, which models'
    colors occur). Takes frames in order (``NEXT_UNSEEN``)."""
    frames_in = task.attach_input(kiosk.frames)
    hsv_out = task.attach_output(kiosk.hsv)
    change_out = task.attach_output(kiosk.change)
    kiosk.ready.wait()
    prev: Image | None = None
    done = 0
    try:
        for ts, frame in _arrivals(lambda: frames_in.get(sp.NEXT_UNSEEN, timeout=_POLL), kiosk):
            hsv, gray, change = prepare(frame, prev, kiosk.models)
            # The workers look for the HSV image once the change summary is out.
            hsv_out.put(ts, hsv)
            change_out.put(ts, change)
            frames_in.consume_until(ts)
            prev = gray
            done += 1
    finally:
        kiosk.hsv.close()
        kiosk.change.close()
    return done


@_stage
def splitter(task: sp.Task, kiosk: Kiosk) -> int:
    """Splits each frame's detection into (band x model group) chunks on ``kiosk/chunks``.

    It describes the work only: the workers read the pixels from ``kiosk/hsv``. Its virtual
    time is the next frame it may split (it starts at 0): that keeps the frame's HSV image
    from being reclaimed before the chunks (which then hold it themselves) are in the queue.
    Holding the change item open would do that in one address space, but when the change
    channel lives in another one, its owner's hold on the item reaches this space's collector
    only a little later.
    """
    opts = kiosk.options
    change_in = task.attach_input(kiosk.change)
    chunks_out = task.attach_output(kiosk.chunks)
    kiosk.ready.wait()
    prev_ts: int | None = None
    done = 0
    try:
        for ts, change in _arrivals(lambda: change_in.get(sp.NEXT_UNSEEN, timeout=_POLL), kiosk):
            assert isinstance(change, Change)
            plan = plan_chunks(
                ts, kiosk.source.height, change.present, opts.regions, opts.model_groups, prev_ts
            )
            for chunk in plan:
                chunks_out.put(ts, chunk)
            # Frames come in order: nothing older than the next one is split any more.
            task.set_virtual_time(ts + 1)
            change_in.consume_until(ts)
            prev_ts = ts
            done += 1
    finally:
        kiosk.chunks.close()
    return done


class _FrameHold:
    """A task's hold on the HSV frame of its current chunk in ``kiosk/hsv``: it attaches
    when a chunk first needs a frame (the held chunk keeps that frame visible), keeps the
    frame open for the frame's next chunk (chunks come in timestamp order) and lets go when
    the task is idle, so an idle task never holds the watermark back."""

    def __init__(self, task: sp.Task, kiosk: Kiosk, *, count_attaches: bool) -> None:
        self._task, self._kiosk, self._count = task, kiosk, count_attaches
        self._in: sp.ChannelInput | None = None
        self._ts: int | None = None
        self._frame: Image | None = None

    def get(self, ts: int) -> Image:
        if self._in is None:
            self._in = self._task.attach_input(self._kiosk.hsv)
            if self._count:
                with self._kiosk.monitor.lock:
                    self._kiosk.monitor.worker_attaches += 1
        if self._ts != ts or self._frame is None:
            # Older frames are no longer needed.
            self._in.consume_until(ts - 1)
            self._ts, self._frame = self._in.get(ts, timeout=None)
        return self._frame

    def release(self) -> None:
        if self._in is not None:
            self._in.detach()
            self._in, self._ts, self._frame = None, None, None


@_stage
def worker(task: sp.Task, kiosk: Kiosk) -> int:
    """Detects the chunk's models in the chunk's band; puts the blobs on ``kiosk/blobs``.
    A piece of a two-level split carries its frame's image; other chunks read it from
    ``kiosk/hsv``."""
    chunks_in = task.attach_input(kiosk.chunks)
    blobs_out = task.attach_output(kiosk.blobs)
    kiosk.ready.wait()
    frame = _FrameHold(task, kiosk, count_attaches=True)
    done = 0
    try:
        arrivals = _arrivals(
            lambda: chunks_in.get(timeout=_WORKER_IDLE), kiosk, on_idle=frame.release
        )
        for item in arrivals:
            work = item.value
            # A piece of an outer chunk (two-level split) goes back to its inner joiner whole.
            chunk = work.chunk if isinstance(work, InnerChunk) else work
            assert isinstance(chunk, Chunk)
            if chunk.models:
                image = work.image if isinstance(work, InnerChunk) else None
                if image is None:
                    image = frame.get(item.ts)
                blobs = detect_chunk(image, chunk.y0, chunk.y1, chunk.models, kiosk.models)
            else:
                blobs = []
            blobs_out.put(item.ts, (work, blobs))
            chunks_in.consume(item.ticket)
            done += 1
    finally:
        frame.release()
        if kiosk.worker_done():
            kiosk.blobs.close()
    with kiosk.monitor.lock:
        kiosk.monitor.chunks += done
    return done


@_stage
def joiner(task: sp.Task, kiosk: Kiosk) -> int:
    """Collects each frame's chunk results, merges blobs across band borders and puts the
    targets on ``kiosk/tracks`` at the frame's timestamp, frames in order.

    It holds a frame's result tickets until the frame is out: the held items keep its
    visibility at the frame's timestamp, which is what lets it put there.
    """
    blobs_in = task.attach_input(kiosk.blobs)
    tracks_out = task.attach_output(kiosk.tracks)
    kiosk.ready.wait()
    pending: dict[int, list[sp.QueueItem]] = {}
    complete: dict[int, int | None] = {}  # ts -> the frame split before it
    last: int | None = None
    done = 0
    try:
        for item in _arrivals(lambda: blobs_in.get(timeout=_POLL), kiosk):
            chunk: Chunk = item.value[0]
            got = pending.setdefault(item.ts, [])
            got.append(item)
            if len(got) < chunk.parts:
                continue
            complete[item.ts] = chunk.prev_ts
            # Emit every frame whose predecessor is out (usually just this one).
            progressed = True
            while progressed:
                progressed = False
                for ts, prev in list(complete.items()):
                    if prev is None or prev == last:
                        items = pending.pop(ts)
                        del complete[ts]
                        blobs = [b for it in items for b in it.value[1]]
                        tracks_out.put(ts, join_blobs(blobs, len(kiosk.models)))
                        for it in items:
                            blobs_in.consume(it.ticket)
                        last = ts
                        done += 1
                        progressed = True
    finally:
        kiosk.tracks.close()
    return done


@_stage
def inner_splitter(task: sp.Task, kiosk: Kiosk, outer: sp.Queue) -> int:
    """An inner node's splitter (two-level split): takes outer chunks from ``outer``, reads
    each one's HSV image from the front's ``kiosk.hsv`` (once per frame for the whole node,
    as the paper's inner splitters read the images directly from the histogram) and cuts it
    into pieces (``options.regions`` bands by ``options.model_groups`` model groups) on the
    node's own ``kiosk.chunks``, the image with them.

    It holds the frame as the workers of one space do (:class:`_FrameHold`)."""
    opts = kiosk.options
    outer_in = task.attach_input(outer)
    chunks_out = task.attach_output(kiosk.chunks)
    kiosk.ready.wait()
    frame = _FrameHold(task, kiosk, count_attaches=False)
    done = 0
    try:
        arrivals = _arrivals(
            lambda: outer_in.get(timeout=_WORKER_IDLE), kiosk, on_idle=frame.release
        )
        for item in arrivals:
            outer_chunk = item.value
            assert isinstance(outer_chunk, Chunk)
            image = frame.get(item.ts) if outer_chunk.models else None
            for piece in split_chunk(outer_chunk, opts.regions, opts.model_groups, image):
                chunks_out.put(item.ts, piece)
            outer_in.consume(item.ticket)
            done += 1
    finally:
        frame.release()
        kiosk.chunks.close()
    return done


@_stage
def inner_joiner(task: sp.Task, kiosk: Kiosk, outer: sp.Queue) -> int:
    """An inner node's joiner: gathers the pieces of each outer chunk from the node's
    ``kiosk.blobs`` and puts the outer chunk with all their blobs on ``outer`` (the outer
    joiner merges blobs across every band border)."""
    blobs_in = task.attach_input(kiosk.blobs)
    out = task.attach_output(outer)
    kiosk.ready.wait()
    pending: dict[tuple[int, int], list[sp.QueueItem]] = {}
    done = 0
    for item in _arrivals(lambda: blobs_in.get(timeout=_POLL), kiosk):
        piece: InnerChunk = item.value[0]
        key = (item.ts, piece.outer.part)
        got = pending.setdefault(key, [])
        got.append(item)
        if len(got) < piece.chunk.parts:
            continue
        del pending[key]
        out.put(item.ts, (piece.outer, [b for it in got for b in it.value[1]]))
        for it in got:
            blobs_in.consume(it.ticket)
        done += 1
    return done


@_stage
def lowfi_tracker(task: sp.Task, kiosk: Kiosk) -> int:
    """The low-fidelity tracker (paper, Fig. 7): always takes the newest frame it has not
    seen, skipping stale ones, so it stays current whatever the rest of the pipeline does."""
    frames_in = task.attach_input(kiosk.frames)
    lowfi_out = task.attach_output(kiosk.lowfi)
    kiosk.ready.wait()
    done = 0
    try:
        for ts, frame in _arrivals(lambda: frames_in.get(sp.NEWEST_UNSEEN, timeout=_POLL), kiosk):
            result = lowfi_detect(frame)
            lowfi_out.put(ts, result)
            frames_in.consume_until(ts)
            with kiosk.monitor.lock:
                kiosk.monitor.lowfi_frames += 1
            done += 1
    finally:
        kiosk.lowfi.close()
    return done


@_stage
def decision(task: sp.Task, kiosk: Kiosk) -> int:
    """Correlates each frame's tracks with the frame itself, its entry time and its change
    summary (same timestamp), adds the low-fi tracker's newest view, scores the tracks
    against the ground truth, decides whom the kiosk attends to and publishes that."""
    opts, mon, source = kiosk.options, kiosk.monitor, kiosk.source
    correlator = sp.Correlator(
        [
            task.attach_input(kiosk.tracks),
            task.attach_input(kiosk.frames),
            task.attach_input(kiosk.meta),
            task.attach_input(kiosk.change),
        ]
    )
    lowfi_in = task.attach_input(kiosk.lowfi)
    attention_out = task.attach_output(kiosk.attention)
    kiosk.ready.wait()
    lowfi: LowFi | None = None
    done = 0
    try:
        for matched in _arrivals(lambda: correlator.get(timeout=_POLL), kiosk):
            (ts, detections), (_, frame), (_, entered), (_, change) = matched.items
            try:
                lts, lowfi = lowfi_in.try_get(sp.NEWEST)
                lowfi_in.consume_until(lts)
            except (sp.Unavailable, sp.Closed):
                pass
            truth = source.truth(ts)
            hits, scored = score(detections, truth, opts.tolerance)
            attended = attention(detections, source.width, source.height)
            attention_out.write((ts, attended))
            if done % opts.snapshot_every == 0:
                snap = Snapshot(ts, np.array(frame), detections, truth, lowfi, attended)
                with mon.lock:
                    mon.snapshot = snap
            correlator.consume_until(matched)
            now = time.perf_counter()
            mon.record(now, now - entered, hits, scored)
            with mon.lock:
                mon.last_attended = attended
                mon.last_motion = change.motion
            done += 1
    finally:
        with mon.lock:
            mon.correlator_skipped = correlator.skipped
        correlator.close()
    return done


STAGES: list[tuple[str, Callable[..., Any], int]] = [
    ("decision", decision, sp.INFINITY),
    ("joiner", joiner, sp.INFINITY),
    ("lowfi", lowfi_tracker, sp.INFINITY),
    ("splitter", splitter, 0),
    ("histogram", histogram, sp.INFINITY),
]


@dataclass
class RunResult:
    """What a pipeline run measured."""

    produced: int
    decided: int
    seconds: float
    fps: float
    latency_ms_p50: float
    latency_ms_p95: float
    latency_ms_p99: float
    accuracy: float
    scored: int
    lowfi_frames: int
    lowfi_skipped: int
    """Frames the low-fi tracker passed over as stale (the frames channel's count)."""
    digitizer_skipped: int
    reclaimed: int
    chunks: int
    worker_attaches: int
    rss_mb_peak: float
    snapshot: Snapshot | None
    correlator_skipped: int = 0
    """Tracks the decision stage could not match with their frame."""
    threads: dict[str, int] = field(default_factory=dict)
    """Items each stage handled."""
    cpu: dict[str, float] = field(default_factory=dict)
    """CPU seconds each stage used."""


def rss_mb() -> float:
    """This process's resident set size in MiB (0 where /proc is unavailable)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


class StallWatch:
    """Aborts a run whose decision stage has decided no frame for ``timeout`` seconds,
    saying why with ``explain()`` (who holds the watermark back)."""

    def __init__(self, kiosk: Kiosk, timeout: float, explain: Callable[[], str]) -> None:
        self._kiosk, self._timeout, self._explain = kiosk, timeout, explain
        self._last, self._decided = time.perf_counter(), -1

    def check(self, now: float) -> None:
        with self._kiosk.monitor.lock:
            decided = self._kiosk.monitor.decided
        if decided != self._decided:
            self._last, self._decided = now, decided
        elif now - self._last > self._timeout and not self._kiosk.stop.is_set():
            self._kiosk.abort(
                RuntimeError(f"stalled: {decided} frames decided; {self._explain()}")
            )


def run_pipeline(
    source: FrameSource,
    models: list[ColorModel],
    options: PipelineOptions,
    *,
    status: Callable[[sp.Runtime, Kiosk, float], None] | None = None,
    status_every: float = 0.5,
    stall_timeout: float = 10.0,
    on_start: Callable[[sp.Runtime], object] | None = None,
) -> RunResult:
    """Runs the kiosk pipeline until the digitizer has produced for ``options.seconds``
    and every stage has drained; calls ``status(rt, kiosk, elapsed)`` periodically, and
    ``on_start(rt)`` once the runtime exists (what it returns is kept until the run ends).

    Raises the first stage error, or :class:`RuntimeError` with the runtime's explanation of
    who holds the watermark back if no frame gets decided for ``stall_timeout`` seconds.
    """
    monitor = Monitor(warmup=options.warmup)
    rss_peak = rss_mb()
    with sp.Runtime() as rt:
        started = on_start(rt) if on_start else None
        kiosk = Kiosk(rt, source, models, options, monitor)
        threads: dict[str, sp.TaskThread[Any]] = {}
        for name, fn, vt in STAGES:
            threads[name] = rt.spawn(fn, kiosk, vt=vt, name=name)
        for k in range(options.workers):
            threads[f"worker{k}"] = rt.spawn(worker, kiosk, vt=sp.INFINITY, name=f"worker{k}")
        threads["digitizer"] = rt.spawn(digitizer, kiosk, vt=0, name="digitizer")
        t0 = time.perf_counter()

        def holders() -> str:
            report = rt.explain()
            return "watermark held by: " + (
                "; ".join(h.description for h in report.holders()) or "none"
            )

        watch = StallWatch(kiosk, stall_timeout, holders)
        try:
            next_status = t0 + status_every
            while True:
                alive = [t for t in threads.values() if t.is_alive()]
                if not alive:
                    break
                alive[0].join(max(0.0, next_status - time.perf_counter()))
                now = time.perf_counter()
                if now < next_status and alive[0].is_alive():
                    continue
                next_status = max(next_status + status_every, now)
                rss_peak = max(rss_peak, rss_mb())
                if status is not None:
                    status(rt, kiosk, now - t0)
                watch.check(now)
        except BaseException as e:
            kiosk.abort(e)
            raise
        finally:
            for t in threads.values():
                t.join(5.0)
        elapsed = time.perf_counter() - t0
        if kiosk.error is not None:
            raise kiosk.error
        counts = {name: int(t.result(0) or 0) for name, t in threads.items()}
        reclaimed = rt.gc_stats().reclaimed
        lowfi_skipped = kiosk.frames.stats().skipped
    return summarize(
        monitor,
        seconds=elapsed,
        reclaimed=reclaimed,
        lowfi_skipped=lowfi_skipped,
        rss_mb_peak=rss_peak,
        threads=counts,
    )


def summarize(
    monitor: Monitor,
    *,
    seconds: float,
    reclaimed: int,
    lowfi_skipped: int,
    rss_mb_peak: float,
    threads: dict[str, int],
) -> RunResult:
    """The figures of a finished run, from its monitor and what the runtime counted."""
    with monitor.lock:
        snap = monitor.snapshot
    fps = monitor.steady_fps()
    hist = monitor.steady_latency if monitor.steady_latency.total else monitor.latency
    return RunResult(
        produced=monitor.produced,
        decided=monitor.decided,
        seconds=seconds,
        fps=fps,
        latency_ms_p50=hist.percentile(50),
        latency_ms_p95=hist.percentile(95),
        latency_ms_p99=hist.percentile(99),
        accuracy=monitor.accuracy(),
        scored=monitor.scored,
        lowfi_frames=monitor.lowfi_frames,
        lowfi_skipped=lowfi_skipped,
        correlator_skipped=monitor.correlator_skipped,
        digitizer_skipped=monitor.digitizer_skipped,
        reclaimed=reclaimed,
        chunks=monitor.chunks,
        worker_attaches=monitor.worker_attaches,
        rss_mb_peak=rss_mb_peak,
        snapshot=snap,
        threads=threads,
        cpu=dict(monitor.cpu),
    )
