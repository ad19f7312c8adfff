"""Queues: FIFO order, tickets, shared timestamps, exactly-once delivery, redelivery when a
getter goes away, capacity and closing (mirrors tests/queue.rs)."""

from __future__ import annotations

import time

import pytest

import stampede as sp
from _support import LONG, Background, wait_pending_put, wait_until


def test_fifo_regardless_of_timestamp(rt: sp.Runtime) -> None:
    q = rt.queue()
    p = rt.task(0)
    w = rt.task(sp.INFINITY)
    out = p.attach_output(q)
    inp = w.attach_input(q)
    puts = [(5, "a"), (3, "b"), (9, "c"), (3, "d"), (0, "e")]
    tickets = [out.put(ts, v) for ts, v in puts]
    assert len(q) == 5
    assert len(set(tickets)) == len(tickets), "tickets are unique"
    for (ts, v), ticket in zip(puts, tickets):
        got = inp.try_get()
        assert (got.ts, got.value, got.ticket) == (ts, v, ticket)
        inp.consume(got.ticket)
    assert len(q) == 0
    with pytest.raises(sp.Unavailable):
        inp.try_get()


def test_items_may_share_a_timestamp(rt: sp.Runtime) -> None:
    q = rt.queue()
    out = rt.task(0).attach_output(q)
    inp = rt.task(sp.INFINITY).attach_input(q)
    for i in range(4):
        out.put(7, f"part {i}")
    seen = []
    while True:
        try:
            got = inp.try_get()
        except sp.Unavailable:
            break
        assert got.ts == 7
        seen.append(got.value)
        inp.consume(got.ticket)
    assert seen == ["part 0", "part 1", "part 2", "part 3"]
    assert q.stats().consumed == 4


def test_each_item_goes_to_exactly_one_getter(rt: sp.Runtime) -> None:
    q = rt.queue()
    out = rt.task(0).attach_output(q)
    a = rt.task(sp.INFINITY).attach_input(q)
    b = rt.task(sp.INFINITY).attach_input(q)
    for i in range(10):
        out.put(i, str(i))
    got = []
    for round_ in range(5):
        x = a.try_get()
        y = b.try_get()
        assert (x.ts, y.ts) == (2 * round_, 2 * round_ + 1)
        got += [x.ticket, y.ticket]
        # Held items are not offered to anybody else.
        a.consume(x.ticket)
    with pytest.raises(sp.Unavailable):
        a.try_get()
    with pytest.raises(sp.Unavailable):
        b.try_get()
    assert len(set(got)) == 10
    s = q.stats()
    assert (s.puts, s.gets, s.consumed, s.held, s.waiting) == (10, 10, 5, 5, 0)


def test_consume_frees_the_item_and_runs_the_garbage_handler_once(rt: sp.Runtime) -> None:
    q = rt.queue()
    freed: list[tuple[int, object]] = []
    q.on_garbage(lambda ts, value: freed.append((ts, value)))
    out = rt.task(0).attach_output(q)
    inp = rt.task(sp.INFINITY).attach_input(q)
    out.put(1, "one")
    out.put(2, "two")
    first = inp.get(timeout=LONG)
    rt.collect()
    assert freed == [], "getting does not free"
    inp.consume(first.ticket)
    wait_until("the garbage handler ran", lambda: len(freed) > 0)
    assert freed == [(1, "one")]
    # A second consume of the same ticket is refused and frees nothing more.
    with pytest.raises(sp.UnknownTicket):
        inp.consume(first.ticket)
    rt.collect()
    assert freed == [(1, "one")]
    assert q.stats().consumed == 1


def test_unknown_tickets_are_refused(rt: sp.Runtime) -> None:
    q = rt.queue()
    out = rt.task(0).attach_output(q)
    w1 = rt.task(sp.INFINITY)
    a = w1.attach_input(q)
    b = rt.task(sp.INFINITY).attach_input(q)
    held = out.put(1, "held")
    waiting = out.put(2, "waiting")
    assert a.get(timeout=LONG).ticket == held
    with pytest.raises(sp.UnknownTicket):
        a.consume(999)
    # Held by another connection.
    with pytest.raises(sp.UnknownTicket):
        b.consume(held)
    # Not gotten by anybody yet.
    with pytest.raises(sp.UnknownTicket):
        a.consume(waiting)
    # Another connection of the same task is another connection.
    a2 = w1.attach_input(q)
    with pytest.raises(sp.UnknownTicket):
        a2.consume(held)
    a.consume(held)
    assert q.stats().consumed == 1
    assert len(q) == 1


def test_detach_redelivers_held_items_in_their_original_order(rt: sp.Runtime) -> None:
    q = rt.queue()
    out = rt.task(0).attach_output(q)
    w1 = rt.task(sp.INFINITY)
    a = w1.attach_input(q)
    b = rt.task(sp.INFINITY).attach_input(q)
    t1, t2, t3, t4 = (out.put(ts, str(ts)) for ts in (1, 2, 3, 4))
    assert a.get(timeout=LONG).ticket == t1
    assert a.get(timeout=LONG).ticket == t2
    assert a.get(timeout=LONG).ticket == t3
    a.consume(t3)  # consumed: must not come back
    assert w1.visibility == 1
    a.detach()
    assert w1.visibility == sp.INFINITY
    s = q.stats()
    assert (s.redelivered, s.held, s.waiting) == (2, 0, 3)
    assert [b.try_get().ticket for _ in range(3)] == [t1, t2, t4]
    with pytest.raises(sp.Unavailable):
        b.try_get()


def test_redelivered_items_rejoin_the_waiting_items_in_ticket_order(rt: sp.Runtime) -> None:
    q = rt.queue()
    out = rt.task(0).attach_output(q)
    a = rt.task(sp.INFINITY).attach_input(q)
    b = rt.task(sp.INFINITY).attach_input(q)
    c = rt.task(sp.INFINITY).attach_input(q)
    t1, t2, t3 = (out.put(ts, str(ts)) for ts in (1, 2, 3))
    assert b.get(timeout=LONG).ticket == t1
    assert a.get(timeout=LONG).ticket == t2
    b.detach()  # t1 waits again, ahead of t3
    a.detach()  # t2 goes back between them, not in front of t1
    assert [c.try_get().ticket for _ in range(3)] == [t1, t2, t3]
    assert q.stats().redelivered == 2


def test_task_exit_redelivers_held_items(rt: sp.Runtime) -> None:
    q = rt.queue()
    out = rt.task(0).attach_output(q)
    crashing = rt.task(sp.INFINITY)
    a = crashing.attach_input(q)
    b = rt.task(sp.INFINITY).attach_input(q)
    ticket = out.put(5, "work")
    assert a.get(timeout=LONG).ticket == ticket
    with pytest.raises(sp.Unavailable):
        b.try_get()
    crashing.exit()
    again = b.try_get()
    assert (again.ticket, again.ts, again.value) == (ticket, 5, "work")
    assert q.stats().redelivered == 1
    with pytest.raises(sp.Detached):
        a.try_get()
    with pytest.raises(sp.Detached):
        a.consume(ticket)
    b.consume(ticket)


def test_a_task_that_exits_by_leaving_its_with_block_redelivers(rt: sp.Runtime) -> None:
    q = rt.queue()
    out = rt.task(0).attach_output(q)
    survivor = rt.task(sp.INFINITY).attach_input(q)
    ticket = out.put(1, "job")
    with pytest.raises(RuntimeError, match="worker crashed"):
        with rt.task(sp.INFINITY) as worker:
            assert worker.attach_input(q).get(timeout=LONG).ticket == ticket
            raise RuntimeError("worker crashed")
    assert worker.exited
    assert survivor.try_get().ticket == ticket


def test_redelivery_wakes_a_blocked_getter(rt: sp.Runtime) -> None:
    q = rt.queue()
    out = rt.task(0).attach_output(q)
    a = rt.task(sp.INFINITY).attach_input(q)
    b = rt.task(sp.INFINITY).attach_input(q)
    ticket = out.put(1, "x")
    a.get(timeout=LONG)
    getter = Background(lambda: b.get(timeout=LONG))
    getter.started.wait(LONG)
    a.detach()
    assert getter.result().ticket == ticket


def test_a_held_item_holds_its_getters_visibility(rt: sp.Runtime) -> None:
    q = rt.queue()
    results = rt.queue()
    out = rt.task(0).attach_output(q)
    w = rt.task(sp.INFINITY)
    inp = w.attach_input(q)
    res = w.attach_output(results)
    out.put(5, "job")
    job = inp.get(timeout=LONG)
    assert w.visibility == 5
    with pytest.raises(sp.BelowVisibility) as e:
        res.put(4, "too early")
    assert (e.value.timestamp, e.value.visibility, e.value.item) == (4, 5, "too early")
    res.put(5, "result")
    inp.consume(job.ticket)
    assert w.visibility == sp.INFINITY
    with pytest.raises(sp.BelowVisibility) as e:
        res.put(6, "nothing held")
    assert e.value.visibility == sp.INFINITY


def test_invalid_timestamp_is_rejected(rt: sp.Runtime) -> None:
    q = rt.queue()
    out = rt.task(0).attach_output(q)
    item = "x"
    with pytest.raises(sp.InvalidTimestamp) as e:
        out.put(sp.INFINITY, item)
    assert e.value.item is item
    assert len(q) == 0


def test_capacity_counts_waiting_items_only(rt: sp.Runtime) -> None:
    q = rt.queue(capacity=2)
    assert q.capacity == 2
    p = rt.task(0)
    out = p.attach_output(q)
    inp = rt.task(sp.INFINITY).attach_input(q)
    out.try_put(0, "0")
    out.try_put(0, "1")
    item = "2"
    with pytest.raises(sp.Full) as e:
        out.try_put(0, item)
    assert e.value.item is item
    assert q.stats().full == 1
    start = time.monotonic()
    with pytest.raises(sp.Full):
        out.put(0, "2", timeout=0.04)
    assert time.monotonic() - start >= 0.039
    assert p.visibility == 0, "an abandoned put no longer holds visibility"
    # A get moves an item from waiting to held, which makes room.
    held = inp.get(timeout=LONG)
    out.try_put(0, "2")
    s = q.stats()
    assert (s.waiting, s.held, s.full) == (2, 1, 2)
    inp.consume(held.ticket)


def test_full_counts_each_failed_put_once(rt: sp.Runtime) -> None:
    q = rt.queue(capacity=1)
    out = rt.task(0).attach_output(q)
    inp = rt.task(sp.INFINITY).attach_input(q)
    out.put(0, "0")
    with pytest.raises(sp.Full):
        out.put(0, "1", timeout=0.35)
    assert q.stats().full == 1, "one put failed"
    # A put that waits a long time and then succeeds never failed.
    putter = Background(lambda: out.put(0, "1", timeout=LONG))
    wait_pending_put(rt)
    time.sleep(0.35)  # the scenario: the put stays blocked for a while
    inp.get(timeout=LONG)
    putter.result()
    assert q.stats().full == 1


def test_blocked_put_completes_after_a_get(rt: sp.Runtime) -> None:
    q = rt.queue(capacity=1)
    out = rt.task(0).attach_output(q)
    inp = rt.task(sp.INFINITY).attach_input(q)
    out.put(0, "first")
    putter = Background(lambda: out.put(1, "second", timeout=LONG))
    wait_pending_put(rt)
    assert inp.get(timeout=LONG).value == "first"
    putter.result()
    assert inp.try_get().value == "second"


def test_blocking_get_returns_when_an_item_arrives(rt: sp.Runtime) -> None:
    q = rt.queue()
    out = rt.task(0).attach_output(q)
    inp = rt.task(sp.INFINITY).attach_input(q)
    getter = Background(lambda: inp.get(timeout=LONG))
    getter.started.wait(LONG)
    ticket = out.put(3, "late")
    got = getter.result()
    assert (got.ticket, got.ts, got.value) == (ticket, 3, "late")
    start = time.monotonic()
    with pytest.raises(sp.Timeout):
        inp.get(timeout=0.03)
    assert time.monotonic() - start >= 0.029


def test_close_fails_puts_drains_and_wakes_getters(rt: sp.Runtime) -> None:
    q = rt.queue()
    out = rt.task(0).attach_output(q)
    w = rt.task(sp.INFINITY)
    inp = w.attach_input(q)
    idle = w.attach_input(q)
    out.put(1, "left over")

    def two_gets() -> tuple[object, BaseException | None]:
        first = idle.get(timeout=LONG).value
        try:
            idle.get(timeout=LONG)
        except sp.StampedeError as e:
            return first, e
        return first, None

    getter = Background(two_gets)
    getter.started.wait(LONG)
    wait_until("the left-over item is taken", lambda: q.stats().held == 1)
    q.close()
    first, second = getter.result()
    assert first == "left over"
    assert isinstance(second, sp.Closed)
    with pytest.raises(sp.Closed):
        out.put(2, "x")
    with pytest.raises(sp.Closed):
        inp.try_get()


def test_close_wakes_a_blocked_putter(rt: sp.Runtime) -> None:
    q = rt.queue(capacity=1)
    out = rt.task(0).attach_output(q)
    out.put(0, "0")
    putter = Background(lambda: out.put(1, "1", timeout=LONG))
    wait_pending_put(rt)
    q.close()
    err = putter.error()
    assert isinstance(err, sp.Closed) and err.item == "1"


def test_task_exit_wakes_a_blocked_getter_that_holds_nothing(rt: sp.Runtime) -> None:
    q = rt.queue()
    w = rt.task(sp.INFINITY)
    inp = w.attach_input(q)
    getter = Background(lambda: inp.get(timeout=LONG))
    getter.started.wait(LONG)
    time.sleep(0.05)  # not needed for correctness: lets the get park first
    w.exit()
    prompt = getter.finished_within(2.0)
    if not prompt:
        q.close()
    err = getter.error()
    assert prompt, "the blocked get kept waiting after its task exited"
    assert isinstance(err, sp.Detached)


def test_task_exit_fails_a_blocked_put_at_once(rt: sp.Runtime) -> None:
    q = rt.queue(capacity=1)
    p = rt.task(0)
    out = p.attach_output(q)
    out.put(0, "0")
    putter = Background(lambda: out.put(1, "1", timeout=LONG))
    wait_pending_put(rt)
    p.exit()
    prompt = putter.finished_within(2.0)
    if not prompt:
        q.close()
    err = putter.error()
    assert prompt, "the blocked put kept waiting after its task exited"
    assert isinstance(err, sp.Detached)


def test_len_counts_waiting_items(rt: sp.Runtime) -> None:
    q = rt.queue("jobs")
    assert q.name == "jobs"
    assert len(q) == 0
    out = rt.task(0).attach_output(q)
    inp = rt.task(sp.INFINITY).attach_input(q)
    out.put(1, "a")
    out.put(1, "b")
    assert len(q) == 2
    held = inp.get(timeout=LONG)
    assert len(q) == 1
    inp.consume(held.ticket)
    inp.get(timeout=LONG)
    assert len(q) == 0
