"""Cluster threads: spawn, join and cancel tasks in any address space of an application,
and synchronise them with cluster-wide mutexes, conditions, semaphores and barriers.

Every address space that takes part starts a :class:`Cluster` on its :class:`Space`. A task
is a callable ``(ctx, args: bytes) -> bytes | str | None``: registered by name in ``tasks``,
or named by import path (``"package.module:function"``), which the space asked to run it
imports. ``spawn`` places it ``on`` ``"here"``, ``"round_robin"``, ``"least_loaded"`` or a
space's id; ``join`` returns its result bytes or raises how it ended (:class:`TaskFailed`,
:class:`TaskCancelled`, :class:`UnknownTask`, :class:`SpaceLost`). Objects are named and live
in the space that first made them; ``with cluster.mutex("m"):`` holds a mutex (the value
``as`` binds is whether the previous holder's space died holding it). A :class:`Segment` is
global memory homed where first touched, release-consistent with the locks.

>>> from stampede import Space, cluster
>>> def square(ctx, args):
...     return str(int(args) ** 2)
>>> with Space.join("doc-cluster", mode="router", listen=["tcp/127.0.0.1:17471"]) as space:
...     with cluster.Cluster.start(space, {"square": square}) as c:
...         c.spawn("square", b"12").join()
b'144'
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import numpy.typing as npt

from ._stampede import (
    Space,
    Barrier,
    Cluster,
    Condition,
    JoinHandle,
    Mutex,
    NodeAgent,
    Segment,
    Semaphore,
    TaskContext,
    cluster_stats,
    list_tasks,
)
from .errors import (
    BarrierFailed,
    ClusterError,
    NoSpace,
    SpaceLost,
    StampedeError,
    TaskCancelled,
    TaskFailed,
    UnknownTask,
)

__all__ = [
    "Barrier",
    "BarrierFailed",
    "Cluster",
    "ClusterError",
    "Condition",
    "JoinHandle",
    "Mutex",
    "NoSpace",
    "NodeAgent",
    "Segment",
    "Semaphore",
    "SpaceLost",
    "TaskCancelled",
    "TaskContext",
    "TaskFailed",
    "UnknownTask",
    "attached_spaces",
    "cluster_stats",
    "list_tasks",
    "loopback_application",
    "segment_array",
    "segment_view",
    "serve_attached",
    "serve_node",
]


def segment_array(seg: Segment, dtype: npt.DTypeLike, offset: int = 0, count: int = -1) -> np.ndarray:
    """``count`` elements of ``dtype`` at byte ``offset`` of ``seg`` (all that fit by
    default), as a new array: this space's copy as of now."""
    dt = np.dtype(dtype)
    n = (len(seg) - offset) // dt.itemsize if count < 0 else count
    return np.frombuffer(seg.read(offset, n * dt.itemsize), dtype=dt).copy()


@contextmanager
def segment_view(
    seg: Segment, dtype: npt.DTypeLike, offset: int = 0, count: int = -1
) -> Iterator[np.ndarray]:
    """A typed view of ``seg`` for a ``with`` block: an array of its elements, whose
    changed bytes are written back when the block ends (so only they count as this space's
    writes, and other spaces' releases to the rest are kept)::

        with cluster.segment_view(seg, np.float64) as rod:
            rod[lo:hi] = new
    """
    a = segment_array(seg, dtype, offset, count)
    before = a.tobytes()
    yield a
    after = a.tobytes()
    if len(after) != len(before):
        raise ValueError("a segment view's array must keep its size")
    changed = np.flatnonzero(np.frombuffer(before, np.uint8) != np.frombuffer(after, np.uint8))
    if changed.size == 0:
        return
    # Runs of consecutive changed bytes, each written once.
    breaks = np.flatnonzero(np.diff(changed) != 1)
    starts = np.concatenate(([changed[0]], changed[breaks + 1]))
    ends = np.concatenate((changed[breaks], [changed[-1]])) + 1
    for s, e in zip(starts.tolist(), ends.tolist()):
        seg.write(offset + s, after[s:e])


ENV_SHM_POOL = "STAMPEDE_SHM_POOL"
"""Bytes of shared memory a space this module starts may use (0: every byte crosses the
network link, as between separate hosts); the runtime's default when unset."""


def _shm_pool() -> int | None:
    v = os.environ.get(ENV_SHM_POOL)
    return None if v is None or v == "" else int(v)


def serve_attached() -> None:
    """Runs this process as an address space a node agent started (``python -m
    stampede.cluster``): joins the application from the environment the agent set, serves
    its cluster (tasks by import path) until detached, then leaves."""
    app = os.environ["STAMPEDE_CLUSTER_APP"]
    connect = [e for e in os.environ.get("STAMPEDE_CLUSTER_CONNECT", "").split(",") if e]
    token = os.environ["STAMPEDE_CLUSTER_TOKEN"]
    with Space.join(app, connect=connect, shm_pool=_shm_pool()) as space:
        with Cluster.start(space, token=token) as c:
            c.wait_detached()


def serve_node(app: str, host: str, connect: list[str]) -> None:
    """Runs this process as application ``app``'s node agent for host ``host`` (``python -m
    stampede.cluster node``) until SIGTERM or SIGINT: clusters attach address spaces here,
    which connect to ``connect`` and inherit this process's environment."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    with Space.join(app, connect=connect, shm_pool=_shm_pool()) as space:
        agent = NodeAgent.start(space, host, connect)
        try:
            while not stop.wait(0.2):
                pass
        finally:
            agent.stop()


@contextmanager
def loopback_application(prefix: str, *, shm_pool: int | None = None) -> Iterator[Space]:
    """A new application on this host for the ``with`` block: this process joins it as the
    router, on a free loopback port, and is its node agent, so :meth:`Cluster.attach`
    starts address spaces (``python -m stampede.cluster``) here. Yields the space."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        ep = f"tcp/127.0.0.1:{s.getsockname()[1]}"
    # The spaces it starts import the same code as this process.
    os.environ.setdefault("PYTHONPATH", os.pathsep.join(p for p in sys.path if p))
    app = f"{prefix}-{os.getpid()}-{time.monotonic_ns()}"
    with Space.join(app, mode="router", listen=[ep], shm_pool=shm_pool) as space:
        agent = NodeAgent.start(space, "localhost", [ep])
        try:
            yield space
        finally:
            agent.stop()


@contextmanager
def attached_spaces(c: Cluster, count: int, timeout: float = 30.0) -> Iterator[list[str]]:
    """``count`` new address spaces (``python -m stampede.cluster``, through the node agents
    in turn) for the ``with`` block; yields their ids and detaches them at its end."""
    ids: list[str] = []
    try:
        for _ in range(count):
            ids.append(c.attach([sys.executable, "-m", "stampede.cluster"], timeout))
        yield ids
    finally:
        for s in ids:
            try:
                c.detach(s)
            except StampedeError:
                pass  # already gone: a failure the block reports


def _main(argv: list[str]) -> None:
    if not argv:
        serve_attached()
        return
    ap = argparse.ArgumentParser(
        prog="python -m stampede.cluster",
        description="With no arguments: serve as an attached address space. "
        "node: serve as a host's node agent.",
    )
    sub = ap.add_subparsers(dest="command", required=True)
    node = sub.add_parser("node", help="a host's node agent, until SIGTERM or SIGINT")
    node.add_argument("--app", required=True)
    node.add_argument("--host", required=True, help="this host's name among the agents")
    node.add_argument("--connect", action="append", required=True, help="an endpoint to join through")
    a = ap.parse_args(argv)
    serve_node(a.app, a.host, a.connect)


if __name__ == "__main__":
    _main(sys.argv[1:])
