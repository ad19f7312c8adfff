"""The color tracker split at two levels across address spaces (the Stampede paper's
§VI-B, Figs. 22-23), and the sweep of its partitioning behind Tables I-II.

The *front* address space (this process) runs the digitizer, histogram, low-fi tracker and
decision of :mod:`stampede.demo.pipeline`, and its splitter and joiner as the *outer*
splitter and joiner: the outer splitter cuts each frame into ``Out_RP`` bands by
``Out_MP`` model groups, describing the work only, on ``kiosk/chunks``. Each *inner node*
(an address space attached through a node agent) runs an inner splitter that takes outer
chunks and cuts each into ``In_RP`` bands by ``In_MP`` model groups on the node's own
queue with the frame's HSV image, which it reads from the front's ``kiosk/hsv`` by
timestamp, as the paper's inner splitters read the images directly from the histogram
(once per frame for the whole node), ``threads`` workers (the pipeline's) and an inner
joiner that puts each outer chunk's blobs on ``kiosk/blobs``. The outer joiner
merges blobs across every band border, so every partition gives the same tracks.

The paper's sweep sets ``Out_MP`` to the number of nodes (1, 2 or 4, so 8 models divide
evenly), ``Out_RP`` to 1, ``In_MP`` to 1 and ``In_RP`` to the threads per node; the
digitizer runs unpaced, so the frame rate is the pipeline's sustained rate and the
latency is each frame's, from the digitizer to the decision.

    python -m stampede.demo.tracker --nodes 1 2 4 --threads 1 2 3
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import stampede as sp
from stampede import cluster

from .distributed import Geometry
from .pipeline import (
    STAGES,
    Kiosk,
    Monitor,
    PipelineOptions,
    StallWatch,
    digitizer,
    inner_joiner,
    inner_splitter,
    summarize,
    worker,
)
from .scene import SyntheticScene
from .vision import build_models, configure_opencv

_LOOKUP = 60.0


@dataclass(frozen=True)
class Partition:
    """How the detection work is split: ``nodes`` inner address spaces of ``threads``
    workers; outer chunks of ``out_mp`` model groups by ``out_rp`` bands, each cut into
    ``in_mp`` by ``in_rp`` inner chunks."""

    nodes: int
    threads: int
    out_mp: int
    out_rp: int
    in_mp: int
    in_rp: int

    @classmethod
    def paper(cls, nodes: int, threads: int) -> Partition:
        """The paper's choice: as many model groups as nodes outside, bands for the
        threads inside."""
        return cls(nodes, threads, out_mp=nodes, out_rp=1, in_mp=1, in_rp=threads)

    def check(self, models: int) -> None:
        if min(self.nodes, self.threads, self.out_mp, self.out_rp, self.in_mp, self.in_rp) < 1:
            raise ValueError(f"every part of a partition is at least 1: {self}")
        if self.out_mp > models:
            raise ValueError(f"{self.out_mp} outer model groups for {models} models")

    def label(self) -> str:
        return (f"Out_MP={self.out_mp} Out_RP={self.out_rp} "
                f"In_MP={self.in_mp} In_RP={self.in_rp}")


@dataclass
class TrackerRun:
    """One configuration's figures."""

    partition: Partition
    fps: float
    """Frames decided per second after the warmup."""
    latency_ms_p50: float
    latency_ms_p95: float
    accuracy: float
    """Fraction of the scene's targets found where they are."""
    scored: int
    decided: int
    seconds: float
    inner_chunks: list[int] = field(default_factory=list)
    """Inner chunks each node's workers detected."""


def inner_node(ctx: cluster.TaskContext, args: bytes) -> bytes:
    """An inner node's part (a cluster task, by import path): inner splitter, workers and
    inner joiner, until the front's outer chunks are closed and drained."""
    a: dict[str, Any] = json.loads(args)
    configure_opencv()
    space = ctx.space
    p = Partition(**a["partition"])
    options = PipelineOptions(workers=p.threads, regions=p.in_rp, model_groups=p.in_mp,
                              fps=None, capacity=a["capacity"])
    monitor = Monitor()
    kiosk = Kiosk(space, Geometry(a["width"], a["height"]), build_models(a["targets"]),
                  options, monitor, names={"hsv", "chunks", "blobs"}, owns=(),
                  private={"chunks", "blobs"}, lookup_timeout=_LOOKUP,
                  parties=p.threads + 3)
    outer_chunks = space.lookup_queue("kiosk/chunks", timeout=_LOOKUP)
    outer_blobs = space.lookup_queue("kiosk/blobs", timeout=_LOOKUP)
    k = a["k"]
    tasks = [
        space.spawn(inner_splitter, kiosk, outer_chunks, vt=sp.INFINITY,
                    name=f"inner-splitter{k}"),
        space.spawn(inner_joiner, kiosk, outer_blobs, vt=sp.INFINITY, name=f"inner-joiner{k}"),
    ] + [space.spawn(worker, kiosk, vt=sp.INFINITY, name=f"node{k}-worker{j}")
         for j in range(p.threads)]
    try:
        kiosk.ready.wait(_LOOKUP)
    except threading.BrokenBarrierError:
        pass  # a stage failed: raised below
    # The front starts its digitizer once every node has said it is ready.
    ready = space.register(f"tracker/ready/{k}")
    for t in tasks:
        t.join()
    ready.close()
    if kiosk.error is not None:
        raise kiosk.error
    for t in tasks:
        t.result()
    with monitor.lock:
        chunks = monitor.chunks
    return json.dumps({"chunks": chunks}).encode()


def run_two_level(
    partition: Partition,
    *,
    targets: int = 8,
    width: int = 640,
    height: int = 480,
    seconds: float = 6.0,
    warmup: float = 1.0,
    capacity: int = 4,
    space: sp.Space | None = None,
    timeout: float = 120.0,
    stall_timeout: float = 20.0,
) -> TrackerRun:
    """Runs the tracker split as ``partition`` says for ``seconds`` of unpaced frames of
    a synthetic scene with ``targets`` targets. Without ``space`` this process joins a new
    application on loopback and starts the inner nodes here; with ``space`` (joined by the
    caller, reachable by the node agents already serving its application) that space is
    the front and the nodes attach through those agents in turn."""
    partition.check(targets)
    if space is not None:
        return _attach_and_run(space, partition, targets, width, height, seconds, warmup,
                               capacity, timeout, stall_timeout)
    with cluster.loopback_application("tracker") as own:
        result = _attach_and_run(own, partition, targets, width, height, seconds, warmup,
                                 capacity, timeout, stall_timeout)
    return result


def _attach_and_run(space: sp.Space, p: Partition, targets: int, width: int, height: int,
                    seconds: float, warmup: float, capacity: int, timeout: float,
                    stall_timeout: float) -> TrackerRun:
    with cluster.Cluster.start(space, timeout=timeout) as c:
        with cluster.attached_spaces(c, p.nodes, timeout) as attached:
            result = _run(space, c, attached, p, targets, width, height, seconds, warmup,
                          capacity, stall_timeout)
    return result


def _run(space: sp.Space, c: cluster.Cluster, attached: list[str], p: Partition,
         targets: int, width: int, height: int, seconds: float, warmup: float,
         capacity: int, stall_timeout: float) -> TrackerRun:
    source = SyntheticScene(width, height, targets)
    options = PipelineOptions(workers=0, regions=p.out_rp, model_groups=p.out_mp, fps=None,
                              seconds=seconds, capacity=capacity, warmup=warmup)
    monitor = Monitor(warmup=warmup)
    kiosk = Kiosk(space, source, build_models(targets), options, monitor,
                  parties=len(STAGES) + 1)
    args = {"partition": asdict(p), "capacity": capacity, "width": width, "height": height,
            "targets": targets}
    # A node's own task puts nothing: at INFINITY it holds no frame back.
    handles = [
        c.spawn("stampede.demo.tracker:inner_node", json.dumps({**args, "k": k}).encode(),
                on=s, vt=sp.INFINITY)
        for k, s in enumerate(attached)
    ]
    ended: list[bytes] = []

    def nodes_done() -> None:
        # The outer joiner's input ends once every node has put its last blobs.
        try:
            ended.extend(h.join() for h in handles)
        except BaseException as e:
            kiosk.abort(e)
        else:
            kiosk.blobs.close()

    closer = threading.Thread(target=nodes_done, name="nodes-done", daemon=True)
    closer.start()
    deadline = time.monotonic() + _LOOKUP
    for k in range(len(attached)):
        while space.record(f"tracker/ready/{k}") is None:
            if kiosk.stop.is_set():
                raise kiosk.error or RuntimeError("an inner node failed to start")
            if time.monotonic() > deadline:
                kiosk.abort(RuntimeError(f"inner node {k} did not get ready"))
                raise kiosk.error or RuntimeError("an inner node did not get ready")
            time.sleep(0.02)
    threads = {name: space.spawn(fn, kiosk, vt=vt, name=name) for name, fn, vt in STAGES}
    threads["digitizer"] = space.spawn(digitizer, kiosk, vt=0, name="digitizer")
    t0 = time.perf_counter()
    watch = StallWatch(kiosk, stall_timeout, lambda: f"{p.label()}; watermarks: " + "; ".join(
        str(w) for w in space.explain_cluster()))
    try:
        while any(t.is_alive() for t in threads.values()):
            next(t for t in threads.values() if t.is_alive()).join(0.25)
            watch.check(time.perf_counter())
    except BaseException as e:
        kiosk.abort(e)
        raise
    elapsed = time.perf_counter() - t0
    closer.join(stall_timeout)
    if kiosk.error is not None:
        raise kiosk.error
    r = summarize(monitor, seconds=elapsed, reclaimed=0, lowfi_skipped=0, rss_mb_peak=0.0,
                  threads={})
    return TrackerRun(p, r.fps, r.latency_ms_p50, r.latency_ms_p95, r.accuracy, r.scored,
                      r.decided, elapsed, [int(json.loads(e)["chunks"]) for e in ended])


def sweep(nodes: Sequence[int] = (1, 2, 4), threads: Sequence[int] = (1, 2, 3),
          **kw: Any) -> list[TrackerRun]:
    """Tables I-II: the paper's partition for every nodes × threads."""
    return [run_two_level(Partition.paper(n, t), **kw) for n in nodes for t in threads]


def table(runs: Sequence[TrackerRun], value: str, fmt: str) -> str:
    """A Markdown table of ``value`` (a :class:`TrackerRun` field) by nodes and threads."""
    ns = sorted({r.partition.nodes for r in runs})
    ts = sorted({r.partition.threads for r in runs})
    cell = {(r.partition.nodes, r.partition.threads): getattr(r, value) for r in runs}
    lines = ["| nodes | " + " | ".join(f"{t} thread{'s' if t > 1 else ''}" for t in ts) + " |",
             "|---|" + "---|" * len(ts)]
    for n in ns:
        lines.append(f"| {n} | " + " | ".join(
            format(cell[(n, t)], fmt) if (n, t) in cell else "" for t in ts) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stampede.demo.tracker",
                                 description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--targets", type=int, default=8)
    ap.add_argument("--min-accuracy", type=float, default=0.9)
    a = ap.parse_args(argv)
    runs = []
    for n in a.nodes:
        for t in a.threads:
            r = run_two_level(Partition.paper(n, t), seconds=a.seconds, targets=a.targets)
            print(f"{n} node(s) x {t} thread(s) ({r.partition.label()}): {r.fps:5.2f} fps, "
                  f"latency {r.latency_ms_p50:6.1f} ms, accuracy {r.accuracy:.1%}", flush=True)
            runs.append(r)
    print("\nframe rate (fps)\n" + table(runs, "fps", ".2f"))
    print("\nend-to-end latency (ms, median)\n" + table(runs, "latency_ms_p50", ".1f"))
    bad = [r for r in runs if not r.accuracy >= a.min_accuracy]
    for r in bad:
        print(f"FAIL: {r.partition.label()} found {r.accuracy:.1%} of the targets")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
