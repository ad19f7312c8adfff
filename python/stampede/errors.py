"""Exceptions: one class per error kind, all under :class:`StampedeError`.

The compiled module raises these; the mapping from the core's error kinds and from those of
distributed applications lives in one place (``crates/stampede-py/src/errors.rs``).
"""

from __future__ import annotations

from typing import Any, NamedTuple


class StampedeError(Exception):
    """Base class of every error Stampede raises.

    A put into another address space's channel returns once sent; a refusal only the owner
    can see is raised later, by the connection's next put or its ``flush()``. Such an error
    has ``deferred`` set and carries the earlier put's timestamp and value; when a put
    raised it instead of being made, ``unsent`` is that put's ``(timestamp, value)``.
    """

    deferred: bool = False
    unsent: tuple[int, Any] | None = None


class PutFailed(StampedeError):
    """Base of the errors of a put; the rejected value is handed back in ``item``."""

    def __init__(self, message: str, timestamp: int | None = None, item: Any = None) -> None:
        super().__init__(message)
        self.timestamp = timestamp
        self.item = item


class Full(PutFailed):
    """The bounded container stayed full (``try_put``, or the timeout passed)."""


class DuplicateTimestamp(PutFailed):
    """The channel already holds (or held) an item with this timestamp."""


class InvalidTimestamp(PutFailed):
    """``INFINITY`` is never an item's timestamp."""


class ZeroConsumers(PutFailed):
    """A reference count must be at least 1."""


class TooLarge(PutFailed):
    """The item is larger than the container's owner accepts from another address space
    (its quota, ``Space.join(..., max_item_bytes=...)`` there)."""


class BelowVisibility(StampedeError):
    """A put, or a virtual time, below what the task may use (virtual-time rules 1, 2, 4).

    ``timestamp`` is what was asked for, ``visibility`` the lowest value allowed; for a put
    the rejected value is in ``item``.
    """

    def __init__(
        self, message: str, timestamp: int, visibility: int, item: Any = None
    ) -> None:
        super().__init__(message)
        self.timestamp = timestamp
        self.visibility = visibility
        self.item = item


class Closed(StampedeError):
    """The container was closed (a put's value is handed back in ``item``)."""

    def __init__(self, message: str, item: Any = None) -> None:
        super().__init__(message)
        self.item = item


class Detached(StampedeError):
    """The connection was detached, or its task exited."""

    def __init__(self, message: str, item: Any = None) -> None:
        super().__init__(message)
        self.item = item


class GetFailed(StampedeError):
    """Base of a get that found nothing: ``below`` and ``above`` are the nearest available
    timestamps on either side of the request (``None`` where there is none)."""

    def __init__(self, message: str, below: int | None = None, above: int | None = None) -> None:
        super().__init__(message)
        self.below = below
        self.above = above


class Unavailable(GetFailed):
    """Nothing matched now (a non-blocking get)."""


class Timeout(GetFailed, TimeoutError):
    """Nothing matched before the timeout."""


class Gone(StampedeError):
    """The timestamp can never appear again: below the watermark, consumed on this
    connection, or reclaimed by its reference count."""

    def __init__(self, message: str, timestamp: int) -> None:
        super().__init__(message)
        self.timestamp = timestamp


class ZoneMismatch(StampedeError):
    """An output connection to a container of another time zone."""


class TaskExited(StampedeError):
    """The task has exited."""


class UnknownTicket(StampedeError):
    """No queue item with this ticket is held on this connection."""


class NameTaken(StampedeError):
    """A container with this name is already registered."""


class TooManyConnections(StampedeError):
    """The channel has as many input connections as it accepts."""


class InvalidArgument(StampedeError, ValueError):
    """An argument out of range (a zero reference count, a negative timeout, ...)."""


class MarshalError(StampedeError, TypeError):
    """A value could not be turned into an item, or an item back into a value."""


class UnreachableError(StampedeError):
    """The address space that owns the container left, died or did not answer in time.

    A put's value is handed back in ``item``; whether the owner stored it is unknown.
    """

    def __init__(self, message: str, item: Any = None) -> None:
        super().__init__(message)
        self.item = item


class NotLocal(StampedeError):
    """A feature only the owner of a container has (its length, counters, callbacks,
    arrival streams, correlation) asked of another address space's container."""


class ConfigError(StampedeError, ValueError):
    """An invalid setting for joining an application; the message names it."""


class ConnectError(StampedeError):
    """Joining failed: no router or peer reachable, or a bad endpoint."""


class AuthRejected(StampedeError):
    """A router or peer refused this address space's credentials or certificate."""


class Denied(StampedeError, PermissionError):
    """The container's owner does not allow this address space's ``user`` the operation
    ``op`` (``"create"``, ``"read"``, ``"write"`` or ``"close"``) on ``container`` (its
    name, or ``#id`` for an unnamed one)."""

    def __init__(self, message: str, user: str, op: str, container: str) -> None:
        super().__init__(message)
        self.user = user
        self.op = op
        self.container = container


class NotFound(StampedeError, LookupError):
    """No container or service called ``name`` appeared before the lookup's timeout."""

    def __init__(self, message: str, name: str) -> None:
        super().__init__(message)
        self.name = name


class WrongKind(StampedeError, TypeError):
    """The name belongs to another kind of container (``kind``: ``"channel"``,
    ``"queue"``, ``"register"`` or ``"service"``)."""

    def __init__(self, message: str, name: str, kind: str) -> None:
        super().__init__(message)
        self.name = name
        self.kind = kind


class InvalidName(InvalidArgument):
    """A name that cannot be registered: empty, with empty parts, or containing
    ``*``, ``$``, ``?`` or ``#`` (an application name also ``/``)."""


class ProtocolError(StampedeError):
    """A message from another address space could not be decoded."""


class GraphError(StampedeError):
    """A Concurrent Collections graph did not reach a clean end (``cnc.Graph.wait``)."""


class StepFailed(GraphError):
    """A step instance raised. ``step`` and ``tag`` name it, ``reason`` is what it said, and
    the step's own exception is the ``__cause__``."""

    def __init__(self, message: str, step: str, tag: tuple[int | str, ...], reason: str) -> None:
        super().__init__(message)
        self.step = step
        self.tag = tag
        self.reason = reason


class DuplicatePut(GraphError):
    """A second put of a tag into an item collection (items are written once); ``by`` is
    the step collection that made it, or ``"environment"``."""

    def __init__(self, message: str, collection: str, tag: tuple[int | str, ...], by: str) -> None:
        super().__init__(message)
        self.collection = collection
        self.tag = tag
        self.by = by


class FreedItem(GraphError):
    """A get of an item after its declared number of gets freed it."""

    def __init__(
        self, message: str, collection: str, tag: tuple[int | str, ...], step: str
    ) -> None:
        super().__init__(message)
        self.collection = collection
        self.tag = tag
        self.step = step


class Unmet(NamedTuple):
    """A get nobody answered: the item's collection and tag, and the waiting step instances
    as ``(step collection, tag)``."""

    collection: str
    tag: tuple[int | str, ...]
    waiting: list[tuple[str, tuple[int | str, ...]]]


class Deadlock(GraphError):
    """No step can run and step instances still wait: ``unmet`` lists each get nobody
    answered, with its waiters."""

    def __init__(self, message: str, unmet: list[Unmet]) -> None:
        super().__init__(message)
        self.unmet = unmet


class RemoteGraphError(GraphError):
    """A failure in another address space of a distributed graph: ``space`` and ``rank``
    name where, and the error raised there (a ``StepFailed``, say) is the ``__cause__``."""

    def __init__(self, message: str, space: str = "", rank: int = 0) -> None:
        super().__init__(message)
        self.space = space
        self.rank = rank


class ParticipantLost(GraphError):
    """A participant of a distributed graph (``space``, at ``rank``) left or died before
    the graph finished, or an item's home there can no longer be asked."""

    def __init__(self, message: str, space: str = "", rank: int = 0) -> None:
        super().__init__(message)
        self.space = space
        self.rank = rank


class ParticipantUnreachable(GraphError):
    """A message to or from a participant (``space``, at ``rank``) could not be sent, was
    refused, or could not be understood (a cut-off link; programs that do not build the
    same graph); ``reason`` says which."""

    def __init__(self, message: str, space: str = "", rank: int = 0, reason: str = "") -> None:
        super().__init__(message)
        self.space = space
        self.rank = rank
        self.reason = reason


class NoSuchRank(GraphError):
    """A placement tuner (``compute_on``, ``home``) of ``tuner`` gave ``rank`` for ``tag``,
    but the graph has only ``ranks`` ranks."""

    def __init__(
        self, message: str, tuner: str, tag: tuple[int | str, ...], rank: int, ranks: int
    ) -> None:
        super().__init__(message)
        self.tuner = tuner
        self.tag = tag
        self.rank = rank
        self.ranks = ranks


class DistributionFailed(GraphError):
    """The graph could not be distributed (a rank not below the count, a collection name
    used twice, participants that did not join in time); ``reason`` says why."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason


class NetworkError(StampedeError):
    """An S-Net network could not be checked, refused a record, or failed while it ran."""


class CheckFailed(NetworkError):
    """The program did not parse or type-check. ``str()`` is the compiler-style report
    (``file:line:col``, the source line, a caret); ``diagnostics`` lists each problem as a
    dict with ``code``, ``message``, ``line``, ``column`` and ``label``."""

    def __init__(self, message: str, diagnostics: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.diagnostics = diagnostics or []


class BoxFailed(NetworkError):
    """A box raised on a record, or emitted values its signature does not allow: ``box``
    names it, ``record`` describes the record it was given, ``reason`` is what went wrong,
    and the box's own exception, if it raised, is the ``__cause__``."""

    def __init__(self, message: str, box: str, record: str, reason: str) -> None:
        super().__init__(message)
        self.box = box
        self.record = record
        self.reason = reason


class RecordRejected(NetworkError):
    """The network does not accept records of this type; ``record`` is the record sent,
    unchanged, and ``accepts`` the types the network takes."""

    def __init__(
        self, message: str, record: dict[str, Any] | None = None, accepts: list[str] | None = None
    ) -> None:
        super().__init__(message)
        self.record = record
        self.accepts = accepts or []


class TuneError(StampedeError):
    """A model could not be specified, fitted, stored or loaded. For a model file calibrated
    on another deployment, ``differences`` lists what differs (``field: stored -> here``)."""

    def __init__(self, message: str, differences: list[str] | None = None) -> None:
        super().__init__(message)
        self.differences = differences or []


class ClusterError(StampedeError):
    """Base of the errors of cluster threads (``stampede.cluster``)."""


class TaskFailed(ClusterError):
    """The joined task raised: ``task`` is its name, ``message`` what it raised."""

    def __init__(self, message: str, task: str = "", detail: str = "") -> None:
        super().__init__(message)
        self.task = task
        self.message = detail


class TaskCancelled(ClusterError):
    """The joined task was cancelled, or this wait gave up because the calling task was."""


class SpaceLost(ClusterError):
    """The address space running the task, or holding the object, left or died."""

    def __init__(self, message: str, space: str = "") -> None:
        super().__init__(message)
        self.space = space


class UnknownTask(ClusterError, LookupError):
    """The space asked to run a task has nothing registered or importable by its name."""

    def __init__(self, message: str, space: str = "", task: str = "") -> None:
        super().__init__(message)
        self.space = space
        self.task = task


class NoSpace(ClusterError):
    """No address space of the cluster can take the task (an unknown space id)."""


class BarrierFailed(ClusterError):
    """A barrier member left or died, or the barrier's wait timed out."""


__all__ = [
    "StampedeError",
    "PutFailed",
    "Full",
    "DuplicateTimestamp",
    "InvalidTimestamp",
    "ZeroConsumers",
    "BelowVisibility",
    "Closed",
    "Detached",
    "GetFailed",
    "Unavailable",
    "Timeout",
    "Gone",
    "ZoneMismatch",
    "TaskExited",
    "UnknownTicket",
    "NameTaken",
    "TooManyConnections",
    "InvalidArgument",
    "MarshalError",
    "UnreachableError",
    "NotLocal",
    "ConfigError",
    "ConnectError",
    "AuthRejected",
    "Denied",
    "TooLarge",
    "NotFound",
    "WrongKind",
    "InvalidName",
    "ProtocolError",
    "GraphError",
    "StepFailed",
    "DuplicatePut",
    "FreedItem",
    "Deadlock",
    "RemoteGraphError",
    "ParticipantLost",
    "ParticipantUnreachable",
    "NoSuchRank",
    "DistributionFailed",
    "NetworkError",
    "CheckFailed",
    "BoxFailed",
    "RecordRejected",
    "TuneError",
    "ClusterError",
    "TaskFailed",
    "TaskCancelled",
    "SpaceLost",
    "UnknownTask",
    "NoSpace",
    "BarrierFailed",
]
