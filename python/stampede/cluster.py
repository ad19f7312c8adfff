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

import os
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
    "cluster_stats",
    "list_tasks",
    "segment_array",
    "segment_view",
    "serve_attached",
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


def serve_attached() -> None:
    """Runs this process as an address space a node agent started (``python -m
    stampede.cluster``): joins the application from the environment the agent set, serves
    its cluster (tasks by import path) until detached, then leaves."""
    app = os.environ["STAMPEDE_CLUSTER_APP"]
    connect = [e for e in os.environ.get("STAMPEDE_CLUSTER_CONNECT", "").split(",") if e]
    token = os.environ["STAMPEDE_CLUSTER_TOKEN"]
    with Space.join(app, connect=connect) as space:
        with Cluster.start(space, token=token) as c:
            c.wait_detached()


if __name__ == "__main__":
    serve_attached()
