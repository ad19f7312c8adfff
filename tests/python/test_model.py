"""State-machine property test of Space-Time Memory through the Python API.

Random sequences of operations run against the runtime and against ``Model``, a small
sequential reference model of design §2 (``docs/design.md``; a port of the one in
``crates/stampede-core/tests/model.rs``), and every result is compared. Where §2 leaves a
choice open the model follows the rule the implementation documents:

* the watermark is the minimum of every live task's virtual time, every unconsumed queue
  item and, per channel input connection, the oldest item present and not consumed on it,
  capped by the *horizon* (one above the newest timestamp ever put) and never below the
  floor; the applied floor only rises, a zone without live tasks keeps its floor, and
  ``Runtime.collect`` applies it;
* a root task starts at or above the zone's floor, a child at or above
  ``max(parent visibility, floor)``;
* rule 3 marks the items *present* below the task's visibility consumed on the new
  connection, and such a mark does not count as a consume for reference counts;
* ``get(t)`` is ``Gone`` when ``t`` is below the applied floor, consumed on this connection
  or reclaimed by its reference count, else ``Unavailable`` with the nearest timestamps
  visible to the connection below and above the request;
* a timestamp reclaimed by its reference count may not be put again, and a channel put
  below the floor fails with ``BelowVisibility`` (visibility: the floor);
* a queue delivers in FIFO (ticket) order; the held items of a connection that goes away
  (detached, or its task exited) go back to the front of the queue in their original order.

After every step the stored timestamps of each channel, the queue's waiting and held counts,
the floor and watermark reported by ``Runtime.explain``, every task's virtual time and
visibility, and the invariant "every task's visibility is at least the watermark" are
checked. A ``collect`` must return the model's floor, leave nothing below it, and reclaim no
item that some task could still reach by the rules.

Only non-blocking operations are used, on a runtime without a background collector, so each
run is a deterministic single-threaded sequence.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar, Union

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import stampede as sp

INF = sp.INFINITY
MIN = -(2**63)

SLOTS = 4  # task slots
MAX_CONNS = 10  # most connections held at once (live or dead)
CH_CAP: tuple[int | None, int | None] = (3, None)  # channel 0 bounded, channel 1 not
Q_CAP = 3  # the queue's capacity (of waiting items)
QUEUE = 2  # container index of the queue (0 and 1 are the channels)
IN, OUT = "in", "out"

T = TypeVar("T")

# ---------------------------------------------------------------------------------------
# Transitions and outcomes
# ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CreateRoot:
    slot: int
    vt: int


@dataclasses.dataclass(frozen=True)
class CreateChild:
    slot: int
    parent: int
    vt: int


@dataclasses.dataclass(frozen=True)
class SetVt:
    slot: int
    vt: int


@dataclasses.dataclass(frozen=True)
class Attach:
    slot: int
    cont: int
    dir: str


@dataclasses.dataclass(frozen=True)
class Detach:
    conn: int


@dataclasses.dataclass(frozen=True)
class Exit:
    slot: int


@dataclasses.dataclass(frozen=True)
class Put:
    conn: int
    ts: int
    consumers: int | None


@dataclasses.dataclass(frozen=True)
class Get:
    conn: int
    sel: sp.Selector | int


@dataclasses.dataclass(frozen=True)
class Consume:
    conn: int
    ts: int


@dataclasses.dataclass(frozen=True)
class ConsumeUntil:
    conn: int
    ts: int


@dataclasses.dataclass(frozen=True)
class QPut:
    conn: int
    ts: int


@dataclasses.dataclass(frozen=True)
class QGet:
    conn: int


@dataclasses.dataclass(frozen=True)
class QConsume:
    conn: int
    ticket: int


@dataclasses.dataclass(frozen=True)
class Collect:
    pass


Tr = Union[
    CreateRoot,
    CreateChild,
    SetVt,
    Attach,
    Detach,
    Exit,
    Put,
    Get,
    Consume,
    ConsumeUntil,
    QPut,
    QGet,
    QConsume,
    Collect,
]

# An outcome: ("ok", value) or ("err", exception class name, details).
Outcome = tuple[Any, ...]
OK: Outcome = ("ok", None)


def err(name: str, *details: Any) -> Outcome:
    return ("err", name, details)


def describe(e: sp.StampedeError) -> Outcome:
    """The outcome a runtime error stands for."""
    name = type(e).__name__
    if isinstance(e, sp.BelowVisibility):
        return err(name, e.timestamp, e.visibility)
    if isinstance(e, sp.GetFailed):
        return err(name, e.below, e.above)
    if isinstance(e, sp.Gone):
        return err(name, e.timestamp)
    return err(name)


def payload(c: int, ts: int) -> str:
    return f"c{c}@{ts}"


# ---------------------------------------------------------------------------------------
# The reference model
# ---------------------------------------------------------------------------------------


@dataclasses.dataclass
class TaskM:
    uid: int
    vt: int


@dataclasses.dataclass
class InM:
    """Per-connection item states of a channel input connection."""

    until: int | None = None  # everything at or below is consumed, also items arriving later
    consumed: set[int] = dataclasses.field(default_factory=set)
    open: set[int] = dataclasses.field(default_factory=set)  # gotten and not consumed
    seen: set[int] = dataclasses.field(default_factory=set)  # ever gotten here
    last_get: int | None = None

    def is_consumed(self, ts: int) -> bool:
        return (self.until is not None and ts <= self.until) or ts in self.consumed


@dataclasses.dataclass
class ConnM:
    uid: int
    task: int
    cont: int
    dir: str
    input: InM


@dataclasses.dataclass
class ItemM:
    refcount: int | None
    consumed_by: int


@dataclasses.dataclass
class ChanM:
    items: dict[int, ItemM] = dataclasses.field(default_factory=dict)
    retired: set[int] = dataclasses.field(default_factory=set)  # reclaimed by reference count


@dataclasses.dataclass
class QueueM:
    waiting: list[tuple[int, int]] = dataclasses.field(default_factory=list)  # (ticket, ts)
    # ticket -> (connection uid, task uid, ts)
    held: dict[int, tuple[int, int, int]] = dataclasses.field(default_factory=dict)
    next_ticket: int = 1


class Model:
    def __init__(self) -> None:
        self.tasks: list[TaskM | None] = [None] * SLOTS
        self.next_uid = 1
        # Connections in the order the test holds them, including those of exited tasks.
        self.conns: list[ConnM] = []
        self.chans = [ChanM(), ChanM()]
        self.queue = QueueM()
        self.floor = MIN  # the applied watermark of the default zone
        self.newest = MIN  # the newest timestamp ever put into a container of the zone
        # For Collect: per channel, the items that were reachable before the pass.
        self.reachable: list[set[int]] | None = None

    def uid(self) -> int:
        self.next_uid += 1
        return self.next_uid

    def alive(self, task: int) -> bool:
        return any(t.uid == task for t in self.live_tasks())

    def live_tasks(self) -> list[TaskM]:
        return [t for t in self.tasks if t is not None]

    def live_inputs(self, c: int) -> list[ConnM]:
        """Input connections attached to channel ``c`` now (their task is alive)."""
        return [k for k in self.conns if k.cont == c and k.dir == IN and self.alive(k.task)]

    def visibility(self, task: int) -> int:
        """min(VT, items open on its channel inputs, queue items it holds)."""
        vt = next(t.vt for t in self.live_tasks() if t.uid == task)
        opened = min(
            (min(k.input.open) for k in self.conns if k.task == task and k.dir == IN and k.input.open),
            default=INF,
        )
        held = min((h[2] for h in self.queue.held.values() if h[1] == task), default=INF)
        return min(vt, opened, held)

    def visible(self, c: int, k: InM) -> list[int]:
        """Items of channel ``c`` visible on a connection: present and not consumed on it."""
        return sorted(t for t in self.chans[c].items if not k.is_consumed(t))

    def watermark(self) -> int:
        if not self.live_tasks():
            return self.floor
        w = self.newest + 1
        for t in self.live_tasks():
            w = min(w, t.vt)
        for _, ts in self.queue.waiting:
            w = min(w, ts)
        for h in self.queue.held.values():
            w = min(w, h[2])
        for c in (0, 1):
            for k in self.live_inputs(c):
                vis = self.visible(c, k.input)
                if vis:
                    w = min(w, vis[0])
        return max(w, self.floor)

    def reachable_items(self) -> list[set[int]]:
        """Which channel items some task could still get, derived from the rules rather than
        from the watermark: an item unconsumed on a live connection; an item at or above a
        live task's visibility (the task could attach a new input and get it); an item at or
        above an unconsumed queue item (its getter's visibility drops to it). With no live
        task, everything stored (a task created later starts at the floor)."""
        out: list[set[int]] = [set(), set()]
        any_task = bool(self.live_tasks())
        bound = INF
        for t in self.live_tasks():
            bound = min(bound, self.visibility(t.uid))
        for _, ts in self.queue.waiting:
            bound = min(bound, ts)
        for h in self.queue.held.values():
            bound = min(bound, h[2])
        for c in (0, 1):
            for ts in self.chans[c].items:
                unconsumed = any(not k.input.is_consumed(ts) for k in self.live_inputs(c))
                if not any_task or ts >= bound or unconsumed:
                    out[c].add(ts)
        return out

    def count_consume(self, c: int, ts: int) -> None:
        """One more connection consumed ``ts`` in channel ``c``."""
        item = self.chans[c].items.get(ts)
        if item is not None:
            item.consumed_by += 1
        self.retire_if_counted(c, ts)

    def retire_if_counted(self, c: int, ts: int) -> None:
        """Reclaims a counted item once enough connections consumed it and none has it open."""
        item = self.chans[c].items.get(ts)
        if item is None:
            return
        opened = any(ts in k.input.open for k in self.live_inputs(c))
        if item.refcount is not None and item.consumed_by >= item.refcount and not opened:
            del self.chans[c].items[ts]
            self.chans[c].retired.add(ts)

    def retire_opened_by(self, gone: list[tuple[int, list[int]]]) -> None:
        """After connections went away: items they had open may now be reclaimable."""
        for c, opened in gone:
            for ts in opened:
                self.retire_if_counted(c, ts)

    def redeliver(self, conn: int) -> None:
        """Puts the queue items held on connection ``conn`` back among the waiting items, in
        ticket order."""
        back = [(t, h[2]) for t, h in self.queue.held.items() if h[0] == conn]
        for t, _ in back:
            del self.queue.held[t]
        self.queue.waiting.extend(back)
        self.queue.waiting.sort()

    def slot_uid(self, slot: int) -> int:
        t = self.tasks[slot]
        assert t is not None
        return t.uid

    def create(self, slot: int, vt: int, least: int) -> Outcome:
        if vt < least:
            return err("BelowVisibility", vt, least)
        self.tasks[slot] = TaskM(self.uid(), vt)
        return OK

    def step(self, tr: Tr) -> Outcome:
        self.reachable = None
        if isinstance(tr, CreateRoot):
            return self.create(tr.slot, tr.vt, self.floor)
        if isinstance(tr, CreateChild):
            least = max(self.visibility(self.slot_uid(tr.parent)), self.floor)
            return self.create(tr.slot, tr.vt, least)
        if isinstance(tr, SetVt):
            uid = self.slot_uid(tr.slot)
            vis = self.visibility(uid)
            if tr.vt < vis:
                return err("BelowVisibility", tr.vt, vis)
            task = self.tasks[tr.slot]
            assert task is not None
            task.vt = tr.vt
            return OK
        if isinstance(tr, Attach):
            task_uid = self.slot_uid(tr.slot)
            inp = InM()
            if tr.cont != QUEUE and tr.dir == IN:
                # Rule 3: items present below visibility start consumed (not counted).
                vis = self.visibility(task_uid)
                inp.consumed = {t for t in self.chans[tr.cont].items if t < vis}
            self.conns.append(ConnM(self.uid(), task_uid, tr.cont, tr.dir, inp))
            return OK
        if isinstance(tr, Detach):
            k = self.conns.pop(tr.conn)
            if k.dir == IN and self.alive(k.task):
                if k.cont == QUEUE:
                    self.redeliver(k.uid)
                else:
                    self.retire_opened_by([(k.cont, sorted(k.input.open))])
            return ("ok", None)
        if isinstance(tr, Exit):
            uid = self.slot_uid(tr.slot)
            self.tasks[tr.slot] = None
            mine = [k for k in self.conns if k.task == uid and k.dir == IN]
            self.retire_opened_by([(k.cont, sorted(k.input.open)) for k in mine if k.cont != QUEUE])
            for k in mine:
                if k.cont == QUEUE:
                    self.redeliver(k.uid)
            return OK
        if isinstance(tr, Put):
            return self.put(tr.conn, tr.ts, tr.consumers)
        if isinstance(tr, Get):
            return self.get(tr.conn, tr.sel)
        if isinstance(tr, Consume):
            k = self.conns[tr.conn]
            if not self.alive(k.task):
                return err("Detached")
            k.input.open.discard(tr.ts)
            if not k.input.is_consumed(tr.ts):
                k.input.consumed.add(tr.ts)
                self.count_consume(k.cont, tr.ts)
            return OK
        if isinstance(tr, ConsumeUntil):
            k = self.conns[tr.conn]
            if not self.alive(k.task):
                return err("Detached")
            newly = sorted(
                t for t in self.chans[k.cont].items if t <= tr.ts and not k.input.is_consumed(t)
            )
            k.input.open = {t for t in k.input.open if t > tr.ts}
            k.input.until = tr.ts if k.input.until is None else max(k.input.until, tr.ts)
            for t in newly:
                self.count_consume(k.cont, t)
            return OK
        if isinstance(tr, QPut):
            return self.qput(tr.conn, tr.ts)
        if isinstance(tr, QGet):
            k = self.conns[tr.conn]
            if not self.alive(k.task):
                return err("Detached")
            if not self.queue.waiting:
                return err("Unavailable", None, None)
            ticket, ts = self.queue.waiting.pop(0)
            self.queue.held[ticket] = (k.uid, k.task, ts)
            return ("ok", (ts, ticket))
        if isinstance(tr, QConsume):
            k = self.conns[tr.conn]
            if not self.alive(k.task):
                return err("Detached")
            h = self.queue.held.get(tr.ticket)
            if h is not None and h[0] == k.uid:
                del self.queue.held[tr.ticket]
                return OK
            return err("UnknownTicket")
        assert isinstance(tr, Collect)
        return ("collect", self.collect())

    def collect(self) -> int:
        """A collection pass: raise the floor to the watermark and reclaim below it."""
        self.reachable = self.reachable_items()
        if not self.live_tasks():
            return self.floor
        w = self.watermark()
        self.floor = w
        for ch in self.chans:
            ch.items = {t: v for t, v in ch.items.items() if t >= w}
        return w

    def put(self, conn: int, ts: int, consumers: int | None) -> Outcome:
        k = self.conns[conn]
        c = k.cont
        if ts == INF:
            return err("InvalidTimestamp")
        if consumers == 0:
            return err("ZeroConsumers")
        if not self.alive(k.task):
            return err("Detached")
        vis = self.visibility(k.task)
        if ts < vis:
            return err("BelowVisibility", ts, vis)
        if ts < self.floor:
            return err("BelowVisibility", ts, self.floor)
        ch = self.chans[c]
        if ts in ch.items or ts in ch.retired:
            return err("DuplicateTimestamp")
        cap = CH_CAP[c]
        if cap is not None and len(ch.items) >= cap:
            # A put that finds the channel full runs one pass before giving up.
            self.collect()
            if len(self.chans[c].items) >= cap:
                return err("Full")
        # Connections that consumed `ts` before it arrived count towards its reference count.
        consumed_by = sum(1 for i in self.live_inputs(c) if i.input.is_consumed(ts))
        self.newest = max(self.newest, ts)
        if consumers is not None and consumed_by >= consumers:
            self.chans[c].retired.add(ts)
        else:
            self.chans[c].items[ts] = ItemM(consumers, consumed_by)
        return OK

    def get(self, conn: int, sel: sp.Selector | int) -> Outcome:
        k = self.conns[conn]
        c = k.cont
        if not self.alive(k.task):
            return err("Detached")
        i = k.input
        visible = self.visible(c, i)
        found: int | None
        if isinstance(sel, int):
            if sel == INF or sel < self.floor or i.is_consumed(sel) or sel in self.chans[c].retired:
                return err("Gone", sel)
            found = sel if sel in self.chans[c].items else None
        elif sel == sp.OLDEST:
            found = visible[0] if visible else None
        elif sel == sp.NEWEST:
            found = visible[-1] if visible else None
        elif sel == sp.NEWEST_UNSEEN:
            found = next((t for t in reversed(visible) if t not in i.seen), None)
        else:
            assert sel == sp.NEXT_UNSEEN
            last = i.last_get
            found = next((t for t in visible if last is None or t > last), None)
        if found is not None:
            i.last_get = found
            i.open.add(found)
            i.seen.add(found)
            return ("ok", found)
        if isinstance(sel, int):
            at = sel
        elif sel == sp.NEXT_UNSEEN:
            at = MIN if i.last_get is None else i.last_get
        else:
            at = INF
        below = next((t for t in reversed(visible) if t < at), None)
        above = next((t for t in visible if t > at), None)
        return err("Unavailable", below, above)

    def qput(self, conn: int, ts: int) -> Outcome:
        k = self.conns[conn]
        if ts == INF:
            return err("InvalidTimestamp")
        if not self.alive(k.task):
            return err("Detached")
        vis = self.visibility(k.task)
        if ts < vis:
            return err("BelowVisibility", ts, vis)
        if ts < self.floor:
            return err("BelowVisibility", ts, self.floor)
        if len(self.queue.waiting) >= Q_CAP:
            return err("Full")
        ticket = self.queue.next_ticket
        self.queue.next_ticket += 1
        self.queue.waiting.append((ticket, ts))
        self.newest = max(self.newest, ts)
        return ("ok", ticket)

    def conn_is(self, i: int, cont_is_queue: bool, d: str) -> bool:
        return (
            i < len(self.conns)
            and self.conns[i].dir == d
            and (self.conns[i].cont == QUEUE) == cont_is_queue
        )

    def conns_of(self, cont_is_queue: bool, d: str) -> list[int]:
        return [i for i in range(len(self.conns)) if self.conn_is(i, cont_is_queue, d)]

    def put_base(self, i: int) -> int:
        """Where puts on output connection ``i`` are likely to succeed."""
        k = self.conns[i]
        if not self.alive(k.task):
            return 0
        vis = max(self.visibility(k.task), self.floor)
        return 0 if vis == INF or vis < -100 else vis

    def ts_pool(self) -> list[int]:
        """Timestamps worth trying: stored, retired, open, and around floor and visibilities."""
        pool = {0, self.floor, self.floor - 1}
        for ch in self.chans:
            pool |= set(ch.items) | ch.retired
        for k in self.conns:
            pool |= k.input.open
            if k.input.until is not None:
                pool.add(k.input.until)
        pool |= {ts for _, ts in self.queue.waiting}
        for t in self.live_tasks():
            vis = self.visibility(t.uid)
            pool |= {t.vt, vis, vis - 1, vis + 1}
        return sorted(t for t in pool if MIN < t < INF)


# ---------------------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------------------


# Generation draws from a few fixed strategies and picks from the model's current choices by
# index: building strategies from the state at every step would cost most of the run time.
INDEX = st.integers(0, 1023)
SMALL_TS = st.integers(-1, 13)
DELTA = st.integers(0, 4)
Draw = Callable[[st.SearchStrategy[Any]], Any]


def choose(draw: Draw, seq: list[T]) -> T:
    """One of ``seq`` (shrinks towards the first)."""
    i: int = draw(INDEX)
    return seq[i % len(seq)]


def choose_weighted(draw: Draw, options: list[tuple[int, T]]) -> T:
    """One of ``options``, each with its weight (shrinks towards the first)."""
    k = choose(draw, list(range(sum(w for w, _ in options))))
    for w, value in options:
        if k < w:
            return value
        k -= w
    raise AssertionError("unreachable")


def likely(draw: Draw, yes: int = 3, no: int = 1) -> bool:
    """True with odds ``yes`` to ``no``."""
    return choose_weighted(draw, [(yes, True), (no, False)])


def draw_ts(draw: Draw, pool: list[int]) -> int:
    if likely(draw, 3, 4):
        small: int = draw(SMALL_TS)
        return small
    return choose(draw, pool)


def draw_vt(draw: Draw, pool: list[int]) -> int:
    kind = choose_weighted(draw, [(4, "small"), (5, "pool"), (1, "inf")])
    if kind == "small":
        return int(draw(SMALL_TS))
    return choose(draw, pool) if kind == "pool" else INF


def draw_near(draw: Draw, base: int, pool: list[int]) -> int:
    """Puts mostly at or just above the putter's visibility."""
    kind = choose_weighted(draw, [(16, "near"), (8, "any"), (1, "inf")])
    if kind == "near":
        return min(base + int(draw(DELTA)), INF)
    return draw_ts(draw, pool) if kind == "any" else INF


def setup_strategy() -> st.SearchStrategy[list[Tr]]:
    """A few tasks and connections, so that most of a sequence moves items."""

    @st.composite
    def setup(draw: Draw) -> list[Tr]:
        steps: list[Tr] = [CreateRoot(0, int(draw(st.integers(0, 3))))]
        for slot in range(1, int(draw(st.integers(1, 2))) + 1):
            vt = INF if likely(draw, 1, 3) else int(draw(st.integers(-1, 9)))
            steps.append(CreateRoot(slot, vt))
        tasks = len(steps)
        steps += [Attach(0, c, OUT) for c in (0, 1, QUEUE)]
        for _ in range(int(draw(st.integers(2, 6)))):
            slot = int(draw(st.integers(0, SLOTS - 1)))
            cont = choose(draw, [0, 1, QUEUE])
            d = choose_weighted(draw, [(3, IN), (1, OUT)])
            steps.append(Attach(slot % tasks, cont, d))
        return steps

    return setup()


@st.composite
def transitions(draw: Draw, s: Model) -> Tr:
    pool = s.ts_pool()
    empty = [i for i in range(SLOTS) if s.tasks[i] is None]
    live = [i for i in range(SLOTS) if s.tasks[i] is not None]
    ch_out = s.conns_of(False, OUT)
    ch_in = s.conns_of(False, IN)
    q_out = s.conns_of(True, OUT)
    q_in = s.conns_of(True, IN)
    kinds: list[tuple[int, str]] = [(3, "collect")]
    if empty:
        kinds.append((10 if not live else 1, "root"))
        if live:
            kinds.append((2, "child"))
    if live:
        kinds.append((3, "set_vt"))
        if len(s.conns) < MAX_CONNS:
            kinds.append((4 if len(s.conns) < 4 else 1, "attach"))
        kinds.append((1, "exit"))
    if s.conns:
        kinds.append((1, "detach"))
    if ch_out:
        kinds.append((10, "put"))
    if ch_in:
        kinds += [(10, "get"), (3, "consume"), (2, "consume_until")]
    if q_out:
        kinds.append((5, "qput"))
    if q_in:
        kinds += [(5, "qget"), (5, "qconsume")]

    kind = choose_weighted(draw, kinds)
    if kind == "collect":
        return Collect()
    if kind == "root":
        return CreateRoot(choose(draw, empty), draw_vt(draw, pool))
    if kind == "child":
        return CreateChild(choose(draw, empty), choose(draw, live), draw_vt(draw, pool))
    if kind == "set_vt":
        return SetVt(choose(draw, live), draw_vt(draw, pool))
    if kind == "attach":
        return Attach(choose(draw, live), choose(draw, [0, 1, QUEUE]), choose(draw, [IN, OUT]))
    if kind == "exit":
        return Exit(choose(draw, live))
    if kind == "detach":
        return Detach(choose(draw, list(range(len(s.conns)))))
    if kind == "put":
        conn = choose(draw, ch_out)
        ts = draw_near(draw, s.put_base(conn), pool)
        consumers = choose_weighted(draw, [(16, "none"), (8, "count"), (1, "zero")])
        n: int | None = None
        if consumers == "count":
            n = int(draw(st.integers(1, 3)))
        elif consumers == "zero":
            n = 0
        return Put(conn, ts, n)
    if kind == "get":
        conn = choose(draw, ch_in)
        sel: sp.Selector | None = choose_weighted(
            draw,
            [
                (3, None),  # an exact timestamp
                (1, sp.OLDEST),
                (1, sp.NEWEST),
                (2, sp.NEWEST_UNSEEN),
                (2, sp.NEXT_UNSEEN),
            ],
        )
        return Get(conn, draw_ts(draw, pool) if sel is None else sel)
    if kind == "consume":
        return Consume(choose(draw, ch_in), draw_ts(draw, pool))
    if kind == "consume_until":
        return ConsumeUntil(choose(draw, ch_in), draw_ts(draw, pool))
    if kind == "qput":
        conn = choose(draw, q_out)
        return QPut(conn, draw_near(draw, s.put_base(conn), pool))
    if kind == "qget":
        return QGet(choose(draw, q_in))
    assert kind == "qconsume"
    # Mostly consume a ticket held on the connection that holds it.
    pairs = [
        (i, ticket)
        for ticket, h in s.queue.held.items()
        for i, k in enumerate(s.conns)
        if k.uid == h[0]
    ]
    if pairs and likely(draw):
        conn, ticket = choose(draw, pairs)
        return QConsume(conn, ticket)
    tickets = sorted(set(s.queue.held) | {t for t, _ in s.queue.waiting} | {s.queue.next_ticket})
    if likely(draw):
        return QConsume(choose(draw, q_in), choose(draw, tickets))
    return QConsume(choose(draw, q_in), int(draw(st.integers(0, 7))))


# ---------------------------------------------------------------------------------------
# The system under test
# ---------------------------------------------------------------------------------------

Conn = Union[sp.ChannelInput, sp.ChannelOutput, sp.QueueInput, sp.QueueOutput]


class Sut:
    def __init__(self) -> None:
        self.rt = sp.Runtime(gc_interval=None)
        self.chans = [self.rt.channel(capacity=CH_CAP[0]), self.rt.channel(capacity=CH_CAP[1])]
        self.queue = self.rt.queue(capacity=Q_CAP)
        self.tasks: list[sp.Task | None] = [None] * SLOTS
        self.conns: list[tuple[int, Conn]] = []  # (container index, connection)

    def task(self, slot: int) -> sp.Task:
        t = self.tasks[slot]
        assert t is not None
        return t

    def close(self) -> None:
        for t in self.tasks:
            if t is not None:
                t.exit()
        self.rt.close()

    def run(self, tr: Tr, model: Model, expected: Outcome) -> Outcome:
        try:
            return self._run(tr, model, expected)
        except sp.StampedeError as e:
            return describe(e)

    def _run(self, tr: Tr, model: Model, expected: Outcome) -> Outcome:
        if isinstance(tr, CreateRoot):
            self.tasks[tr.slot] = self.rt.task(tr.vt)
            return OK
        if isinstance(tr, CreateChild):
            self.tasks[tr.slot] = self.task(tr.parent).child(tr.vt)
            return OK
        if isinstance(tr, SetVt):
            self.task(tr.slot).set_virtual_time(tr.vt)
            return OK
        if isinstance(tr, Attach):
            t = self.task(tr.slot)
            target: sp.Channel | sp.Queue = self.queue if tr.cont == QUEUE else self.chans[tr.cont]
            conn = t.attach_input(target) if tr.dir == IN else t.attach_output(target)
            self.conns.append((tr.cont, conn))
            return OK
        if isinstance(tr, Detach):
            self.conns.pop(tr.conn)[1].detach()
            return OK
        if isinstance(tr, Exit):
            self.task(tr.slot).exit()
            self.tasks[tr.slot] = None
            return OK
        if isinstance(tr, Put):
            c, out = self.conns[tr.conn]
            assert isinstance(out, sp.ChannelOutput)
            item = payload(c, tr.ts)
            try:
                out.try_put(tr.ts, item, consumers=tr.consumers)
            except (sp.PutFailed, sp.BelowVisibility, sp.Detached, sp.Closed) as e:
                assert e.item is item, f"{type(e).__name__} did not hand the item back"
                if isinstance(e, sp.PutFailed):
                    assert e.timestamp == tr.ts
                raise
            return OK
        if isinstance(tr, Get):
            c, inp = self.conns[tr.conn]
            assert isinstance(inp, sp.ChannelInput)
            ts, value = inp.try_get(tr.sel)
            assert value == payload(c, ts), f"item at {ts}"
            return ("ok", ts)
        if isinstance(tr, (Consume, ConsumeUntil)):
            _, inp = self.conns[tr.conn]
            assert isinstance(inp, sp.ChannelInput)
            if isinstance(tr, Consume):
                inp.consume(tr.ts)
            else:
                inp.consume_until(tr.ts)
            return OK
        if isinstance(tr, QPut):
            _, qout = self.conns[tr.conn]
            assert isinstance(qout, sp.QueueOutput)
            body = f"q{expected[1]}" if expected[0] == "ok" else "rejected"
            return ("ok", qout.try_put(tr.ts, body))
        if isinstance(tr, QGet):
            _, qin = self.conns[tr.conn]
            assert isinstance(qin, sp.QueueInput)
            got = qin.try_get()
            assert got.value == f"q{got.ticket}", f"queue item {got.ticket}"
            return ("ok", (got.ts, got.ticket))
        if isinstance(tr, QConsume):
            _, qin = self.conns[tr.conn]
            assert isinstance(qin, sp.QueueInput)
            qin.consume(tr.ticket)
            return OK
        assert isinstance(tr, Collect)
        before = [ch.timestamps() for ch in self.chans]
        floor = self.rt.collect()
        reachable = model.reachable
        assert reachable is not None, "the model records reachability"
        for c, ch in enumerate(self.chans):
            after = ch.timestamps()
            for ts in before[c]:
                assert ts in after or ts not in reachable[c], (
                    f"collect reclaimed item {ts} of channel {c}, which was still reachable "
                    f"(new floor {floor})"
                )
            low = [ts for ts in after if ts < floor]
            assert not low, f"collect left items {low} of channel {c} below the floor {floor}"
        return ("collect", floor)


class StmMachine(RuleBasedStateMachine):
    """Runs the same transitions on the runtime and on the model."""

    def __init__(self) -> None:
        super().__init__()
        self.model = Model()
        self.sut = Sut()

    def apply(self, tr: Tr) -> Outcome:
        expected = self.model.step(tr)
        got = self.sut.run(tr, self.model, expected)
        assert got == expected, f"{tr}: the runtime gave {got}, the model {expected}"
        event(f"{type(tr).__name__} -> {got[1] if got[0] == 'err' else got[0]}")
        return got

    @initialize(setup=setup_strategy())
    def set_up(self, setup: list[Tr]) -> None:
        for tr in setup:
            assert self.apply(tr) == OK, f"setup {tr}"

    @rule(data=st.data())
    def step(self, data: st.DataObject) -> None:
        self.apply(data.draw(transitions(self.model), label="transition"))

    @invariant()
    def runtime_matches_model(self) -> None:
        m, s = self.model, self.sut
        for c, ch in enumerate(s.chans):
            assert ch.timestamps() == sorted(m.chans[c].items), f"items stored in channel {c}"
            cap = CH_CAP[c]
            if cap is not None:
                assert len(ch) <= cap, f"channel {c} holds more than its capacity"
            stats = ch.stats()
            assert stats.connections == len(m.live_inputs(c)), f"input connections of {c}"
            opened = sum(len(k.input.open) for k in m.live_inputs(c))
            assert stats.open == opened, f"items open in channel {c}"
        q = s.queue.stats()
        assert q.waiting == len(m.queue.waiting), "queue items waiting"
        assert q.held == len(m.queue.held), "queue items held"

        report = s.rt.explain()
        assert report.floor == m.floor, "floor in explain()"
        assert s.rt.gc_stats().floor == m.floor, "floor in gc_stats()"
        w = m.watermark()
        assert report.watermark == w, f"watermark in explain(): {report.holds}"
        if report.holds and m.live_tasks():
            assert max(report.holds[0].ts, m.floor) == w, "lowest hold in explain()"

        for slot in range(SLOTS):
            t, tm = s.tasks[slot], m.tasks[slot]
            assert (t is None) == (tm is None), f"task slot {slot} differs"
            if t is not None and tm is not None:
                assert t.virtual_time == tm.vt, f"virtual time of slot {slot}"
                assert t.visibility == m.visibility(tm.uid), f"visibility of slot {slot}"

        # "Every task's visibility is at least the watermark."
        for tm in m.live_tasks():
            vis = m.visibility(tm.uid)
            assert vis >= w, f"a task's visibility {vis} is below the watermark {w}"

    def teardown(self) -> None:
        self.sut.close()


StmMachine.TestCase.settings = settings(
    max_examples=200,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestRuntimeMatchesModel = StmMachine.TestCase


# ---------------------------------------------------------------------------------------
# Reproductions of what the Rust model found, through the Python API
# ---------------------------------------------------------------------------------------


def test_open_item_reclaimed_by_count_keeps_visibility_at_or_above_watermark(
    rt: sp.Runtime,
) -> None:
    ch = rt.channel()
    t = rt.task(0)
    out = t.attach_output(ch)
    inp = t.attach_input(ch)
    out.put(0, "x", consumers=1)
    assert inp.try_get(sp.OLDEST)[0] == 0
    t.set_virtual_time(1)
    late = rt.task(9)
    late.attach_input(ch)  # rule 3: the count is reached
    assert t.visibility == 0  # item 0 is still open on `inp`
    assert rt.explain().watermark <= t.visibility


def test_collect_keeps_items_a_task_can_still_reach(rt: sp.Runtime) -> None:
    a = rt.channel()
    b = rt.channel()
    t = rt.task(0)
    out_a, out_b = t.attach_output(a), t.attach_output(b)
    reader = t.attach_input(b)
    out_a.put(4, "a4")
    out_b.put(4, "b4", consumers=1)
    assert reader.try_get(4)[0] == 4
    t.set_virtual_time(5)
    other = rt.task(sp.INFINITY)
    other.attach_input(b)  # rule 3: b@4 reclaimed by its count
    assert t.visibility == 4
    rt.collect()
    late = t.attach_input(a)
    assert late.try_get(4) == (4, "a4")


def test_the_model_itself_follows_the_documented_examples() -> None:
    """Sanity checks of the reference model (so a model bug does not mask a runtime bug)."""
    m = Model()
    assert m.step(CreateRoot(0, 0)) == OK
    assert m.step(Attach(0, 0, OUT)) == OK
    assert m.step(CreateRoot(1, INF)) == OK
    assert m.step(Attach(1, 0, IN)) == OK
    for ts in (1, 3, 5):
        assert m.step(Put(0, ts, None)) == OK
    assert m.step(Get(1, sp.NEWEST_UNSEEN)) == ("ok", 5)
    assert m.step(Get(1, sp.NEWEST_UNSEEN)) == ("ok", 3)
    assert m.step(Get(1, 4)) == err("Unavailable", 3, 5)
    assert m.visibility(m.slot_uid(1)) == 3
    assert m.step(ConsumeUntil(1, 3)) == OK
    assert m.step(Get(1, 1)) == err("Gone", 1)
    assert m.step(SetVt(0, 10)) == OK
    assert m.watermark() == 5  # item 5, open on the consumer's connection
    assert m.step(Collect()) == ("collect", 5)
    assert sorted(m.chans[0].items) == [5]
    assert m.step(Put(0, 20, None)) == OK
    assert m.step(CreateRoot(2, 4)) == err("BelowVisibility", 4, 5)
    assert m.step(Put(0, 20, None)) == err("DuplicateTimestamp")
