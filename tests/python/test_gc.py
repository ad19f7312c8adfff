"""Garbage collection: each term of the watermark and how explain() names it, reference
counts, garbage handlers, time zones, bounded capacity and pending puts (mirrors
tests/gc.rs)."""

from __future__ import annotations

import collections
import functools
import threading
import time
from collections.abc import Callable

import pytest

import stampede as sp
from _support import (
    LONG,
    NO_LIVE_TASK,
    PENDING_PUT,
    QUEUE_ITEM,
    UNCONSUMED,
    VIRTUAL_TIME,
    Background,
    lift_horizon,
    pending_puts,
    wait_pending_put,
    wait_until,
)


def count_garbage(container: sp.Channel | sp.Queue) -> collections.Counter[int]:
    """Counts how often the garbage handler saw each timestamp."""
    seen: collections.Counter[int] = collections.Counter()
    lock = threading.Lock()

    def handler(ts: int, value: object) -> None:
        with lock:
            seen[ts] += 1

    container.on_garbage(handler)
    return seen


def test_term_virtual_time_of_every_live_task(rt: sp.Runtime) -> None:
    slow = rt.task(3, name="slow")
    _far = lift_horizon(rt, slow)
    report = rt.explain()
    assert report.zone == 0
    assert report.watermark == 3
    [hold] = report.holders()
    assert (hold.ts, hold.cause, hold.task, hold.task_name) == (3, VIRTUAL_TIME, slow.id, "slow")
    assert hold.container is None and hold.connection is None and hold.ticket is None
    assert "slow" in hold.description
    assert all(h.ts >= report.watermark for h in report.holds)
    assert [h.ts for h in report.holds] == sorted(h.ts for h in report.holds)

    slower = rt.task(7, name="slower")
    slow.set_virtual_time(8)
    report = rt.explain()
    assert report.watermark == 7
    assert [(h.cause, h.task) for h in report.holders()] == [(VIRTUAL_TIME, slower.id)]
    assert rt.collect() == 7
    assert rt.explain().floor == 7

    # An exited task's virtual time no longer counts.
    slower.exit()
    assert rt.explain().watermark == 8
    assert rt.collect() == 8
    assert rt.gc_stats().floor == 8


def test_term_unconsumed_queue_item(rt: sp.Runtime) -> None:
    q = rt.queue("work")
    p = rt.task(0)
    _far = lift_horizon(rt, p)
    out = p.attach_output(q)
    ticket = out.put(2, "job")
    p.set_virtual_time(10)
    report = rt.explain()
    assert report.watermark == 2
    [hold] = report.holders()
    assert (hold.ts, hold.cause, hold.container_name, hold.ticket) == (
        2,
        QUEUE_ITEM,
        "work",
        ticket,
    )
    assert hold.task is None, "waiting, held by nobody"

    worker = rt.task(sp.INFINITY)
    inp = worker.attach_input(q)
    inp.get(timeout=LONG)
    report = rt.explain()
    assert report.watermark == 2
    [hold] = report.holders()
    assert (hold.cause, hold.task, hold.ticket) == (QUEUE_ITEM, worker.id, ticket)
    assert rt.collect() == 2

    inp.consume(ticket)
    assert rt.explain().watermark == 10
    assert rt.collect() == 10


def test_term_oldest_unconsumed_item_of_each_channel_connection(rt: sp.Runtime) -> None:
    ch = rt.channel("frames")
    p = rt.task(0)
    _far = lift_horizon(rt, p)
    c = rt.task(sp.INFINITY, name="tracker")
    inp = c.attach_input(ch)
    out = p.attach_output(ch)
    for ts in (1, 2, 3):
        out.put(ts, str(ts))
    p.set_virtual_time(10)

    report = rt.explain()
    assert report.watermark == 1
    [hold] = report.holders()
    assert (hold.ts, hold.cause, hold.container_name, hold.connection, hold.task) == (
        1,
        UNCONSUMED,
        "frames",
        inp.id,
        c.id,
    )
    assert hold.task_name == "tracker"
    assert "frames" in hold.description and "tracker" in hold.description

    # Open but unconsumed still holds.
    inp.get(1, timeout=LONG)
    assert rt.collect() == 1
    assert ch.timestamps() == [1, 2, 3]

    inp.consume(1)
    assert rt.explain().watermark == 2
    assert rt.collect() == 2
    assert ch.timestamps() == [2, 3]

    inp.consume_until(3)
    assert rt.collect() == 10
    assert len(ch) == 0
    assert ch.stats().reclaimed == 3

    # A detached connection no longer holds anything.
    out.put(10, "10")
    assert rt.explain().watermark == 10
    inp.detach()
    p.set_virtual_time(11)
    assert rt.collect() == 11
    assert len(ch) == 0


def test_term_pending_put_names_task_and_container(rt: sp.Runtime) -> None:
    ch = rt.channel("out", capacity=1)
    p = rt.task(0, name="camera")
    _far = lift_horizon(rt, p)
    inp = rt.task(sp.INFINITY).attach_input(ch)
    out = p.attach_output(ch)
    out.put(5, "5")
    # Puts in any order: 3 after 5, into a full channel.
    putter = Background(lambda: out.put(3, "3", timeout=LONG))
    wait_pending_put(rt)
    p.set_virtual_time(100)
    assert p.visibility == 3
    report = rt.explain()
    assert report.watermark == 3
    [hold] = report.holders()
    assert (hold.ts, hold.cause, hold.task, hold.task_name) == (3, PENDING_PUT, p.id, "camera")
    assert hold.container is not None
    assert "camera" in hold.description
    # Item 5 is consumed, but stays reachable while the put at 3 is pending.
    inp.consume(5)
    assert rt.collect() == 3
    assert ch.timestamps() == [5]
    ch.close()
    assert isinstance(putter.error(), sp.Closed)
    assert p.visibility == 100
    assert rt.collect() == 100
    assert len(ch) == 0


@pytest.mark.parametrize("kind", ["channel", "queue"])
def test_a_long_blocked_put_holds_visibility_and_the_watermark_throughout(
    rt: sp.Runtime, kind: str
) -> None:
    """A put counts in its putter's visibility until the item is stored, however long it
    waits: while it is blocked, the task may raise its virtual time, and the put must still
    succeed at its timestamp once there is room."""
    p = rt.task(0, name="camera")
    _far = lift_horizon(rt, p)
    c = rt.task(sp.INFINITY)
    release: Callable[[], None]
    putter: Background[object]
    if kind == "channel":
        ch = rt.channel(capacity=1)
        inp = c.attach_input(ch)
        out = p.attach_output(ch)
        out.put(0, "0")
        putter = Background(lambda: out.put(3, "3", timeout=LONG))
        release = functools.partial(inp.consume, 0)
    else:
        q = rt.queue(capacity=1)
        qin = c.attach_input(q)
        qout = p.attach_output(q)
        qout.put(0, "0")
        putter = Background(lambda: qout.put(3, "3", timeout=LONG))

        def release() -> None:
            qin.consume(qin.get(timeout=LONG).ticket)

    wait_pending_put(rt)
    p.set_virtual_time(100)  # allowed: the pending put holds the visibility at 3
    # Watch for well over a second (blocking calls may wait in slices internally).
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        assert putter.alive(), f"the blocked put ended: {putter.error()!r}"
        assert p.visibility == 3, "the pending put stopped counting in its task's visibility"
        assert rt.explain().watermark <= 3, "the pending put stopped holding the watermark"
    release()
    putter.result()
    assert p.visibility == 100


def test_a_pending_put_holds_the_watermark_while_it_frees_space(rt: sp.Runtime) -> None:
    ch = rt.channel(capacity=1)
    p = rt.task(0)
    _far = lift_horizon(rt, p)
    out = p.attach_output(ch)
    out.put(0, "0")
    putter = Background(lambda: out.put(1, "1", timeout=LONG))
    wait_pending_put(rt)
    # Raising the producer's virtual time runs a pass: it frees 0, but the pending put
    # keeps the watermark at 1 rather than 100.
    p.set_virtual_time(100)
    putter.result()
    assert rt.gc_stats().floor == 1
    assert ch.timestamps() == [1]
    assert rt.collect() == 100
    assert len(ch) == 0


def test_refcounted_item_is_reclaimed_after_that_many_consumes(rt: sp.Runtime) -> None:
    ch = rt.channel()
    seen = count_garbage(ch)
    p = rt.task(0)
    c = rt.task(sp.INFINITY)
    a = c.attach_input(ch)
    b = c.attach_input(ch)
    third = c.attach_input(ch)
    out = p.attach_output(ch)
    out.put(4, "x", consumers=2)
    a.consume(4)
    a.consume(4)  # idempotent: still one consume
    a.consume_until(4)  # and not counted again
    assert ch.timestamps() == [4]
    assert not seen

    b.get(4, timeout=LONG)
    assert c.visibility == 4
    b.consume(4)
    # Reclaimed at once, though the producer's virtual time (0) is far below.
    assert len(ch) == 0
    wait_until("the garbage handler ran", lambda: bool(seen))
    assert seen == {4: 1}
    assert c.visibility == sp.INFINITY
    assert ch.stats().reclaimed == 1
    # Later consumes and passes do not run the handler again.
    third.consume(4)
    p.set_virtual_time(10)
    rt.collect()
    assert seen == {4: 1}


def test_refcounted_item_consumed_before_it_arrives_is_reclaimed_at_put(
    rt: sp.Runtime,
) -> None:
    ch = rt.channel()
    seen = count_garbage(ch)
    c = rt.task(sp.INFINITY)
    a = c.attach_input(ch)
    b = c.attach_input(ch)
    a.consume_until(10)
    b.consume(5)
    out = rt.task(0).attach_output(ch)
    out.put(5, "x", consumers=2)
    assert len(ch) == 0
    wait_until("the garbage handler ran", lambda: bool(seen))
    assert seen == {5: 1}
    # Its timestamp is retired.
    with pytest.raises(sp.DuplicateTimestamp):
        out.put(5, "again")


def test_refcounted_item_stays_while_a_connection_has_it_open(rt: sp.Runtime) -> None:
    ch = rt.channel()
    seen = count_garbage(ch)
    p = rt.task(0)
    reader = rt.task(sp.INFINITY)
    a = reader.attach_input(ch)
    b = rt.task(sp.INFINITY).attach_input(ch)
    out = p.attach_output(ch)
    out.put(1, "x", consumers=1)
    out.put(2, "y", consumers=1)
    a.get(1, timeout=LONG)
    a.get(2, timeout=LONG)
    assert reader.visibility == 1
    # The count is reached, but `a` still has the items open: they must stay.
    b.consume_until(2)
    assert ch.timestamps() == [1, 2]
    assert rt.explain().watermark == 0
    rt.collect()
    assert not seen
    # Consuming the open item lets it go.
    a.consume(1)
    assert ch.timestamps() == [2]
    wait_until("the garbage handler ran", lambda: bool(seen))
    assert seen == {1: 1}
    # So does detaching with it open.
    a.detach()
    assert len(ch) == 0
    wait_until("the garbage handler ran again", lambda: len(seen) == 2)
    assert seen == {1: 1, 2: 1}
    assert reader.visibility == sp.INFINITY


def test_garbage_handler_sees_the_value_and_may_use_its_container(rt: sp.Runtime) -> None:
    ch = rt.channel()
    q = rt.queue()
    log: list[tuple[str, int, object]] = []

    # The handlers call back into their container: they must run outside its lock (or this
    # deadlocks).
    def on_channel_garbage(ts: int, value: object) -> None:
        len(ch), ch.stats()
        log.append(("ch", ts, value))

    def on_queue_garbage(ts: int, value: object) -> None:
        len(q), q.stats()
        log.append(("q", ts, value))

    ch.on_garbage(on_channel_garbage)
    q.on_garbage(on_queue_garbage)

    def work() -> None:
        p = rt.task(0)
        c = rt.task(sp.INFINITY)
        inp = c.attach_input(ch)
        qin = c.attach_input(q)
        out = p.attach_output(ch)
        out.put(0, "by the watermark")
        out.put(1, ["by its count"], consumers=1)
        inp.consume(1)  # reference count
        inp.consume(0)
        p.set_virtual_time(2)
        rt.collect()  # watermark
        qout = p.attach_output(q)
        qout.put(3, "job")
        job = qin.get(timeout=LONG)
        qin.consume(job.ticket)  # queue consume

    Background(work).result(LONG)
    wait_until("every handler ran", lambda: len(log) == 3)
    assert [e for e in log if e[0] == "ch"] == [
        ("ch", 1, ["by its count"]),
        ("ch", 0, "by the watermark"),
    ]
    assert [e for e in log if e[0] == "q"] == [("q", 3, "job")]
    # Break the reference cycles container -> handler -> container.
    ch.on_garbage(lambda ts, v: None)
    q.on_garbage(lambda ts, v: None)


def test_garbage_handler_runs_once_per_item_under_concurrency(auto_rt: sp.Runtime) -> None:
    n = 300
    rt = auto_rt
    ch = rt.channel()
    seen = count_garbage(ch)
    keeper = rt.task(sp.INFINITY)  # keeps the zone alive
    consumers = [rt.task(sp.INFINITY) for _ in range(2)]
    inputs = [c.attach_input(ch) for c in consumers]
    producer = rt.task(0)
    out = producer.attach_output(ch)

    def produce() -> None:
        for ts in range(n):
            out.put(ts, str(ts), consumers=2 if ts % 2 else None)
            producer.set_virtual_time(ts + 1)
        producer.set_virtual_time(sp.INFINITY)

    def consume(inp: sp.ChannelInput) -> None:
        nxt = 0
        while nxt < n:
            ts, value = inp.get(sp.NEXT_UNSEEN, timeout=LONG)
            assert ts >= nxt and value == str(ts)
            if ts % 3 == 0:
                inp.consume_until(ts)
            else:
                inp.consume(ts)
            nxt = ts + 1

    threads = [Background(produce)] + [Background(functools.partial(consume, i)) for i in inputs]
    for th in threads:
        th.result(LONG * 3)
    wait_until("every item is reclaimed", lambda: len(ch) == 0 and len(seen) == n)
    rt.collect()
    assert set(seen) == set(range(n))
    assert all(count == 1 for count in seen.values()), seen
    assert ch.stats().reclaimed == n
    keeper.exit()


def test_background_collector_reclaims_without_explicit_passes(auto_rt: sp.Runtime) -> None:
    ch = auto_rt.channel()
    p = auto_rt.task(0)
    out = p.attach_output(ch)
    for ts in range(10):
        out.put(ts, str(ts))
    p.set_virtual_time(8)
    wait_until("items below 8 are reclaimed", lambda: len(ch) == 2)
    assert ch.timestamps() == [8, 9]
    assert auto_rt.gc_stats().passes > 0
    assert auto_rt.gc_stats().floor == 8


def test_close_stops_the_background_collector() -> None:
    rt = sp.Runtime(gc_interval=0.002)
    ch = rt.channel()
    p = rt.task(0)
    out = p.attach_output(ch)
    out.put(0, "0")
    out.put(1, "1")
    p.set_virtual_time(1)
    wait_until("the collector reclaims 0", lambda: ch.timestamps() == [1])
    rt.close()
    passes = rt.gc_stats().passes
    p.set_virtual_time(2)
    time.sleep(0.05)  # 25 intervals of a collector that must not run any more
    assert ch.timestamps() == [1]
    assert rt.gc_stats().passes == passes
    # Passes still run on demand.
    assert rt.collect() == 2
    assert len(ch) == 0
    rt.close()  # closing twice is harmless


def test_time_zones_are_collected_independently(rt: sp.Runtime) -> None:
    video = rt.channel(zone=1)
    audio = rt.channel()
    stuck = rt.task(0, name="stuck")
    a_out = stuck.attach_output(audio)
    for ts in range(5):
        a_out.put(ts, str(ts))
    cam = rt.task(0, name="cam", zone=1)
    v_out = cam.attach_output(video)
    for ts in range(20):
        v_out.put(ts, str(ts))
    cam.set_virtual_time(15)

    assert rt.collect(1) == 15
    assert video.timestamps() == list(range(15, 20))
    report = rt.explain(1)
    assert report.zone == 1
    assert all(h.task_name != "stuck" for h in report.holds)
    assert [(h.cause, h.task) for h in report.holders()] == [(VIRTUAL_TIME, cam.id)]

    # The default zone is still held by the stuck task and keeps its items.
    assert rt.collect() == 0
    assert len(audio) == 5
    assert rt.gc_stats().floor == 0
    assert rt.gc_stats(1).floor == 15

    # An input connection from a task of another zone holds the channel's zone.
    viewer = rt.task(sp.INFINITY, name="viewer")
    inp = viewer.attach_input(video)
    cam.set_virtual_time(18)
    assert rt.collect(1) == 15
    assert [(h.cause, h.task) for h in rt.explain(1).holders()] == [(UNCONSUMED, viewer.id)]
    inp.consume_until(17)
    assert rt.collect(1) == 18
    assert rt.gc_stats().floor == 0


def test_collect_counts_passes_and_reclaimed_items(rt: sp.Runtime) -> None:
    ch = rt.channel()
    p = rt.task(0)
    out = p.attach_output(ch)
    for ts in range(6):
        out.put(ts, str(ts))
    before = rt.gc_stats()
    p.set_virtual_time(4)
    assert rt.collect() == 4
    after = rt.gc_stats()
    assert after.passes == before.passes + 1
    assert after.reclaimed == before.reclaimed + 4
    assert after.floor == 4
    # The floor only rises.
    assert rt.collect() == 4
    assert rt.gc_stats().reclaimed == after.reclaimed


def test_bounded_channel_never_exceeds_its_capacity(auto_rt: sp.Runtime) -> None:
    cap, n = 4, 300
    rt = auto_rt
    ch = rt.channel(capacity=cap)
    producer = rt.task(0)
    inp = rt.task(sp.INFINITY).attach_input(ch)
    out = producer.attach_output(ch)
    done = threading.Event()

    def monitor() -> int:
        seen = 0
        while not done.is_set():
            seen = max(seen, len(ch), ch.stats().items)
        return seen

    def produce() -> None:
        for ts in range(n):
            out.put(ts, str(ts), timeout=LONG)
            assert len(ch) <= cap
            producer.set_virtual_time(ts + 1)

    watcher = Background(monitor)
    putter = Background(produce)
    seen_here = 0
    try:
        for want in range(n):
            ts, _ = inp.get(sp.NEXT_UNSEEN, timeout=LONG)
            assert ts == want
            # The item just gotten is open, so it is still stored.
            seen_here = max(seen_here, len(ch))
            # Hold up to two items open at once.
            if ts % 2 == 1:
                inp.consume_until(ts)
    finally:
        done.set()
    putter.result(LONG)
    max_seen = max(seen_here, watcher.result(LONG))
    assert 0 < max_seen <= cap, f"a bounded channel held {max_seen} > {cap} items"
    assert ch.stats().full == 0, "blocking puts never fail with Full"


def test_term_pending_put_into_a_full_queue(rt: sp.Runtime) -> None:
    q = rt.queue(capacity=1)
    p = rt.task(0, name="splitter")
    _far = lift_horizon(rt, p)
    out = p.attach_output(q)
    inp = rt.task(sp.INFINITY).attach_input(q)
    out.put(20, "first")
    # FIFO regardless of timestamp: 7 after 20, into a full queue.
    putter = Background(lambda: out.put(7, "second", timeout=LONG))
    wait_pending_put(rt)
    p.set_virtual_time(100)
    # The put counts in its putter's visibility until the queue has stored the item.
    assert p.visibility == 7
    report = rt.explain()
    assert report.watermark == 7
    [hold] = report.holders()
    assert (hold.ts, hold.cause, hold.task, hold.task_name) == (7, PENDING_PUT, p.id, "splitter")
    first = inp.get(timeout=LONG)
    putter.result()
    inp.consume(first.ticket)
    assert p.visibility == 100
    report = rt.explain()
    assert report.watermark == 7, "the stored item holds it now"
    [hold] = report.holders()
    assert (hold.cause, hold.task) == (QUEUE_ITEM, None)


def test_reclaimed_counts_exactly_the_freed_items(rt: sp.Runtime) -> None:
    ch = rt.channel()
    q = rt.queue()
    p = rt.task(0)
    qin = rt.task(sp.INFINITY).attach_input(q)
    out = p.attach_output(ch)
    qout = p.attach_output(q)
    for ts in range(4):
        out.put(ts, str(ts))
        qout.put(ts, str(ts))
    job = qin.get(timeout=LONG)
    p.set_virtual_time(10)
    assert rt.gc_stats().reclaimed == 0
    # The queue holds the watermark at 0: nothing to reclaim yet, in several passes.
    assert rt.collect() == 0
    assert rt.collect() == 0
    assert rt.gc_stats().reclaimed == 0
    qin.consume(job.ticket)
    assert rt.gc_stats().reclaimed == 1
    assert rt.collect() == 1
    assert rt.gc_stats().reclaimed == 2
    assert ch.timestamps() == [1, 2, 3]
    assert len(q) == 3


def test_each_pending_put_is_its_own_term(rt: sp.Runtime) -> None:
    first = rt.channel("first", capacity=1)
    second = rt.channel("second", capacity=1)
    p = rt.task(0)
    inp = rt.task(sp.INFINITY).attach_input(second)
    out1 = p.attach_output(first)
    out2 = p.attach_output(second)
    out1.put(0, "0")
    out2.put(0, "0", consumers=1)
    stuck = Background(lambda: out1.put(5, "5", timeout=LONG))
    first_id = wait_pending_put(rt, count=1).container
    freed = Background(lambda: out2.put(5, "5", timeout=LONG))
    wait_pending_put(rt, count=2)
    holds = pending_puts(rt)
    assert [(h.ts, h.task) for h in holds] == [(5, p.id), (5, p.id)]
    assert len({h.container for h in holds}) == 2
    assert first_id in {h.container for h in holds}
    assert p.visibility == 0
    # Its reference count frees the second channel's slot; the put that completes leaves,
    # not the other one with the same timestamp.
    inp.consume(0)
    freed.result()
    [left] = pending_puts(rt)
    assert left.container == first_id
    first.close()
    assert isinstance(stuck.error(), sp.Closed)
    assert not pending_puts(rt)
    assert second.timestamps() == [5]


def test_explain_lists_every_term_lowest_first(rt: sp.Runtime) -> None:
    ch = rt.channel("c")
    q = rt.queue("q")
    p = rt.task(4, name="p")
    _far = lift_horizon(rt, p)
    c = rt.task(sp.INFINITY, name="c")
    inp = c.attach_input(ch)
    out = p.attach_output(ch)
    qout = p.attach_output(q)
    out.put(6, "6")
    qout.put(5, "5")
    report = rt.explain()
    kinds = [(h.ts, h.cause) for h in report.holds]
    assert (4, VIRTUAL_TIME) in kinds
    assert (5, QUEUE_ITEM) in kinds
    assert (6, UNCONSUMED) in kinds
    assert [h.ts for h in report.holds] == sorted(h.ts for h in report.holds)
    assert (6, inp.id) in [(h.ts, h.connection) for h in report.holds]
    assert report.watermark == 4
    assert [h.cause for h in report.holders()] == [VIRTUAL_TIME]


def test_results_are_kept_only_for_a_reader_attached_before_they_are_put() -> None:
    """Results nobody can read are garbage whatever the timing; a reader attached first
    keeps them however long the caller waits."""

    def run(with_reader: bool) -> tuple[sp.Channel, sp.ChannelInput | None, sp.Task]:
        rt = sp.Runtime(gc_interval=0.001)
        tracks = rt.channel()
        display = rt.task(sp.INFINITY)
        results = display.attach_input(tracks) if with_reader else None
        source = rt.task(0)
        with rt.task(0) as tracker:
            out = tracker.attach_output(tracks)
            for ts in range(10):
                out.put(ts, "track")
        source.set_virtual_time(100)
        time.sleep(0.05)
        rt.collect()
        return tracks, results, display

    tracks, _, _ = run(False)
    assert len(tracks) == 0
    tracks, results, _display = run(True)
    assert len(tracks) == 10
    assert results is not None
    assert results.get(sp.NEWEST)[0] == 9


def test_when_every_task_exited_explain_names_the_kept_floor_and_close_releases() -> None:
    rt = sp.Runtime(gc_interval=None)
    ch = rt.channel("done")
    freed = count_garbage(ch)
    with rt.task(0) as p, rt.task(sp.INFINITY) as c:
        out, inp = p.attach_output(ch), c.attach_input(ch)
        for ts in range(12):
            out.put(ts, str(ts))
        for ts in range(10):
            inp.get(ts)
            inp.consume(ts)
    rt.collect()
    assert len(ch) == 12, "a zone with no live task keeps its floor"
    report = rt.explain(0)
    assert [h.cause for h in report.holders()] == [NO_LIVE_TASK], str(report)
    assert "no live task in zone 0" in str(report)

    ch.close()
    assert ch.timestamps() == [10, 11], "consumed items are released"
    assert sorted(freed) == list(range(10))
    assert ch.stats().reclaimed == 10
    late = rt.task(0).attach_input(ch)
    with pytest.raises(sp.Gone):
        late.try_get(3)
    assert late.get(sp.OLDEST)[0] == 10
