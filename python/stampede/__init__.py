"""Stampede: time-indexed channels, queues and registers for interactive stream pipelines.

Tasks with virtual time put time-stamped items into containers and get them by timestamp;
items nobody can still need are reclaimed below a watermark. Blocking calls release the GIL,
numpy arrays are shared without copying, and every error is a :class:`StampedeError`.
:meth:`Space.join` joins this process to a distributed application: the same tasks,
containers and connections then reach containers owned by other processes and hosts.

>>> import stampede as sp
>>> with sp.Runtime() as rt, rt.task(0) as producer, rt.task(sp.INFINITY) as consumer:
...     frames = rt.channel("frames", capacity=8)
...     inp = consumer.attach_input(frames)
...     producer.attach_output(frames).put(0, b"frame 0")
...     inp.get(sp.NEXT_UNSEEN, timeout=1.0)
(0, b'frame 0')
"""

from __future__ import annotations

from ._arrivals import Arrivals
from ._stampede import (
    INFINITY,
    Channel,
    ChannelInput,
    ChannelOutput,
    ChannelStats,
    Correlated,
    Correlator,
    GcStats,
    Hold,
    LateAction,
    Lateness,
    Loan,
    NameRecord,
    Opaque,
    Pacer,
    PacerStats,
    Queue,
    QueueInput,
    QueueItem,
    QueueOutput,
    QueueStats,
    Register,
    RegisterInput,
    RegisterOutput,
    Runtime,
    Selector,
    Space,
    SpaceStats,
    SpaceWatermark,
    Task,
    Tick,
    Tls,
    WatermarkReport,
    register_type,
    type_tag,
    zenoh_runtime_for_this_machine,
)
from ._tasks import TaskThread
from .errors import (
    AuthRejected,
    BelowVisibility,
    BoxFailed,
    CheckFailed,
    Closed,
    ConfigError,
    ConnectError,
    Deadlock,
    Detached,
    DuplicatePut,
    DuplicateTimestamp,
    FreedItem,
    Full,
    GetFailed,
    Gone,
    GraphError,
    InvalidArgument,
    InvalidName,
    InvalidTimestamp,
    MarshalError,
    NameTaken,
    NetworkError,
    NotFound,
    NotLocal,
    ProtocolError,
    PutFailed,
    RecordRejected,
    TuneError,
    StampedeError,
    StepFailed,
    TaskExited,
    Timeout,
    TooManyConnections,
    Unavailable,
    UnknownTicket,
    UnreachableError,
    WrongKind,
    ZeroConsumers,
    ZoneMismatch,
)

OLDEST = Selector.OLDEST
"""Get the oldest item not consumed on this connection."""
NEWEST = Selector.NEWEST
"""Get the newest item not consumed on this connection."""
NEWEST_UNSEEN = Selector.NEWEST_UNSEEN
"""Get the newest item this connection has never gotten, skipping stale ones."""
NEXT_UNSEEN = Selector.NEXT_UNSEEN
"""Get the oldest unconsumed item newer than this connection's last get."""

CONTINUE = LateAction.CONTINUE
"""A late pacer tick goes on; later ticks keep their schedule."""
SKIP = LateAction.SKIP
"""A late pacer tick skips to the first virtual time still in the future."""
RESYNC = LateAction.RESYNC
"""A late pacer tick rebases the schedule to now."""

__all__ = [
    "INFINITY",
    "OLDEST",
    "NEWEST",
    "NEWEST_UNSEEN",
    "NEXT_UNSEEN",
    "CONTINUE",
    "SKIP",
    "RESYNC",
    "Arrivals",
    "Channel",
    "ChannelInput",
    "ChannelOutput",
    "ChannelStats",
    "Correlated",
    "Correlator",
    "GcStats",
    "Hold",
    "LateAction",
    "Lateness",
    "NameRecord",
    "Loan",
    "Opaque",
    "Pacer",
    "PacerStats",
    "Queue",
    "QueueInput",
    "QueueItem",
    "QueueOutput",
    "QueueStats",
    "Register",
    "RegisterInput",
    "RegisterOutput",
    "Runtime",
    "Selector",
    "Space",
    "SpaceStats",
    "SpaceWatermark",
    "Task",
    "TaskThread",
    "Tick",
    "Tls",
    "WatermarkReport",
    "register_type",
    "type_tag",
    "zenoh_runtime_for_this_machine",
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
    "NotFound",
    "WrongKind",
    "InvalidName",
    "ProtocolError",
    "GraphError",
    "StepFailed",
    "DuplicatePut",
    "FreedItem",
    "Deadlock",
    "NetworkError",
    "CheckFailed",
    "BoxFailed",
    "RecordRejected",
    "TuneError",
]
