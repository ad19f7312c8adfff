"""Video texture analysis across address spaces, with the paper's two work distributions
(§VI-A, Figs. 10-11).

This process is the *source*: its digitizer puts every frame into ``vt/frames/0`` and its
completion recognizer collects the blocks from ``vt/results``. The triangle's tile rows are
split into contiguous runs of about equal work, one per compute space; the source computes
the first run itself, and every other space (attached through a node agent, running
``python -m stampede.cluster``) runs :func:`space_role`: a *data mover* task that copies the
frames the space needs from an upstream channel into the space's own ``vt/frames/<k>``, and
worker tasks that compare the space's tiles from it and put the blocks into the source's
``vt/results``.

- **single source**: every space's data mover reads from the source's channel, which sends
  each space every frame it needs;
- **tiling with chaining**: the spaces form a chain in order; each reads from the previous
  one's channel and also passes on the frames the spaces after it need, so the source sends
  each frame about once.

A space that dies mid-run (its data mover killed) fails the run with :class:`SpaceLost`
naming it; nothing waits for ever.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import stampede as sp
from stampede import cluster

from .analysis import Tile, TileComparer, _symmetric, tiles

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
    """Frames each compute space's data mover received (the source's own are 0)."""
    source_frames_sent: int = 0
    """Frames the source's channel sent to other spaces."""


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
) -> None:
    """One worker: compares tiles taken from ``work`` (shared list) with frames from
    ``frames_ch``."""
    comparer = TileComparer(task.attach_input(frames_ch), stripe)
    out = task.attach_output(results)
    while True:
        with lock:
            if not work:
                return
            t = work.pop()
            counter["tiles"] = counter.get("tiles", 0) + 1
        out.put(t[0] * 1_000_000 + t[2], (t, comparer.compare(t)))


def _run_workers(rt: sp.Runtime, frames_ch: sp.Channel, work: list[Tile], results: sp.Queue,
                 workers: int, stripe: int) -> int:
    lock = threading.Lock()
    counter: dict[str, int] = {}
    ts = [
        rt.spawn(_compute, frames_ch, work, results, stripe, counter, lock, name=f"worker{k}")
        for k in range(workers)
    ]
    for t in ts:
        t.result()
    return counter.get("tiles", 0)


def _mover(task: sp.Task, upstream: sp.Channel, local: sp.Channel, count: int) -> int:
    """Copies frames ``0 .. count - 1`` from ``upstream`` into ``local`` in order."""
    inp = task.attach_input(upstream)
    out = task.attach_output(local)
    for i in range(count):
        ts, f = inp.get(i)
        out.put(ts, np.asarray(f))
    return count


def space_role(ctx: cluster.TaskContext, args: bytes) -> bytes:
    """A compute space's part (a cluster task, by import path): data mover and workers."""
    a: dict[str, Any] = json.loads(args)
    space = ctx.space
    k = a["k"]
    local = space.channel(f"vt/frames/{k}")
    upstream = space.lookup_channel(a["upstream"], timeout=_LOOKUP)
    results = space.lookup_queue("vt/results", timeout=_LOOKUP)
    mover = space.spawn(_mover, upstream, local, a["forward"], name=f"mover{k}")
    work: list[Tile] = [(t[0], t[1], t[2], t[3]) for t in a["tiles"]]
    done = _run_workers(space, local, work, results, a["workers"], a["stripe"])
    received = mover.result()
    # Spaces down the chain read this space's channel: it stays until the source is done.
    waiter = space.task(name=f"done{k}")
    waiter.attach_input(space.lookup_register("vt/done", _LOOKUP)).read(timeout=None)
    waiter.exit()
    local.close()
    return json.dumps({"tiles": done, "received": received}).encode()


def _free_endpoint() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp/127.0.0.1:{s.getsockname()[1]}"


def analyze_distributed(
    frames: np.ndarray,
    *,
    spaces: int = 2,
    distribution: str = "chain",
    workers: int = 1,
    tile: int = 16,
    stripe_lines: int = 2,
    timeout: float = 600.0,
) -> Distributed:
    """The distance matrix of ``frames`` computed by ``spaces`` address spaces (this one
    and ``spaces - 1`` attached), ``workers`` workers each, under ``distribution``
    (``"single"`` source or ``"chain"``: tiling with chaining)."""
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"distribution {distribution!r}: one of {DISTRIBUTIONS}")
    if spaces < 1 or workers < 1:
        raise ValueError("at least one space and one worker")
    if frames.ndim != 4 or frames.shape[0] < 2 or frames.dtype != np.uint8:
        raise ValueError("frames must be uint8, n × height × width × channels with n >= 2")
    n = frames.shape[0]
    runs = split_rows(n, tile, spaces)
    ep = _free_endpoint()
    app = f"vt-{os.getpid()}-{time.monotonic_ns()}"
    env_path = os.pathsep.join(p for p in sys.path if p)
    os.environ.setdefault("PYTHONPATH", env_path)
    with sp.Space.join(app, mode="router", listen=[ep]) as space:
        with cluster.Cluster.start(space, timeout=timeout) as c:
            agent = cluster.NodeAgent.start(space, "localhost", [ep])
            attached: list[str] = []
            try:
                for _ in range(spaces - 1):
                    attached.append(c.attach([sys.executable, "-m", "stampede.cluster"], timeout))
                result = _run(space, c, attached, frames, runs, distribution, workers,
                              tile, stripe_lines)
            finally:
                for s in attached:
                    try:
                        c.detach(s)
                    except sp.StampedeError:
                        pass
                agent.stop()
    return result


def _run(space: sp.Space, c: cluster.Cluster, attached: list[str], frames: np.ndarray,
         runs: list[list[Tile]], distribution: str, workers: int, tile: int,
         stripe: int) -> Distributed:
    n = frames.shape[0]
    source = space.channel("vt/frames/0")
    results = space.queue("vt/results")
    done_reg = space.register("vt/done")
    t0 = time.perf_counter()
    digitizer = space.spawn(_digitize, source, frames, name="digitizer")
    needs = [_needed(r) for r in runs]
    handles = []
    for k, s in enumerate(attached, start=1):
        upstream = "vt/frames/0" if distribution == "single" or k == 1 else f"vt/frames/{k - 1}"
        forward = needs[k] if distribution == "single" else max(needs[k:])
        args = {"k": k, "upstream": upstream, "forward": forward, "tiles": runs[k],
                "workers": workers, "stripe": stripe}
        handles.append((s, c.spawn("stampede.textures.distributed:space_role",
                                   json.dumps(args).encode(), on=s)))
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
            results.close()

    watchers = [threading.Thread(target=watch, args=sh, daemon=True) for sh in handles]
    for w in watchers:
        w.start()

    def source_part(task: sp.Task) -> int:
        # The source's own run of tiles; a failure ends the run as a space's would.
        try:
            return _run_workers(space, source, list(runs[0]), results, workers, stripe)
        except BaseException as e:
            failure.append(e)
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
        if failure:
            raise failure[0] from None
        raise
    finally:
        got_task.exit()
    seconds = time.perf_counter() - t0
    mine.result()
    digitizer.result()
    done_task = space.task(name="done")
    done_task.attach_output(done_reg).write(True)
    done_task.exit()
    for w in watchers:
        w.join()
    if failure:
        raise failure[0]
    received = {s: int(json.loads(ended[s])["received"]) for s, _ in handles}
    sent = sum(received[s] for k, s in enumerate(attached, start=1)
               if distribution == "single" or k == 1)
    return Distributed(_symmetric(sq), seconds, len(attached) + 1, distribution, received, sent)


def _digitize(task: sp.Task, ch: sp.Channel, frames: np.ndarray) -> int:
    out = task.attach_output(ch)
    for i in range(frames.shape[0]):
        out.put(i, np.ascontiguousarray(frames[i]))
    return int(frames.shape[0])
