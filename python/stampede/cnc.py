"""Concurrent Collections: programs written as steps that say only what they get and put.

Item collections map tags to values, each written once; tag collections prescribe step
collections, so putting a tag runs an instance of each step for it; a step is an ordinary
function of its context and tag. The runtime finds the parallelism: steps run on a
work-stealing executor's workers, holding the GIL while their Python runs, so kernels that
release it (numpy, scipy's BLAS, OpenCV) run on every core at once. Values are Stampede
items: numpy arrays, ``bytes``, ``str`` or any picklable object; arrays come back as
read-only views.

A get of an item not put yet suspends the step (it raises :class:`Suspended`, which
``except Exception`` does not catch) and runs it again once the item is put; its puts count
only from the run that completes. With dependency tuning (``depends``) an instance starts
only once its inputs exist and never runs twice. ``gets=`` on a put frees the item after
that many gets, which keeps a long computation's memory bounded. ``wait()`` raises the
graph's failure: :class:`StepFailed` (with the step's exception as its cause),
:class:`DuplicatePut`, :class:`FreedItem`, or :class:`Deadlock` naming every get nobody
answered.

>>> from stampede import cnc
>>> g = cnc.Graph()
>>> squares, numbers = g.items("squares"), g.tags("numbers")
>>> def square(ctx: cnc.StepContext, tag: tuple[int, ...]) -> None:
...     (n,) = tag
...     ctx.put(squares, n, n * n)
>>> _ = numbers.prescribes(g.steps("square", square))
>>> for n in range(10):
...     g.put_tag(numbers, n)
>>> g.wait()
>>> g.get(squares, 7)
49
"""

from __future__ import annotations

from ._stampede import (
    Executor,
    ExecutorStats,
    Graph,
    ItemCollection,
    StepCollection,
    StepContext,
    Suspended,
    TagCollection,
    TraceEvent,
    WorkerStats,
)
from .errors import (
    Deadlock,
    DistributionFailed,
    DuplicatePut,
    FreedItem,
    GraphError,
    NoSuchRank,
    ParticipantLost,
    ParticipantUnreachable,
    RemoteGraphError,
    StepFailed,
    Unmet,
)

Tag = int | str | tuple[int | str, ...]
"""What names an item or a step instance: an int, a str or a tuple of them (steps receive
the tuple form)."""

__all__ = [
    "Deadlock",
    "DistributionFailed",
    "DuplicatePut",
    "Executor",
    "ExecutorStats",
    "FreedItem",
    "Graph",
    "GraphError",
    "ItemCollection",
    "NoSuchRank",
    "ParticipantLost",
    "ParticipantUnreachable",
    "RemoteGraphError",
    "StepCollection",
    "StepContext",
    "StepFailed",
    "Suspended",
    "Tag",
    "TagCollection",
    "TraceEvent",
    "Unmet",
    "WorkerStats",
]
