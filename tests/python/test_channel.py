"""Channels: selectors, gone versus unavailable versus timeout, duplicate timestamps, puts in
any order, bounded capacity, closing and connections (mirrors tests/channel.rs)."""

from __future__ import annotations

import time

import pytest

import stampede as sp
from _support import LONG, PENDING_PUT, Background, pending_puts, wait_pending_put, wait_until


def connect(rt: sp.Runtime, capacity: int | None = None) -> tuple[
    sp.Channel, sp.Task, sp.Task, sp.ChannelInput, sp.ChannelOutput
]:
    """A channel, a producer at 0 with an output and a consumer at INFINITY with an input."""
    ch = rt.channel(capacity=capacity)
    p = rt.task(0, name="producer")
    c = rt.task(sp.INFINITY, name="consumer")
    inp = c.attach_input(ch)
    out = p.attach_output(ch)
    return ch, p, c, inp, out


def test_smoke(rt: sp.Runtime) -> None:
    ch, _, _, inp, out = connect(rt)
    item = "hello"
    out.put(0, item)
    ts, got = inp.get(0, timeout=LONG)
    assert ts == 0
    assert got == "hello"
    # Copy-in/copy-out by sharing one immutable value.
    assert got is item
    assert len(ch) == 1
    assert ch.capacity is None
    assert ch.name is None
    assert ch.zone == 0
    assert not ch.closed


def test_exact_gets_the_same_open_item_again(rt: sp.Runtime) -> None:
    ch, _, _, inp, out = connect(rt)
    out.put(1, "a")
    out.put(3, "c")
    assert inp.get(3, timeout=LONG) == (3, "c")
    # Open but not consumed: still visible.
    assert inp.try_get(3) == (3, "c")
    assert inp.try_get(1) == (1, "a")
    stats = ch.stats()
    assert stats.gets == 3
    assert stats.open == 2


def test_oldest_and_newest_skip_consumed_items(rt: sp.Runtime) -> None:
    ch, _, c, inp, out = connect(rt)
    other = c.attach_input(ch)
    for ts in range(1, 6):
        out.put(ts, str(ts))
    inp.consume(1)
    inp.consume(5)
    assert inp.try_get(sp.OLDEST) == (2, "2")
    assert inp.try_get(sp.NEWEST) == (4, "4")
    # Newest does not care whether the item is already open.
    assert inp.try_get(sp.NEWEST)[0] == 4
    # Consumption is per connection.
    assert other.try_get(sp.OLDEST)[0] == 1
    assert other.try_get(sp.NEWEST)[0] == 5


def test_selector_enum_members_work_like_the_constants(rt: sp.Runtime) -> None:
    _, _, _, inp, out = connect(rt)
    for ts in (1, 2, 3):
        out.put(ts, str(ts))
    assert sp.OLDEST is sp.Selector.OLDEST
    assert sp.NEWEST is sp.Selector.NEWEST
    assert sp.NEWEST_UNSEEN is sp.Selector.NEWEST_UNSEEN
    assert sp.NEXT_UNSEEN is sp.Selector.NEXT_UNSEEN
    assert inp.try_get(sp.Selector.OLDEST)[0] == 1
    assert inp.try_get(sp.Selector.NEXT_UNSEEN)[0] == 2
    assert inp.try_get(sp.Selector.NEWEST)[0] == 3
    # NextUnseen continues after the last get (3): nothing newer.
    with pytest.raises(sp.Unavailable):
        inp.try_get(sp.Selector.NEXT_UNSEEN)
    # NewestUnseen: 1, 2 and 3 were all gotten.
    with pytest.raises(sp.Unavailable):
        inp.try_get(sp.Selector.NEWEST_UNSEEN)


def test_newest_unseen_skips_stale_and_open_items(rt: sp.Runtime) -> None:
    ch, _, _, inp, out = connect(rt)
    for ts in range(1, 6):
        out.put(ts, str(ts))
    assert inp.try_get(sp.NEWEST_UNSEEN)[0] == 5
    # 5 is open now, so the newest item never gotten is 4.
    assert inp.try_get(sp.NEWEST_UNSEEN)[0] == 4
    out.put(6, "6")
    assert inp.try_get(sp.NEWEST_UNSEEN)[0] == 6
    # The first get passed over 1..=4 unseen.
    assert ch.stats().skipped == 4
    for want in (3, 2, 1):
        assert inp.try_get(sp.NEWEST_UNSEEN)[0] == want
    # Everything has been gotten: nothing unseen; the nearest available below is reported.
    with pytest.raises(sp.Unavailable) as e:
        inp.try_get(sp.NEWEST_UNSEEN)
    assert (e.value.below, e.value.above) == (6, None)


def test_newest_unseen_counts_each_skipped_item_once(rt: sp.Runtime) -> None:
    ch, _, _, inp, out = connect(rt)
    for ts in (10, 20, 30):
        out.put(ts, str(ts))
    assert inp.try_get(sp.NEWEST_UNSEEN)[0] == 30
    assert ch.stats().skipped == 2
    assert inp.try_get(sp.NEWEST_UNSEEN)[0] == 20
    assert ch.stats().skipped == 2
    out.put(40, "40")
    assert inp.try_get(sp.NEWEST_UNSEEN)[0] == 40
    assert ch.stats().skipped == 2
    # Consumed items are never counted.
    out.put(50, "50")
    out.put(60, "60")
    inp.consume(50)
    assert inp.try_get(sp.NEWEST_UNSEEN)[0] == 60
    assert ch.stats().skipped == 2
    # Other selectors never count.
    out.put(70, "70")
    out.put(80, "80")
    assert inp.try_get(sp.NEWEST)[0] == 80
    assert ch.stats().skipped == 2


def test_next_unseen_streams_in_timestamp_order(rt: sp.Runtime) -> None:
    _, _, _, inp, out = connect(rt)
    for ts in (2, 0, 1):
        out.put(ts, str(ts))
    for want in range(3):
        assert inp.try_get(sp.NEXT_UNSEEN) == (want, str(want))
    with pytest.raises(sp.Unavailable):
        inp.try_get(sp.NEXT_UNSEEN)
    out.put(10, "10")
    assert inp.try_get(sp.NEXT_UNSEEN)[0] == 10
    # An older item arriving later is not "next" any more, but is still there.
    out.put(5, "5")
    with pytest.raises(sp.Unavailable) as e:
        inp.try_get(sp.NEXT_UNSEEN)
    assert (e.value.below, e.value.above) == (5, None)
    assert inp.try_get(5)[0] == 5


def test_next_unseen_continues_after_the_last_get_of_any_selector(rt: sp.Runtime) -> None:
    _, _, _, inp, out = connect(rt)
    for ts in (1, 5, 6):
        out.put(ts, str(ts))
    assert inp.get(5, timeout=LONG)[0] == 5
    assert inp.get(sp.NEXT_UNSEEN, timeout=LONG)[0] == 6
    assert inp.try_get(sp.OLDEST)[0] == 1
    # NextUnseen is the oldest visible item newer than the last get (now 1), seen or not.
    assert inp.try_get(sp.NEXT_UNSEEN)[0] == 5


def test_failed_try_get_reports_neighbours(rt: sp.Runtime) -> None:
    _, _, _, inp, out = connect(rt)

    def neighbours(sel: sp.Selector | int) -> tuple[int | None, int | None]:
        with pytest.raises(sp.Unavailable) as e:
            inp.try_get(sel)
        return e.value.below, e.value.above

    assert neighbours(6) == (None, None)
    assert neighbours(sp.OLDEST) == (None, None)
    for ts in (9, 2, 5):
        out.put(ts, str(ts))
    assert neighbours(6) == (5, 9)
    assert neighbours(1) == (None, 2)
    assert neighbours(10) == (9, None)
    # Consumed items are not available to this connection, so they are no neighbours.
    inp.consume(5)
    assert neighbours(6) == (2, 9)
    # NextUnseen reports around the last get.
    assert inp.try_get(sp.NEXT_UNSEEN)[0] == 2
    assert inp.try_get(sp.NEXT_UNSEEN)[0] == 9
    assert neighbours(sp.NEXT_UNSEEN) == (2, None)


def test_timeout_reports_neighbours(rt: sp.Runtime) -> None:
    _, _, _, inp, out = connect(rt)
    out.put(5, "5")
    out.put(9, "9")
    start = time.monotonic()
    with pytest.raises(sp.Timeout) as e:
        inp.get(6, timeout=0.04)
    assert time.monotonic() - start >= 0.039
    assert (e.value.below, e.value.above) == (5, 9)
    assert isinstance(e.value, TimeoutError)
    # A zero timeout does not wait.
    with pytest.raises(sp.Timeout):
        inp.get(6, timeout=0.0)


def test_blocking_get_returns_when_the_item_arrives(rt: sp.Runtime) -> None:
    _, _, _, inp, out = connect(rt)
    getter = Background(lambda: inp.get(7, timeout=LONG))
    getter.started.wait(LONG)
    out.put(3, "not this one")
    out.put(7, "seven")
    assert getter.result() == (7, "seven")


def test_consumed_item_is_gone_not_unavailable(rt: sp.Runtime) -> None:
    ch, _, c, inp, out = connect(rt)
    other = c.attach_input(ch)
    out.put(1, "1")
    inp.get(1, timeout=LONG)
    inp.consume(1)
    with pytest.raises(sp.Gone) as e:
        inp.try_get(1)
    assert e.value.timestamp == 1
    # A blocking get fails at once instead of waiting forever.
    start = time.monotonic()
    with pytest.raises(sp.Gone):
        inp.get(1, timeout=LONG)
    assert time.monotonic() - start < LONG / 2
    # Only on that connection.
    assert other.try_get(1)[0] == 1
    # A timestamp that never held an item and was not consumed is merely unavailable.
    with pytest.raises(sp.Unavailable):
        inp.try_get(2)


def test_consume_before_arrival_and_consume_until_cover_later_items(rt: sp.Runtime) -> None:
    ch, _, c, inp, out = connect(rt)
    other = c.attach_input(ch)
    inp.consume(7)  # need not be present
    inp.consume_until(5)
    for ts in (3, 5, 6, 7):
        out.put(ts, str(ts))
    for ts in (3, 5, 7):
        with pytest.raises(sp.Gone) as e:
            inp.try_get(ts)
        assert e.value.timestamp == ts
    assert inp.try_get(sp.OLDEST)[0] == 6
    assert inp.try_get(sp.NEWEST)[0] == 6
    assert other.try_get(sp.OLDEST)[0] == 3
    # Idempotent.
    inp.consume(7)
    inp.consume_until(5)
    inp.consume_until(2)
    assert inp.try_get(sp.OLDEST)[0] == 6


def test_below_the_watermark_is_gone(rt: sp.Runtime) -> None:
    ch = rt.channel()
    p = rt.task(0)
    out = p.attach_output(ch)
    for ts in range(3):
        out.put(ts, str(ts))
    p.set_virtual_time(2)
    assert rt.collect() == 2
    assert ch.timestamps() == [2]
    late = rt.task(2)
    inp = late.attach_input(ch)
    for ts in (0, -5):
        with pytest.raises(sp.Gone):
            inp.try_get(ts)
    with pytest.raises(sp.Gone):
        inp.get(1, timeout=LONG)
    assert inp.try_get(2)[0] == 2


def test_blocked_get_becomes_gone_when_the_watermark_passes(rt: sp.Runtime) -> None:
    _, p, _, inp, out = connect(rt)
    out.put(6, "6")
    getter = Background(lambda: inp.get(1, timeout=LONG))
    getter.started.wait(LONG)
    p.set_virtual_time(5)
    assert rt.collect() == 5
    err = getter.error()
    assert isinstance(err, sp.Gone) and err.timestamp == 1


def test_refcounted_item_is_gone_for_everyone_once_reclaimed(rt: sp.Runtime) -> None:
    ch, _, c, a, out = connect(rt)
    b = c.attach_input(ch)
    out.put(4, "once", consumers=1)
    a.get(4, timeout=LONG)
    a.consume(4)
    assert len(ch) == 0
    with pytest.raises(sp.Gone):
        b.try_get(4)
    # And its timestamp cannot be reused.
    with pytest.raises(sp.DuplicateTimestamp):
        out.put(4, "again")


def test_duplicate_timestamp_hands_the_item_back(rt: sp.Runtime) -> None:
    ch, _, _, inp, out = connect(rt)
    out.put(3, "first")
    second = "second"
    with pytest.raises(sp.DuplicateTimestamp) as e:
        out.put(3, second)
    assert e.value.timestamp == 3
    assert e.value.item is second
    assert "3" in str(e.value)
    assert isinstance(e.value, sp.PutFailed)
    assert inp.get(3, timeout=LONG)[1] == "first"
    # Consumed but not reclaimed: still a duplicate.
    inp.consume(3)
    with pytest.raises(sp.DuplicateTimestamp):
        out.try_put(3, "third")
    assert ch.stats().puts == 1


def test_puts_in_any_order(rt: sp.Runtime) -> None:
    ch, _, _, inp, out = connect(rt, capacity=5)
    for ts in (5, 1, 3, 2, 4):
        out.try_put(ts, str(ts))
    assert ch.timestamps() == [1, 2, 3, 4, 5]
    assert inp.try_get(sp.OLDEST)[0] == 1
    assert inp.try_get(sp.NEWEST)[0] == 5


def test_invalid_puts_are_rejected(rt: sp.Runtime) -> None:
    ch, _, _, _, out = connect(rt)
    with pytest.raises(sp.InvalidTimestamp):
        out.put(sp.INFINITY, "x")
    with pytest.raises(sp.ZeroConsumers):
        out.put(1, "x", consumers=0)
    with pytest.raises(sp.ZeroConsumers):
        out.try_put(1, "x", consumers=0)
    assert len(ch) == 0
    assert ch.stats().puts == 0


def test_zero_capacity_is_rejected(rt: sp.Runtime) -> None:
    with pytest.raises(sp.InvalidArgument):
        rt.channel(capacity=0)
    with pytest.raises(sp.InvalidArgument):
        rt.queue(capacity=0)


def test_names_are_unique_and_looked_up(rt: sp.Runtime) -> None:
    ch = rt.channel("video/frames", capacity=3)
    assert ch.name == "video/frames"
    assert ch.capacity == 3
    with pytest.raises(sp.NameTaken):
        rt.channel("video/frames")
    found = rt.lookup("video/frames")
    assert isinstance(found, sp.Channel)
    assert found.name == "video/frames"
    assert rt.names() == ["video/frames"]
    assert rt.lookup("nothing") is None
    # The looked-up handle is the same channel.
    t = rt.task(0)
    t.attach_output(found).put(1, "x")
    assert ch.timestamps() == [1]


def test_containers_share_one_name_space(rt: sp.Runtime) -> None:
    rt.channel("c")
    q = rt.queue("q")
    rt.register("r")
    anonymous = rt.channel()
    assert anonymous.name is None
    assert q.name == "q"
    assert isinstance(rt.lookup("q"), sp.Queue)
    assert isinstance(rt.lookup("c"), sp.Channel)
    assert isinstance(rt.lookup("r"), sp.Register)
    with pytest.raises(sp.NameTaken):
        rt.queue("c")
    with pytest.raises(sp.NameTaken):
        rt.register("q")
    assert rt.names() == ["c", "q", "r"]


def test_try_put_into_a_full_channel_fails_with_full(rt: sp.Runtime) -> None:
    ch, p, _, _, out = connect(rt, capacity=2)
    out.try_put(0, "0")
    out.try_put(1, "1")
    item = "2"
    with pytest.raises(sp.Full) as e:
        out.try_put(2, item)
    assert e.value.item is item
    assert e.value.timestamp == 2
    assert len(ch) == 2
    assert ch.stats().full == 1
    assert p.visibility == 0


def test_put_timeout_into_a_full_channel_fails_with_full(rt: sp.Runtime) -> None:
    ch, p, _, _, out = connect(rt, capacity=1)
    out.put(0, "0")
    p.set_virtual_time(1)
    start = time.monotonic()
    with pytest.raises(sp.Full) as e:
        out.put(5, "5", timeout=0.05)
    assert time.monotonic() - start >= 0.049
    assert e.value.item == "5"
    assert ch.stats().full == 1
    assert ch.timestamps() == [0]
    # The abandoned put no longer counts in the task's visibility or the watermark.
    assert p.visibility == 1
    assert not pending_puts(rt)


def test_full_counts_each_failed_put_once(rt: sp.Runtime) -> None:
    ch, p, _, inp, out = connect(rt, capacity=1)
    out.put(0, "0")
    p.set_virtual_time(1)
    with pytest.raises(sp.Full):
        out.put(5, "5", timeout=0.35)
    assert ch.stats().full == 1, "one put failed"
    # A put that waits a long time and then succeeds never failed.
    putter = Background(lambda: out.put(2, "2", timeout=LONG))
    wait_pending_put(rt)
    time.sleep(0.35)  # the scenario: the put stays blocked for a while
    inp.consume(0)
    putter.result()
    assert ch.timestamps() == [2]
    assert ch.stats().full == 1


def test_blocking_put_completes_when_gc_frees_space(rt: sp.Runtime) -> None:
    ch, p, _, inp, out = connect(rt, capacity=2)
    freed: list[tuple[int, object]] = []
    ch.on_garbage(lambda ts, value: freed.append((ts, value)))
    out.put(0, "0")
    out.put(1, "1")
    p.set_virtual_time(2)
    inp.get(sp.OLDEST, timeout=LONG)
    putter = Background(lambda: out.put(2, "2", timeout=LONG))
    hold = wait_pending_put(rt)
    assert hold.ts == 2
    assert hold.task == p.id
    assert hold.task_name == "producer"
    assert putter.alive()
    assert len(ch) == 2
    # The consumer lets item 0 go; the watermark rises to 1 and frees a slot.
    inp.consume(0)
    putter.result()
    assert ch.timestamps() == [1, 2]
    wait_until("the garbage handler ran", lambda: len(freed) > 0)
    assert freed == [(0, "0")]
    assert p.visibility == 2


def test_close_fails_puts_and_drains_then_reports_closed(rt: sp.Runtime) -> None:
    ch, _, _, inp, out = connect(rt)
    out.put(1, "1")
    out.put(2, "2")
    assert not ch.closed
    ch.close()
    assert ch.closed
    item = "3"
    with pytest.raises(sp.Closed) as e:
        out.put(3, item)
    assert e.value.item is item
    assert inp.get(sp.NEXT_UNSEEN, timeout=LONG)[0] == 1
    assert inp.get(sp.NEXT_UNSEEN, timeout=LONG)[0] == 2
    with pytest.raises(sp.Closed):
        inp.get(sp.NEXT_UNSEEN, timeout=LONG)
    with pytest.raises(sp.Closed):
        inp.try_get(9)
    # Remaining items can still be read by timestamp.
    assert inp.try_get(1)[0] == 1
    inp.consume_until(2)
    with pytest.raises(sp.Closed):
        inp.get(sp.OLDEST, timeout=LONG)


def test_close_wakes_a_blocked_getter(rt: sp.Runtime) -> None:
    ch = rt.channel()
    c = rt.task(sp.INFINITY)
    inp = c.attach_input(ch)
    getter = Background(lambda: inp.get(sp.NEXT_UNSEEN, timeout=LONG))
    getter.started.wait(LONG)
    ch.close()
    assert isinstance(getter.error(), sp.Closed)


def test_close_wakes_a_blocked_putter(rt: sp.Runtime) -> None:
    ch, p, _, _, out = connect(rt, capacity=1)
    out.put(0, "0")
    putter = Background(lambda: out.put(1, "1", timeout=LONG))
    wait_pending_put(rt)
    ch.close()
    err = putter.error()
    assert isinstance(err, sp.Closed) and err.item == "1"
    assert p.visibility == 0


def test_connections_of_an_exited_task_are_detached(rt: sp.Runtime) -> None:
    ch, p, c, inp, out = connect(rt)
    out.put(0, "0")
    assert ch.stats().connections == 1
    blocked = c.attach_input(ch)
    getter = Background(lambda: blocked.get(9, timeout=LONG))
    getter.started.wait(LONG)
    c.exit()
    assert c.exited
    assert isinstance(getter.error(), sp.Detached)
    assert ch.stats().connections == 0
    assert inp.detached
    with pytest.raises(sp.Detached):
        inp.try_get(sp.OLDEST)
    with pytest.raises(sp.Detached):
        inp.consume(0)
    with pytest.raises(sp.Detached):
        inp.consume_until(0)
    p.exit()
    item = "1"
    with pytest.raises(sp.Detached) as e:
        out.put(1, item)
    assert e.value.item is item


def test_detach_closes_open_items_and_releases_visibility(rt: sp.Runtime) -> None:
    ch, _, c, inp, out = connect(rt)
    out.put(4, "4")
    inp.get(4, timeout=LONG)
    assert c.visibility == 4
    assert ch.stats().open == 1
    assert not inp.detached
    inp.detach()
    assert inp.detached
    assert c.visibility == sp.INFINITY
    stats = ch.stats()
    assert (stats.open, stats.connections) == (0, 0)
    with pytest.raises(sp.Detached):
        inp.try_get(4)
    # Detaching twice is harmless.
    inp.detach()


def test_connections_know_their_task_and_container(rt: sp.Runtime) -> None:
    ch = rt.channel("frames")
    q = rt.queue("jobs")
    reg = rt.register("mode")
    t = rt.task(0)
    inp, out = t.attach_input(ch), t.attach_output(ch)
    qin, qout = t.attach_input(q), t.attach_output(q)
    rin, rout = t.attach_input(reg), t.attach_output(reg)
    for k in (inp, out, qin, qout, rin, rout):
        assert k.task.id == t.id
    assert len({k.id for k in (inp, out, qin, qout, rin, rout)}) == 6
    assert inp.channel.name == out.channel.name == "frames"
    assert qin.queue.name == qout.queue.name == "jobs"
    assert rin.register.name == rout.register.name == "mode"
    out.put(1, "x")
    assert len(inp.channel) == 1


def test_connections_are_context_managers(rt: sp.Runtime) -> None:
    ch = rt.channel()
    with rt.task(0) as p, rt.task(sp.INFINITY) as c:
        with c.attach_input(ch) as inp:
            assert ch.stats().connections == 1
            with p.attach_output(ch) as out:
                out.put(1, "x")
            assert out.detached
            with pytest.raises(sp.Detached):
                out.put(2, "y")
            assert inp.get(1, timeout=LONG)[0] == 1
            assert c.visibility == 1
        assert inp.detached
        assert ch.stats().connections == 0
        assert c.visibility == sp.INFINITY
    assert p.exited and c.exited


def test_stats_count_operations(rt: sp.Runtime) -> None:
    ch, p, c, a, out = connect(rt)
    b = c.attach_input(ch)
    for ts in range(4):
        out.put(ts, str(ts))
    a.get(0, timeout=LONG)
    a.get(1, timeout=LONG)
    b.get(1, timeout=LONG)
    with pytest.raises(sp.Unavailable):
        b.try_get(9)
    s = ch.stats()
    assert (s.items, s.connections, s.open, s.puts, s.gets, s.reclaimed) == (4, 2, 3, 4, 3, 0)
    a.consume_until(3)
    b.consume_until(3)
    p.set_virtual_time(sp.INFINITY)
    rt.collect()
    s = ch.stats()
    assert (s.items, s.open, s.reclaimed) == (0, 0, 4)


def test_exact_infinity_is_gone(rt: sp.Runtime) -> None:
    ch = rt.channel()
    c = rt.task(sp.INFINITY)
    inp = c.attach_input(ch)
    with pytest.raises(sp.Gone) as e:
        inp.try_get(sp.INFINITY)
    assert e.value.timestamp == sp.INFINITY
    with pytest.raises(sp.Gone):
        inp.get(sp.INFINITY, timeout=LONG)


def test_task_exit_fails_a_blocked_put_at_once(rt: sp.Runtime) -> None:
    ch, p, _, _, out = connect(rt, capacity=1)
    out.put(0, "0")
    putter = Background(lambda: out.put(1, "1", timeout=LONG))
    wait_pending_put(rt)
    p.exit()
    prompt = putter.finished_within(2.0)
    if not prompt:
        ch.close()  # release the thread
    err = putter.error()
    assert prompt, "the blocked put kept waiting after its task exited"
    assert isinstance(err, sp.Detached)


def test_blocked_put_completes_when_the_holding_reader_detaches(rt: sp.Runtime) -> None:
    ch, p, _, inp, out = connect(rt, capacity=1)
    out.put(0, "0")
    p.set_virtual_time(1)
    putter = Background(lambda: out.put(1, "1", timeout=LONG))
    wait_pending_put(rt)
    inp.detach()
    putter.result()
    assert ch.timestamps() == [1]


def test_blocked_put_completes_when_the_holding_task_exits(rt: sp.Runtime) -> None:
    ch = rt.channel(capacity=1)
    slow = rt.task(0)
    p = rt.task(0)
    out = p.attach_output(ch)
    out.put(0, "0")
    p.set_virtual_time(1)
    putter = Background(lambda: out.put(1, "1", timeout=LONG))
    wait_pending_put(rt)
    slow.exit()
    putter.result()
    assert ch.timestamps() == [1]


def test_blocked_put_completes_when_a_counted_item_is_consumed(rt: sp.Runtime) -> None:
    ch, _, _, inp, out = connect(rt, capacity=1)
    out.put(0, "0", consumers=1)
    putter = Background(lambda: out.put(1, "1", timeout=LONG))
    wait_pending_put(rt)
    inp.get(0, timeout=LONG)
    inp.consume(0)
    putter.result()
    assert ch.timestamps() == [1]


def test_a_channel_accepts_64_input_connections_and_reuses_freed_places(
    rt: sp.Runtime,
) -> None:
    ch = rt.channel()
    producer = rt.task(0)
    out = producer.attach_output(ch)
    readers = rt.task(0)
    inputs = [readers.attach_input(ch) for _ in range(64)]
    with pytest.raises(sp.TooManyConnections):
        readers.attach_input(ch)
    out.put(0, "x")
    inputs[5].get(0, timeout=LONG)
    inputs[5].consume(0)
    inputs.pop(5).detach()
    fresh = readers.attach_input(ch)
    assert fresh.try_get(sp.OLDEST)[0] == 0
    assert inputs[0].try_get(sp.OLDEST)[0] == 0


def test_every_put_wakes_a_parked_get(rt: sp.Runtime) -> None:
    ch, _, c, inp, out = connect(rt)
    early = c.attach_input(ch)
    getter = Background(lambda: inp.get(sp.NEXT_UNSEEN, timeout=LONG))
    getter.started.wait(LONG)
    time.sleep(0.05)  # not needed for correctness: lets the get park first
    out.put(10, "in order")
    assert getter.result()[0] == 10

    getter = Background(lambda: inp.get(5, timeout=LONG))
    getter.started.wait(LONG)
    time.sleep(0.05)
    out.put(5, "out of order")
    assert getter.result()[0] == 5

    early.consume(4)
    getter = Background(lambda: inp.get(4, timeout=LONG))
    getter.started.wait(LONG)
    time.sleep(0.05)
    out.put(4, "counted", consumers=1)
    err = getter.error()
    assert isinstance(err, sp.Gone) and err.timestamp == 4
    assert ch.timestamps() == [5, 10]


def test_a_parked_get_learns_at_once_that_it_can_never_succeed(rt: sp.Runtime) -> None:
    ch, p, _, inp, out = connect(rt)
    doomed = rt.task(sp.INFINITY)
    doomed_input = doomed.attach_input(ch)
    out.put(9, "9")  # lets the floor rise past what the gets wait for

    getter = Background(lambda: inp.get(5, timeout=LONG))
    getter.started.wait(LONG)
    time.sleep(0.05)
    inp.consume(5)
    assert isinstance(getter.error(), sp.Gone)

    getter = Background(lambda: inp.get(3, timeout=LONG))
    getter.started.wait(LONG)
    time.sleep(0.05)
    p.set_virtual_time(4)
    assert rt.collect() == 4
    assert isinstance(getter.error(), sp.Gone)

    getter = Background(lambda: doomed_input.get(7, timeout=LONG))
    getter.started.wait(LONG)
    time.sleep(0.05)
    doomed.exit()
    assert isinstance(getter.error(), sp.Detached)


def test_consuming_on_one_connection_leaves_the_others_alone(rt: sp.Runtime) -> None:
    ch, p, c, a, out = connect(rt)
    b = c.attach_input(ch)
    fresh = c.attach_input(ch)
    for ts in range(1, 7):
        out.put(ts, str(ts))
    a.consume(3)
    b.get(2, timeout=LONG)
    b.consume_until(4)
    a.consume_until(1)
    b.consume(6)
    with pytest.raises(sp.Gone):
        a.try_get(3)
    assert a.try_get(6)[0] == 6
    assert a.try_get(sp.OLDEST)[0] == 2
    with pytest.raises(sp.Gone):
        b.try_get(2)
    assert b.try_get(sp.OLDEST)[0] == 5
    assert b.try_get(sp.NEWEST)[0] == 5
    assert fresh.try_get(sp.OLDEST)[0] == 1
    assert fresh.try_get(sp.NEWEST)[0] == 6
    # The oldest item unconsumed on some connection (1, on `fresh`) holds the watermark.
    p.set_virtual_time(sp.INFINITY)
    assert rt.collect() == 1
    fresh.detach()
    assert rt.collect() == 2
    assert ch.timestamps() == [2, 3, 4, 5, 6]


def test_explain_names_a_blocked_put(rt: sp.Runtime) -> None:
    ch = rt.channel("frames", capacity=1)
    p = rt.task(0, name="camera")
    out = p.attach_output(ch)
    out.put(0, "0")
    putter = Background(lambda: out.put(1, "1", timeout=LONG))
    hold = wait_pending_put(rt)
    assert hold.cause == PENDING_PUT
    assert (hold.ts, hold.task, hold.task_name) == (1, p.id, "camera")
    assert hold.container is not None
    assert "camera" in hold.description
    ch.close()
    assert isinstance(putter.error(), sp.Closed)
