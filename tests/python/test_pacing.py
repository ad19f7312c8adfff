"""Real-time pacing: on-time sleeps and the late handler's three decisions (mirrors
tests/pacing.rs). Timing is checked from below (a pacer never returns before a tick is due)
or with margins far larger than any scheduling delay, so the tests do not flake on a busy
machine."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

import stampede as sp


def recording(action: sp.LateAction) -> tuple[list[sp.Lateness], Callable[[sp.Lateness], sp.LateAction]]:
    seen: list[sp.Lateness] = []

    def handler(late: sp.Lateness) -> sp.LateAction:
        seen.append(late)
        return action

    return seen, handler


def never_late(late: sp.Lateness) -> sp.LateAction:
    raise AssertionError(f"unexpectedly late: {late.late} s at {late.vt}")


def test_on_time_ticks_sleep_until_due(rt: sp.Runtime) -> None:
    t = rt.task(0)
    pacer = t.pacer(0.02, tolerance=5.0, on_late=never_late)
    assert pacer.period == pytest.approx(0.02)
    start = time.monotonic()
    # The first sync fixes the schedule: its tick is due now.
    assert pacer.sync(0).kind == "on_time"
    for vt in (1, 2, 3):
        tick = pacer.sync(vt)
        assert tick.kind == "on_time"
        assert time.monotonic() - start >= 0.02 * vt - 0.001, f"tick {vt} came early"
    # Virtual time may jump: tick 10 is due ten periods after tick 0.
    assert pacer.sync(10).kind == "on_time"
    assert time.monotonic() - start >= 0.199
    stats = pacer.stats()
    assert (stats.on_time, stats.late, stats.skipped, stats.resyncs) == (5, 0, 0, 0)


def test_the_schedule_starts_at_the_first_synced_virtual_time(rt: sp.Runtime) -> None:
    pacer = rt.task(0).pacer(0.025, tolerance=5.0)
    start = time.monotonic()
    assert pacer.sync(1000).kind == "on_time"
    assert pacer.sync(1002).kind == "on_time"
    assert time.monotonic() - start >= 0.049
    # A tick before the origin is already due.
    assert pacer.sync(999).kind == "on_time"


def test_lateness_within_tolerance_is_on_time(rt: sp.Runtime) -> None:
    seen, handler = recording(sp.CONTINUE)
    pacer = rt.task(0).pacer(0.01, tolerance=5.0, on_late=handler)
    pacer.sync(0)
    time.sleep(0.06)  # the task is busy for a while
    assert pacer.sync(1).kind == "on_time"
    assert seen == []
    assert pacer.stats().late == 0


def test_late_with_continue_keeps_the_original_schedule(rt: sp.Runtime) -> None:
    period = 0.01
    seen, handler = recording(sp.CONTINUE)
    pacer = rt.task(0).pacer(period, tolerance=0.005, on_late=handler)
    pacer.sync(0)
    time.sleep(0.15)
    tick = pacer.sync(1)
    assert tick.kind == "late"
    # Tick 1 was due one period after tick 0, which was at least 150 ms ago.
    assert tick.late >= 0.139
    assert tick.skip_to is None
    # The schedule did not move, so the next tick is late too.
    tick2 = pacer.sync(2)
    assert tick2.kind == "late" and tick2.late >= 0.129
    assert [late.vt for late in seen] == [1, 2]
    assert seen[0].late == pytest.approx(tick.late)
    for late in seen:
        # Whole periods missed (allowing for float rounding of the seconds).
        assert abs(late.ticks_behind - late.late / period) < 1 + 1e-6
    assert seen[0].ticks_behind >= 13
    stats = pacer.stats()
    assert (stats.on_time, stats.late) == (1, 2)


def test_late_with_skip_jumps_to_the_first_future_tick(rt: sp.Runtime) -> None:
    period = 0.05
    seen, handler = recording(sp.SKIP)
    pacer = rt.task(0).pacer(period, tolerance=0.2, on_late=handler)
    pacer.sync(0)
    time.sleep(0.6)
    tick = pacer.sync(1)
    assert tick.kind == "skip"
    behind = seen[0].ticks_behind
    assert behind >= 10, f"at least 550 ms late: {behind}"
    assert tick.skip_to == 1 + behind + 1, "the first tick still in the future"
    assert pacer.stats().skipped == behind + 1
    # Carrying on from the skipped-to tick is on time again.
    assert tick.skip_to is not None
    before = time.monotonic()
    assert pacer.sync(tick.skip_to).kind == "on_time"
    assert pacer.sync(tick.skip_to + 1).kind == "on_time"
    # Tick skip_to + 1 is due a period after tick skip_to, which was due at most a period
    # after `before` (and is at most slightly overdue at it).
    assert time.monotonic() - before >= period * 0.5, "the next tick came early"
    stats = pacer.stats()
    assert (stats.late, stats.on_time) == (1, 3)


def test_on_late_may_be_a_decision_rather_than_a_handler(rt: sp.Runtime) -> None:
    pacer = rt.task(0).pacer(0.01, tolerance=0.0, on_late=sp.SKIP)
    pacer.sync(0)
    time.sleep(0.1)
    tick = pacer.sync(1)
    assert tick.kind == "skip"
    assert tick.skip_to is not None and tick.skip_to >= 1 + 9
    assert pacer.stats().late == 1


def test_late_with_resync_rebases_the_schedule(rt: sp.Runtime) -> None:
    period = 0.1
    seen, handler = recording(sp.RESYNC)
    pacer = rt.task(0).pacer(period, tolerance=0.1, on_late=handler)
    pacer.sync(0)
    time.sleep(0.5)
    before = time.monotonic()
    assert pacer.sync(1).kind == "resynced"
    assert len(seen) == 1
    # Tick 1 is now due "now", so tick 2 is due a full period later.
    assert pacer.sync(2).kind == "on_time"
    assert time.monotonic() - before >= period * 0.98
    stats = pacer.stats()
    assert (stats.late, stats.resyncs, stats.on_time) == (1, 1, 2)


def test_a_failing_late_handler_propagates(rt: sp.Runtime) -> None:
    def broken(late: sp.Lateness) -> sp.LateAction:
        raise KeyError("handler bug")

    pacer = rt.task(0).pacer(0.01, tolerance=0.0, on_late=broken)
    pacer.sync(0)
    time.sleep(0.05)
    with pytest.raises(KeyError):
        pacer.sync(1)


def test_a_paced_producer(rt: sp.Runtime) -> None:
    ch = rt.channel()
    t = rt.task(0)
    out = t.attach_output(ch)
    pacer = t.pacer(0.005, tolerance=5.0, on_late=sp.SKIP)
    start = time.monotonic()
    for vt in range(3):
        assert pacer.sync(vt).kind == "on_time"
        out.put(vt, str(vt))
        t.set_virtual_time(vt + 1)
    assert time.monotonic() - start >= 0.0099
    assert ch.timestamps() == [0, 1, 2]


def test_pacer_arguments_are_checked(rt: sp.Runtime) -> None:
    t = rt.task(0)
    with pytest.raises(sp.InvalidArgument):
        t.pacer(-1.0)
    with pytest.raises(sp.InvalidArgument):
        t.pacer(0.01, tolerance=-1.0)
