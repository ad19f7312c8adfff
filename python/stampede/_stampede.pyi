# Type stubs for the compiled module. `make lint-python` checks them with mypy --strict
# (stubtest compares them with the built module).
import os
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, ClassVar, Final, TypeVar, final, overload

from typing_extensions import disjoint_base

from ._arrivals import Arrivals
from ._tasks import TaskThread

_R = TypeVar("_R")
_T = TypeVar("_T")

INFINITY: Final[int]
"""The largest timestamp: a task at virtual time INFINITY never holds the watermark."""

@final
class Selector:
    """Which item a channel get asks for (an ``int`` asks for that exact timestamp)."""

    OLDEST: ClassVar[Selector]
    NEWEST: ClassVar[Selector]
    NEWEST_UNSEEN: ClassVar[Selector]
    NEXT_UNSEEN: ClassVar[Selector]
    def __int__(self) -> int: ...

@final
class LateAction:
    """What a pacer's late handler decides."""

    CONTINUE: ClassVar[LateAction]
    SKIP: ClassVar[LateAction]
    RESYNC: ClassVar[LateAction]
    def __int__(self) -> int: ...

@disjoint_base
class Runtime:
    """An address space's Space-Time Memory: containers, tasks, garbage collection."""

    def __new__(cls, *, gc_interval: float | None = ...) -> Runtime: ...
    def channel(
        self, name: str | None = None, *, capacity: int | None = None, zone: int = 0
    ) -> Channel: ...
    def queue(
        self, name: str | None = None, *, capacity: int | None = None, zone: int = 0
    ) -> Queue: ...
    def register(self, name: str | None = None, *, zone: int = 0) -> Register: ...
    def lookup_channel(self, name: str, timeout: float | None = None) -> Channel: ...
    def lookup_queue(self, name: str, timeout: float | None = None) -> Queue: ...
    def lookup_register(self, name: str, timeout: float | None = None) -> Register: ...
    def lookup(self, name: str) -> Channel | Queue | Register | None: ...
    def names(self) -> list[str]: ...
    def task(self, vt: int = 0, *, name: str | None = None, zone: int = 0) -> Task: ...
    def spawn(
        self,
        target: Callable[..., _R],
        *args: Any,
        vt: int = 0,
        name: str | None = None,
        zone: int = 0,
        daemon: bool = False,
    ) -> TaskThread[_R]: ...
    def join_all(self, timeout: float | None = None) -> None: ...
    def collect(self, zone: int = 0) -> int: ...
    def explain(self, zone: int = 0) -> WatermarkReport: ...
    def gc_stats(self, zone: int = 0) -> GcStats: ...
    def close(self) -> None: ...
    def __enter__(self) -> Runtime: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

@final
class Task:
    """A thread of control with a virtual time."""

    @property
    def id(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def zone(self) -> int: ...
    @property
    def virtual_time(self) -> int: ...
    @property
    def visibility(self) -> int: ...
    @property
    def exited(self) -> bool: ...
    def set_virtual_time(self, vt: int) -> None: ...
    @overload
    def attach_input(self, container: Channel) -> ChannelInput: ...
    @overload
    def attach_input(self, container: Queue) -> QueueInput: ...
    @overload
    def attach_input(self, container: Register) -> RegisterInput: ...
    @overload
    def attach_output(self, container: Channel) -> ChannelOutput: ...
    @overload
    def attach_output(self, container: Queue) -> QueueOutput: ...
    @overload
    def attach_output(self, container: Register) -> RegisterOutput: ...
    def child(self, vt: int | None = None, *, name: str | None = None) -> Task: ...
    def pacer(
        self,
        period: float,
        *,
        tolerance: float = 0.0,
        on_late: LateAction | Callable[[Lateness], LateAction] | None = None,
    ) -> Pacer: ...
    def exit(self) -> None: ...
    def __enter__(self) -> Task: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

@final
class ChannelStats:
    items: int
    connections: int
    open: int
    puts: int
    gets: int
    reclaimed: int
    skipped: int
    full: int

@final
class QueueStats:
    waiting: int
    held: int
    puts: int
    gets: int
    consumed: int
    redelivered: int
    full: int

@final
class Channel:
    """Timestamp-indexed items, at most one per timestamp (here or in another address space)."""

    @property
    def name(self) -> str | None: ...
    @property
    def owner(self) -> str | None: ...
    @property
    def capacity(self) -> int | None: ...
    @property
    def zone(self) -> int: ...
    def __len__(self) -> int: ...
    def timestamps(self) -> list[int]: ...
    def stats(self) -> ChannelStats: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    def on_garbage(self, handler: Callable[[int, Any], object]) -> None: ...
    def on_arrival(self, callback: Callable[[int], object]) -> int: ...
    def unsubscribe(self, subscription: int) -> bool: ...
    def arrivals(self, capacity: int = 1024) -> Arrivals: ...

@final
class Queue:
    """FIFO items, each delivered to exactly one getter (here or in another address space)."""

    @property
    def name(self) -> str | None: ...
    @property
    def owner(self) -> str | None: ...
    @property
    def capacity(self) -> int | None: ...
    @property
    def zone(self) -> int: ...
    def __len__(self) -> int: ...
    def stats(self) -> QueueStats: ...
    def close(self) -> None: ...
    def on_garbage(self, handler: Callable[[int, Any], object]) -> None: ...
    def on_arrival(self, callback: Callable[[int], object]) -> int: ...
    def unsubscribe(self, subscription: int) -> bool: ...
    def arrivals(self, capacity: int = 1024) -> Arrivals: ...

@final
class Register:
    """A single overwritable value (here or in another address space)."""

    @property
    def name(self) -> str | None: ...
    @property
    def owner(self) -> str | None: ...
    @property
    def zone(self) -> int: ...
    def peek(self) -> tuple[int, Any] | None: ...
    def close(self) -> None: ...


@final
class ChannelOutput:
    @property
    def id(self) -> int: ...
    @property
    def detached(self) -> bool: ...
    @property
    def task(self) -> Task: ...
    def detach(self) -> None: ...
    def __enter__(self) -> ChannelOutput: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...
    @property
    def channel(self) -> Channel: ...
    def put(
        self,
        ts: int,
        item: object,
        *,
        consumers: int | None = None,
        timeout: float | None = None,
        sync: bool = False,
    ) -> None: ...
    def flush(self) -> None: ...
    def try_put(self, ts: int, item: object, *, consumers: int | None = None) -> None: ...
    def loan(self, nbytes: int) -> Loan: ...
    def loan_array(self, shape: int | Sequence[int], dtype: Any = None) -> Any: ...

@final
class ChannelInput:
    @property
    def id(self) -> int: ...
    @property
    def detached(self) -> bool: ...
    @property
    def task(self) -> Task: ...
    def detach(self) -> None: ...
    def __enter__(self) -> ChannelInput: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...
    @property
    def channel(self) -> Channel: ...
    def get(self, selector: Selector | int, *, timeout: float | None = None) -> tuple[int, Any]: ...
    def try_get(self, selector: Selector | int) -> tuple[int, Any]: ...
    def consume(self, ts: int) -> None: ...
    def consume_until(self, ts: int) -> None: ...

@final
class QueueItem:
    ts: int
    ticket: int
    value: Any

@final
class QueueOutput:
    @property
    def id(self) -> int: ...
    @property
    def detached(self) -> bool: ...
    @property
    def task(self) -> Task: ...
    def detach(self) -> None: ...
    def __enter__(self) -> QueueOutput: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...
    @property
    def queue(self) -> Queue: ...
    def put(self, ts: int, item: object, *, timeout: float | None = None) -> int: ...
    def try_put(self, ts: int, item: object) -> int: ...

@final
class QueueInput:
    @property
    def id(self) -> int: ...
    @property
    def detached(self) -> bool: ...
    @property
    def task(self) -> Task: ...
    def detach(self) -> None: ...
    def __enter__(self) -> QueueInput: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...
    @property
    def queue(self) -> Queue: ...
    def get(self, *, timeout: float | None = None) -> QueueItem: ...
    def try_get(self) -> QueueItem: ...
    def consume(self, ticket: int) -> None: ...

@final
class RegisterOutput:
    @property
    def id(self) -> int: ...
    @property
    def detached(self) -> bool: ...
    @property
    def task(self) -> Task: ...
    def detach(self) -> None: ...
    def __enter__(self) -> RegisterOutput: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...
    @property
    def register(self) -> Register: ...
    def write(self, item: object) -> int: ...

@final
class RegisterInput:
    @property
    def id(self) -> int: ...
    @property
    def detached(self) -> bool: ...
    @property
    def task(self) -> Task: ...
    def detach(self) -> None: ...
    def __enter__(self) -> RegisterInput: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...
    @property
    def register(self) -> Register: ...
    def read(self, *, timeout: float | None = None) -> tuple[int, Any]: ...
    def try_read(self) -> tuple[int, Any]: ...

@final
class Lateness:
    vt: int
    late: float
    ticks_behind: int

@final
class Tick:
    """The outcome of Pacer.sync: kind is "on_time", "late", "skip" or "resynced"."""

    kind: str
    late: float
    skip_to: int | None

@final
class PacerStats:
    on_time: int
    late: int
    skipped: int
    resyncs: int

@final
class Pacer:
    """Paces a task to real time: tick vt is due vt periods after the first sync."""

    @property
    def period(self) -> float: ...
    def sync(self, vt: int) -> Tick: ...
    def stats(self) -> PacerStats: ...

@final
class Correlated:
    ts: int
    items: list[tuple[int, Any]]

@final
class Correlator:
    """Sets of items, one per input channel, that belong to the same moment."""

    def __new__(cls, inputs: Sequence[ChannelInput], *, within: int | None = None) -> Correlator: ...
    @property
    def skipped(self) -> int: ...
    def get(self, *, timeout: float | None = None) -> Correlated: ...
    def try_get(self) -> Correlated: ...
    def consume(self, matched: Correlated) -> None: ...
    def consume_until(self, matched: Correlated) -> None: ...
    def close(self) -> None: ...

@final
class _RawArrivals:
    @property
    def dropped(self) -> int: ...
    def poll(self, on_wake: Callable[[], object]) -> int | None: ...
    def next_timeout(self, timeout: float | None = None) -> int | None: ...
    def close(self) -> None: ...

@final
class Hold:
    ts: int
    cause: str
    task: int | None
    task_name: str | None
    container: int | None
    container_name: str | None
    connection: int | None
    ticket: int | None
    description: str

@final
class WatermarkReport:
    zone: int
    floor: int
    watermark: int
    holds: list[Hold]
    def holders(self) -> list[Hold]: ...

@final
class GcStats:
    passes: int
    reclaimed: int
    floor: int

def register_type(
    cls: type[_T],
    name: str,
    marshal: Callable[[_T], bytes],
    unmarshal: Callable[[bytes], _T],
) -> int: ...
def type_tag(name: str) -> int: ...
def zenoh_runtime_for_this_machine() -> str | None: ...

@final
class Opaque:
    """An item of a type this process has no unmarshal hook for."""

    tag: int
    data: bytes

@final
class Tls:
    """TLS settings for joining: endpoints then use ``tls/`` locators."""

    def __new__(
        cls,
        *,
        root_ca: str | os.PathLike[str] | None = None,
        certificate: str | os.PathLike[str] | None = None,
        private_key: str | os.PathLike[str] | None = None,
        verify_name: bool = True,
    ) -> Tls: ...
    @property
    def root_ca(self) -> str | None: ...
    @property
    def certificate(self) -> str | None: ...
    @property
    def private_key(self) -> str | None: ...
    @property
    def verify_name(self) -> bool: ...

@final
class NameRecord:
    """A name registered in an application's name server."""

    name: str
    space: str
    kind: str
    container: int
    zone: int
    capacity: int | None
    meta: str

@final
class SpaceStats:
    """Counters of an address space's network activity."""

    served: int
    malformed: int
    refused: int
    unreachable: int
    cache_hits: int
    spaces_lost: int
    pushed: int
    push_skipped: int
    push_received: int
    consume_failed: int
    events_sent: int
    events_received: int
    events_dropped: int
    events_lost: int
    puts_sent: int
    puts_refused: int
    view_hits: int
    register_hits: int
    leased: int
    lease_hits: int
    view_snapshots: int
    seen_refused: int
    sent_as_received: int
    sent_fresh: int
    loans_shared: int
    loans_plain: int
    invocations_sent: int
    invocations_served: int
    invocations_unknown: int
    invocations_failed: int
    answers_late: int

@final
class SpaceWatermark:
    """One address space's answer to ``Space.explain_cluster``."""

    space: str
    local: int | None
    floor: int | None
    watermark: int | None
    text: str
    error: str | None

@final
class Space(Runtime):
    """An address space: this process's runtime joined to a distributed application."""

    @staticmethod
    def join(
        app: str,
        *,
        mode: str = "peer",
        listen: Sequence[str] = ...,
        connect: Sequence[str] = ...,
        tls: Tls | None = None,
        user: str | None = None,
        password: str | None = None,
        credentials_file: str | os.PathLike[str] | None = None,
        lease: float | None = None,
        op_timeout: float | None = None,
        wait_slice: float | None = None,
        connect_timeout: float | None = None,
        multicast_scouting: bool = False,
        shm_pool: int | None = None,
        queue_prefetch: int = 0,
    ) -> Space: ...
    @property
    def id(self) -> str: ...
    @property
    def app(self) -> str: ...
    @property
    def runtime(self) -> Space: ...
    @property
    def left(self) -> bool: ...
    def channel_on(
        self, space: str, name: str | None = None, *, capacity: int | None = None, zone: int = 0
    ) -> Channel: ...
    def queue_on(
        self, space: str, name: str | None = None, *, capacity: int | None = None, zone: int = 0
    ) -> Queue: ...
    def register_on(self, space: str, name: str | None = None, *, zone: int = 0) -> Register: ...
    def record(self, name: str) -> NameRecord | None: ...
    def records(self) -> list[NameRecord]: ...
    def spaces(self) -> list[str]: ...
    def explain_cluster(self, zone: int = 0) -> list[SpaceWatermark]: ...
    def stats(self) -> SpaceStats: ...
    def leave(self) -> None: ...
    def __enter__(self) -> Space: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

@final
class Loan:
    """Memory lent for one item: fill it (buffer protocol), then put it."""

    @property
    def in_place(self) -> bool: ...
    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

@final
class _ItemView:
    """Read-only memory of a stored item (buffer protocol)."""

# Concurrent Collections (``stampede.cnc``).

_TagIn = int | str | tuple[int | str, ...]
_Tag = tuple[int | str, ...]
# A step's tag is a tuple of ints and strs; callables may declare the narrower tuple their
# tag collection holds (such as ``tuple[int, int, int]``), so they take ``Any`` here.
_TagArg = Any

@final
class Executor:
    """A pool of worker threads that steal work from each other; graphs can share one."""

    def __new__(cls, workers: int | None = None) -> Executor: ...
    @property
    def workers(self) -> int: ...
    @property
    def tracing(self) -> bool: ...
    @tracing.setter
    def tracing(self, on: bool) -> None: ...
    def take_trace(self) -> list[TraceEvent]: ...

@final
class TraceEvent:
    """One step run: worker, step collection, tag, start and end in seconds."""

    @property
    def worker(self) -> int: ...
    @property
    def step(self) -> str: ...
    @property
    def tag(self) -> str: ...
    @property
    def start(self) -> float: ...
    @property
    def end(self) -> float: ...

@final
class ItemCollection:
    """Values keyed by tag, each written once."""

    @property
    def name(self) -> str: ...
    def __len__(self) -> int: ...
    def home(self, rank: Callable[[_TagArg], int]) -> ItemCollection: ...

@final
class TagCollection:
    """Tags that prescribe step collections."""

    @property
    def name(self) -> str: ...
    def prescribes(self, steps: StepCollection) -> TagCollection: ...
    def __len__(self) -> int: ...

@final
class StepCollection:
    """A Python callable ``(ctx, tag)`` run for every prescribed tag."""

    @property
    def name(self) -> str: ...
    def depends(
        self, inputs: Callable[[_TagArg], Sequence[tuple[ItemCollection, _TagIn]]]
    ) -> StepCollection: ...
    def compute_on(self, rank: Callable[[_TagArg], int]) -> StepCollection: ...
    def untuned(self) -> StepCollection: ...
    def priority(self, high: Callable[[_TagArg], bool]) -> StepCollection: ...

@final
class StepContext:
    """What a running step gets, puts and prescribes through."""

    def get(self, items: ItemCollection, tag: _TagIn) -> Any: ...
    def put(
        self, items: ItemCollection, tag: _TagIn, value: object, gets: int | None = None
    ) -> None: ...
    def put_tag(self, tags: TagCollection, tag: _TagIn) -> None: ...
    @property
    def tag(self) -> _Tag: ...

class Suspended(BaseException):
    """A get found no item: the step runs again once it is put."""

@final
class Graph:
    """A Concurrent Collections graph."""

    def __new__(cls, executor: Executor | None = None) -> Graph: ...
    @property
    def executor(self) -> Executor: ...
    def items(self, name: str) -> ItemCollection: ...
    def tags(self, name: str, memoize: bool = True) -> TagCollection: ...
    def steps(
        self,
        name: str,
        body: Callable[[StepContext, _TagArg], object],
        depends: Callable[[_TagArg], Sequence[tuple[ItemCollection, _TagIn]]] | None = None,
        priority: Callable[[_TagArg], bool] | None = None,
    ) -> StepCollection: ...
    def put(
        self, items: ItemCollection, tag: _TagIn, value: object, gets: int | None = None
    ) -> None: ...
    def put_tag(self, tags: TagCollection, tag: _TagIn) -> None: ...
    def get(self, items: ItemCollection, tag: _TagIn) -> Any: ...
    def wait(self, timeout: float | None = None) -> None: ...
    def distribute(self, space: Space, name: str, rank: int, ranks: int) -> None: ...
    def serve(self) -> None: ...
    def release(self) -> None: ...
    @property
    def rank(self) -> tuple[int, int] | None: ...

def _shutdown() -> None: ...
