"""Arrival notification: callbacks, async iteration, the blocking form, overflow counting
and the end of a stream when its container closes (mirrors tests/notify.rs)."""

from __future__ import annotations

import asyncio
import sys
import threading

import pytest

import stampede as sp
from _support import LONG, Background


async def collect_all(arrivals: sp.Arrivals) -> list[int]:
    return [ts async for ts in arrivals]


async def take(arrivals: sp.Arrivals, n: int) -> list[int]:
    out: list[int] = []
    async for ts in arrivals:
        out.append(ts)
        if len(out) == n:
            break
    return out


def test_callback_sees_every_put_on_the_putting_thread(rt: sp.Runtime) -> None:
    ch = rt.channel()
    seen: list[tuple[int, int]] = []
    ch.on_arrival(lambda ts: seen.append((ts, threading.get_ident())))
    out = rt.task(0).attach_output(ch)

    def putter() -> int:
        for ts in (3, 1, 2):
            out.put(ts, "x")
        # A failed put is no arrival.
        with pytest.raises(sp.DuplicateTimestamp):
            out.put(3, "dup")
        return threading.get_ident()

    ident = Background(putter).result(LONG)
    assert [ts for ts, _ in seen] == [3, 1, 2], "in put order"
    assert all(t == ident for _, t in seen)


def test_unsubscribe_stops_callbacks(rt: sp.Runtime) -> None:
    ch = rt.channel()
    count = [0]

    def bump(ts: int) -> None:
        count[0] += 1

    sub = ch.on_arrival(bump)
    other = ch.on_arrival(lambda ts: None)
    assert sub != other
    out = rt.task(0).attach_output(ch)
    out.put(0, "a")
    assert ch.unsubscribe(sub)
    assert not ch.unsubscribe(sub)
    out.put(1, "b")
    assert count == [1]


def test_callback_may_get_the_item_it_is_told_about(rt: sp.Runtime) -> None:
    ch = rt.channel()
    inp = rt.task(sp.INFINITY).attach_input(ch)
    got: list[tuple[int, object]] = []
    sub = ch.on_arrival(lambda ts: got.append(inp.try_get(ts)))
    out = rt.task(0).attach_output(ch)

    def put_two() -> None:
        out.put(5, "five")
        out.put(6, "six")

    # Would deadlock if the callback ran under the channel's lock.
    Background(put_two).result(LONG)
    assert got == [(5, "five"), (6, "six")]
    assert ch.unsubscribe(sub)


def test_a_failing_callback_does_not_fail_the_put(
    rt: sp.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    ch = rt.channel()
    seen: list[int] = []
    reported: list[BaseException | None] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(u.exc_value))

    def broken(ts: int) -> None:
        raise RuntimeError("callback bug")

    ch.on_arrival(broken)
    ch.on_arrival(seen.append)
    out = rt.task(0).attach_output(ch)
    out.put(1, "x")  # the item is stored: the put succeeded
    out.put(2, "y")
    assert ch.timestamps() == [1, 2]
    assert seen == [1, 2], "the other subscribers are still told"
    # The error is reported, not silently dropped.
    assert len(reported) == 2
    assert all(isinstance(e, RuntimeError) or isinstance(e.__cause__, RuntimeError) for e in reported if e)


def test_arrivals_yield_timestamps_in_put_order(rt: sp.Runtime) -> None:
    ch = rt.channel()
    arrivals = ch.arrivals(16)
    out = rt.task(0).attach_output(ch)
    for ts in (10, 7, 12):
        out.put(ts, "x")
    got = asyncio.run(asyncio.wait_for(take(arrivals, 3), LONG))
    assert got == [10, 7, 12]
    # Nothing more yet: pending, not ended.
    assert arrivals.next_timeout(0.01) is None
    assert arrivals.dropped == 0


def test_arrivals_wake_on_a_put_from_another_thread(rt: sp.Runtime) -> None:
    ch = rt.channel()
    arrivals = ch.arrivals(4)
    out = rt.task(0).attach_output(ch)

    async def main() -> list[int]:
        waiting = asyncio.ensure_future(take(arrivals, 1))
        await asyncio.sleep(0)  # the iterator is waiting now (or will find the item)
        putter = threading.Thread(target=lambda: out.put(42, "late"))
        putter.start()
        try:
            return await asyncio.wait_for(waiting, LONG)
        finally:
            putter.join(LONG)

    assert asyncio.run(main()) == [42]


def test_the_event_loop_keeps_running_while_waiting(rt: sp.Runtime) -> None:
    ch = rt.channel()
    arrivals = ch.arrivals(4)
    out = rt.task(0).attach_output(ch)

    async def main() -> tuple[list[int], int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.001)

        ticking = asyncio.ensure_future(ticker())
        waiting = asyncio.ensure_future(take(arrivals, 1))
        while ticks < 20:  # the loop is not blocked by the waiting iterator
            await asyncio.sleep(0.001)
        await asyncio.get_running_loop().run_in_executor(None, lambda: out.put(1, "x"))
        got = await asyncio.wait_for(waiting, LONG)
        ticking.cancel()
        return got, ticks

    got, ticks = asyncio.run(asyncio.wait_for(main(), LONG))
    assert got == [1]
    assert ticks >= 20


def test_overflow_drops_the_oldest_and_counts_them(rt: sp.Runtime) -> None:
    ch = rt.channel()
    arrivals = ch.arrivals(2)
    out = rt.task(0).attach_output(ch)
    for ts in range(1, 6):
        out.put(ts, "x")
    assert arrivals.dropped == 3
    assert arrivals.next_timeout(LONG) == 4
    assert arrivals.next_timeout(LONG) == 5
    out.put(6, "x")
    assert asyncio.run(asyncio.wait_for(take(arrivals, 1), LONG)) == [6]
    assert arrivals.dropped == 3

    # A zero capacity still keeps one notification.
    tiny = ch.arrivals(0)
    out.put(7, "x")
    out.put(8, "x")
    assert tiny.next_timeout(LONG) == 8
    assert tiny.dropped == 1


def test_stream_ends_on_close_after_the_buffered_notifications(rt: sp.Runtime) -> None:
    ch = rt.channel()
    arrivals = ch.arrivals(8)
    out = rt.task(0).attach_output(ch)
    out.put(1, "x")
    out.put(2, "x")
    ch.close()
    assert asyncio.run(asyncio.wait_for(collect_all(arrivals), LONG)) == [1, 2]
    with pytest.raises(StopIteration):
        arrivals.next_timeout(LONG)


def test_close_wakes_a_waiting_stream(rt: sp.Runtime) -> None:
    ch = rt.channel()
    arrivals = ch.arrivals(8)

    async def main() -> list[int]:
        waiting = asyncio.ensure_future(collect_all(arrivals))
        await asyncio.sleep(0)
        closer = threading.Thread(target=ch.close)
        closer.start()
        try:
            return await asyncio.wait_for(waiting, LONG)
        finally:
            closer.join(LONG)

    assert asyncio.run(main()) == []


def test_close_wakes_a_blocked_next_timeout(rt: sp.Runtime) -> None:
    ch = rt.channel()
    arrivals = ch.arrivals(8)
    waiter = Background(lambda: arrivals.next_timeout(LONG))
    waiter.started.wait(LONG)
    ch.close()
    assert isinstance(waiter.error(), StopIteration)


def test_next_timeout_wakes_on_a_put(rt: sp.Runtime) -> None:
    ch = rt.channel()
    arrivals = ch.arrivals(8)
    out = rt.task(0).attach_output(ch)
    waiter = Background(lambda: arrivals.next_timeout(LONG))
    waiter.started.wait(LONG)
    out.put(9, "x")
    assert waiter.result() == 9
    assert arrivals.next_timeout(0.0) is None


def test_closing_the_stream_ends_it(rt: sp.Runtime) -> None:
    ch = rt.channel()
    arrivals = ch.arrivals(8)
    out = rt.task(0).attach_output(ch)
    waiter = Background(lambda: arrivals.next_timeout(LONG))
    waiter.started.wait(LONG)
    arrivals.close()
    assert isinstance(waiter.error(), StopIteration)
    out.put(1, "x")  # puts are not disturbed
    assert ch.timestamps() == [1]


def test_stream_subscribed_after_close_ends_at_once(rt: sp.Runtime) -> None:
    ch = rt.channel()
    ch.close()
    arrivals = ch.arrivals(8)
    assert asyncio.run(asyncio.wait_for(collect_all(arrivals), LONG)) == []


def test_dropped_streams_do_not_disturb_puts(rt: sp.Runtime) -> None:
    ch = rt.channel()
    kept = ch.arrivals(4)
    ch.arrivals(1)  # dropped at once
    out = rt.task(0).attach_output(ch)
    for ts in range(10):
        out.put(ts, "x")
    assert kept.dropped == 6


def test_queues_notify_arrivals_too(rt: sp.Runtime) -> None:
    q = rt.queue()
    seen: list[int] = []
    sub = q.on_arrival(seen.append)
    arrivals = q.arrivals(8)
    out = rt.task(0).attach_output(q)
    out.put(4, "a")
    out.put(4, "b")
    out.put(2, "c")
    assert seen == [4, 4, 2]
    assert q.unsubscribe(sub)
    out.put(9, "d")
    assert len(seen) == 3
    q.close()
    assert asyncio.run(asyncio.wait_for(collect_all(arrivals), LONG)) == [4, 4, 2, 9]


def test_unsubscribing_one_subscriber_keeps_notifying_the_others(rt: sp.Runtime) -> None:
    ch = rt.channel()
    seen: list[int] = []
    gone = ch.on_arrival(lambda ts: None)
    kept = ch.on_arrival(seen.append)
    arrivals = ch.arrivals(8)
    out = rt.task(0).attach_output(ch)
    out.put(1, "x")
    assert ch.unsubscribe(gone)
    # In order and out of order, with and without a reference count.
    out.put(5, "x")
    out.put(3, "x")
    out.put(7, "x", consumers=1)
    assert seen == [1, 5, 3, 7]
    assert ch.unsubscribe(kept)
    out.put(9, "x")
    ch.close()
    assert asyncio.run(asyncio.wait_for(collect_all(arrivals), LONG)) == [1, 5, 3, 7, 9]
    assert seen == [1, 5, 3, 7]
