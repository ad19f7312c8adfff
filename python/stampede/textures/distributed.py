"""Video texture analysis across address spaces, with the paper's two work distributions
(§VI-A, Figs. 10-11).

This process is the *source*: its digitizer puts each frame once into each channel that
needs it, and its completion recognizer collects the blocks from ``vt/results``. The
triangle's tile rows are split into contiguous runs of about equal work, one per compute
space; the source computes the first run itself, and every other space (attached through a
node agent, running ``python -m stampede.cluster``) runs :func:`space_role`: worker tasks
that compare the space's tiles with frames from the space's own ``vt/frames/<k>`` and put
the blocks into the source's ``vt/results``, and under chaining a *data mover* task.

Every space reads frames only from its own channel, which its upstream puts them into: a
frame crosses each link it needs to cross once, as one put, and no space is sent frames it
does not need (an owner pushes new items to every reader of its channel, which a slow
reader of another space's channel would pay for with frames it never reads, or reads
twice).

- **single source**: the source's digitizer puts into every space's channel the frames
  that space's tiles need, so the source sends frames about as often as there are spaces;
- **tiling with chaining**: the spaces form a chain in order; the digitizer puts only into
  the first space's channel, and each space's data mover passes on, into the next one's,
  the frames the spaces after it need, so the source sends each frame once.

A space that dies mid-run (its data mover killed) fails the run with :class:`SpaceLost`
naming it; nothing waits for ever.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import stampede as sp
from stampede import cluster

from .analysis import Tile, TileComparer, WorkerTimes, _symmetric, tiles

DISTRIBUTIONS = ("single", "chain")
_LOOKUP = 60.0


@dataclass
class Distributed:
    """A finished distributed analysis."""

    distances: np.ndarray
    seconds: float
    spaces: int
    distribution: str
    frames_received: dict[str, int] = field(default_factory=dict)
    """Frames put into each compute space's channel (by its upstream)."""
    source_frames_sent: int = 0
    """Frames the source sent to other spaces."""
    worker_times: dict[str, WorkerTimes] = field(default_factory=dict)
    """Where each worker's time went, by ``space<k>/worker<j>`` (the source is space 0)."""


def split_rows(frames: int, tile: int, parts: int) -> list[list[Tile]]:
    """The triangle's tiles in ``parts`` runs of whole tile rows, in order, each with about
    the same number of frame pairs."""
    plan = tiles(frames, tile)
    rows: dict[int, list[Tile]] = {}
    for t in plan:
        rows.setdefault(t[0], []).append(t)
    ordered = [rows[r] for r in sorted(rows)]
    total = sum((t[1] - t[0]) * (t[3] - t[2]) for t in plan)
    out: list[list[Tile]] = [[] for _ in range(parts)]
    done, k = 0, 0
    for row in ordered:
        out[k].extend(row)
        done += sum((t[1] - t[0]) * (t[3] - t[2]) for t in row)
        if k < parts - 1 and done >= total * (k + 1) / parts:
            k += 1
    return out


def _needed(ts: list[Tile]) -> int:
    """How many leading frames the tiles of a run need (rows end the furthest)."""
    return max((t[1] for t in ts), default=0)


def _compute(
    task: sp.Task,
    frames_ch: sp.Channel,
    work: list[Tile],
    results: sp.Queue,
    stripe: int,
    counter: dict[str, int],
    lock: threading.Lock,
) -> WorkerTimes:
    """One worker: compares tiles taken from ``work`` (shared list) with frames from
    ``frames_ch``."""
    comparer = TileComparer(task.attach_input(frames_ch), stripe)
    out = task.attach_output(results)
    while True:
        with lock:
            if not work:
                return comparer.times()
            t = work.pop()
            counter["tiles"] = counter.get("tiles", 0) + 1
        out.put(t[0] * 1_000_000 + t[2], (t, comparer.compare(t)))


def _run_workers(rt: sp.Runtime, frames_ch: sp.Channel, work: list[Tile], results: sp.Queue,
                 workers: int, stripe: int) -> tuple[int, list[WorkerTimes]]:
    lock = threading.Lock()
    counter: dict[str, int] = {}
    ts = [
        rt.spawn(_compute, frames_ch, work, results, stripe, counter, lock, name=f"worker{k}")
        for k in range(workers)
    ]
    times = [t.result() for t in ts]
    return counter.get("tiles", 0), times


def _mover(task: sp.Task, local: sp.Channel, downstream: sp.Channel, count: int) -> int:
    """Passes frames ``0 .. count - 1`` of this space's channel on, in order, into the
    next space's."""
    inp = task.attach_input(local)
    out = task.attach_output(downstream)
    for i in range(count):
        ts, f = inp.get(i)
        out.put(ts, np.asarray(f))
    return count


def space_role(ctx: cluster.TaskContext, args: bytes) -> bytes:
    """A compute space's part (a cluster task, by import path): its workers, and under
    chaining its data mover."""
    a: dict[str, Any] = json.loads(args)
    space = ctx.space
    k = a["k"]
    local = space.channel(f"vt/frames/{k}")
    results = space.lookup_queue("vt/results", timeout=_LOOKUP)
    mover = None
    if a["forward"] > 0:
        downstream = space.lookup_channel(f"vt/frames/{k + 1}", timeout=_LOOKUP)
        mover = space.spawn(_mover, local, downstream, a["forward"], name=f"mover{k}")
    work: list[Tile] = [(t[0], t[1], t[2], t[3]) for t in a["tiles"]]
    done, times = _run_workers(space, local, work, results, a["workers"], a["stripe"])
    forwarded = mover.result() if mover is not None else 0
    received = local.stats().puts
    # The upstream space is done putting once the source is done.
    waiter = space.task(name=f"done{k}")
    waiter.attach_input(space.lookup_register("vt/done", _LOOKUP)).read(timeout=None)
    waiter.exit()
    local.close()
    return json.dumps({"tiles": done, "received": received, "forwarded": forwarded,
                       "times": [[w.getting, w.comparing] for w in times]}).encode()


def analyze_distributed(
    frames: np.ndarray,
    *,
    spaces: int = 2,
    distribution: str = "chain",
    workers: int = 1,
    tile: int = 16,
    stripe_lines: int = 2,
    timeout: float = 600.0,
    space: sp.Space | None = None,
) -> Distributed:
    """The distance matrix of ``frames`` computed by ``spaces`` address spaces (the source
    and ``spaces - 1`` attached), ``workers`` workers each, under ``distribution``
    (``"single"`` source or ``"chain"``: tiling with chaining).

    Without ``space`` the source joins a new application as a router on loopback and
    starts a node agent here. With ``space`` (joined by the caller, reachable by the node
    agents already serving its application, e.g. one per host) that space is the source and
    the spaces attach through those agents in turn by host name."""
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"distribution {distribution!r}: one of {DISTRIBUTIONS}")
    if spaces < 1 or workers < 1:
        raise ValueError("at least one space and one worker")
    if frames.ndim != 4 or frames.shape[0] < 2 or frames.dtype != np.uint8:
        raise ValueError("frames must be uint8, n × height × width × channels with n >= 2")
    runs = split_rows(frames.shape[0], tile, spaces)
    args = (frames, runs, distribution, workers, stripe_lines, timeout)
    if space is not None:
        return _attach_and_run(space, *args)
    with cluster.loopback_application("vt") as own:
        result = _attach_and_run(own, *args)
    return result


def _attach_and_run(space: sp.Space, frames: np.ndarray, runs: list[list[Tile]],
                    distribution: str, workers: int, stripe: int,
                    timeout: float) -> Distributed:
    with cluster.Cluster.start(space, timeout=timeout) as c:
        with cluster.attached_spaces(c, len(runs) - 1, timeout) as attached:
            result = _run(space, c, attached, frames, runs, distribution, workers, stripe)
    return result


def _run(space: sp.Space, c: cluster.Cluster, attached: list[str], frames: np.ndarray,
         runs: list[list[Tile]], distribution: str, workers: int, stripe: int) -> Distributed:
    n = frames.shape[0]
    source = space.channel("vt/frames/0")
    results = space.queue("vt/results")
    done_reg = space.register("vt/done")
    t0 = time.perf_counter()
    needs = [_needed(r) for r in runs]
    handles = []
    for k, s in enumerate(attached, start=1):
        forward = 0 if distribution == "single" else max(needs[k + 1:], default=0)
        args = {"k": k, "forward": forward, "tiles": runs[k], "workers": workers,
                "stripe": stripe}
        handles.append((s, c.spawn("stampede.textures.distributed:space_role",
                                   json.dumps(args).encode(), on=s)))
    # Each frame goes once into each channel the digitizer serves, for as many frames as
    # that channel's readers need.
    targets: list[tuple[str | sp.Channel, int]] = [(source, needs[0])]
    if distribution == "single":
        targets += [(f"vt/frames/{k}", needs[k]) for k in range(1, len(runs))]
    elif len(runs) > 1:
        targets.append(("vt/frames/1", max(needs[1:])))
    stopped = threading.Event()
    digitizer = space.spawn(_digitize, space, targets, frames, stopped, name="digitizer")
    total = sum(len(r) for r in runs)
    sq = np.zeros((n, n))
    failure: list[BaseException] = []
    ended: dict[str, bytes] = {}

    def watch(s: str, h: cluster.JoinHandle) -> None:
        # A space that dies makes its join fail: the recognizer must not wait for its tiles.
        try:
            ended[s] = h.join()
        except BaseException as e:
            failure.append(e)
            stopped.set()
            results.close()

    watchers = [threading.Thread(target=watch, args=sh, daemon=True) for sh in handles]
    for w in watchers:
        w.start()

    def source_part(task: sp.Task) -> tuple[int, list[WorkerTimes]]:
        # The source's own run of tiles; a failure ends the run as a space's would.
        try:
            return _run_workers(space, source, list(runs[0]), results, workers, stripe)
        except BaseException as e:
            failure.append(e)
            stopped.set()
            results.close()
            raise

    mine = space.spawn(source_part, name="source-workers")
    got_task = space.task(name="completion")
    inp = got_task.attach_input(results)
    try:
        for _ in range(total):
            item = inp.get()
            (r0, r1, c0, c1), b = item.value
            sq[r0:r1, c0:c1] = b
            inp.consume(item.ticket)
    except sp.Closed:
        # The run failed: the digitizer stops putting frames, so this space's own workers
        # are released by closing their channel rather than left waiting for ever.
        source.close()
        if failure:
            raise failure[0] from None
        raise
    finally:
        got_task.exit()
    seconds = time.perf_counter() - t0
    _, own_times = mine.result()
    done_task = space.task(name="done")
    done_task.attach_output(done_reg).write(True)
    done_task.exit()
    for w in watchers:
        w.join()
    if failure:
        raise failure[0]
    reports = {s: json.loads(ended[s]) for s, _ in handles}
    received = {s: int(reports[s]["received"]) for s, _ in handles}
    sent = digitizer.result() - min(needs[0], n)
    times = {f"space0/worker{j}": w for j, w in enumerate(own_times)}
    for k, s in enumerate(attached, start=1):
        for j, (got, cmp) in enumerate(reports[s]["times"]):
            times[f"space{k}/worker{j}"] = WorkerTimes(float(got), float(cmp))
    return Distributed(_symmetric(sq), seconds, len(attached) + 1, distribution, received,
                       sent, times)


def _digitize(task: sp.Task, space: sp.Space, targets: list[tuple[str | sp.Channel, int]],
              frames: np.ndarray, stopped: threading.Event) -> int:
    """Puts frame ``i`` into each target channel (this space's, or another's by name) that
    needs it; returns the puts. Gives up when the run has failed."""
    outs = []
    for ch, need in targets:
        while isinstance(ch, str):
            # A space that died before making its channel fails the run elsewhere.
            if stopped.is_set():
                return 0
            try:
                ch = space.lookup_channel(ch, timeout=0.2)
            except sp.NotFound:
                pass
        outs.append((task.attach_output(ch), need))
    puts = 0
    for i in range(frames.shape[0]):
        f = np.ascontiguousarray(frames[i])
        for out, need in outs:
            if i < need:
                out.put(i, f)
                puts += 1
    return puts
