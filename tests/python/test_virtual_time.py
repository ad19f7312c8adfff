"""Virtual time: the four rules and their errors, child tasks, root tasks against their
zone's floor, time zones (mirrors tests/virtual_time.rs)."""

from __future__ import annotations

import threading

import pytest

import stampede as sp
from _support import LONG


def test_tasks_report_their_identity_and_times(rt: sp.Runtime) -> None:
    a = rt.task(3, name="digitizer")
    b = rt.task(sp.INFINITY)
    assert a.id != b.id
    assert a.name == "digitizer"
    assert b.name != ""
    assert (a.virtual_time, a.visibility) == (3, 3)
    assert (b.virtual_time, b.visibility) == (sp.INFINITY, sp.INFINITY)
    assert a.zone == 0
    assert not a.exited
    # The default virtual time of a root task is 0.
    assert rt.task().virtual_time == 0


def test_rule_1_put_below_visibility_is_refused(rt: sp.Runtime) -> None:
    ch = rt.channel()
    q = rt.queue()
    t = rt.task(5)
    out = t.attach_output(ch)
    qout = t.attach_output(q)
    item = "early"
    with pytest.raises(sp.BelowVisibility) as e:
        out.put(4, item)
    assert (e.value.timestamp, e.value.visibility) == (4, 5)
    assert e.value.item is item
    with pytest.raises(sp.BelowVisibility) as e:
        out.try_put(4, item)
    assert e.value.item is item
    with pytest.raises(sp.BelowVisibility) as e:
        qout.put(4, "early")
    assert e.value.visibility == 5
    out.put(5, "on time")
    qout.put(5, "on time")
    t.set_virtual_time(10)
    with pytest.raises(sp.BelowVisibility) as e:
        out.put(7, "late")
    assert e.value.visibility == 10
    assert ch.timestamps() == [5]


def test_rule_1_open_items_lower_visibility(rt: sp.Runtime) -> None:
    frames = rt.channel()
    tracks = rt.channel()
    src = rt.task(0)
    tracker = rt.task(20)
    inp = tracker.attach_input(frames)
    out = tracker.attach_output(tracks)
    src.attach_output(frames).put(3, "frame")
    inp.get(3, timeout=LONG)
    assert tracker.virtual_time == 20
    assert tracker.visibility == 3
    with pytest.raises(sp.BelowVisibility) as e:
        out.put(2, "x")
    assert e.value.visibility == 3
    # A result inherits its input's timestamp.
    out.put(3, "track")
    inp.consume(3)
    assert tracker.visibility == 20
    with pytest.raises(sp.BelowVisibility) as e:
        out.put(4, "x")
    assert e.value.visibility == 20


def test_rule_2_child_starts_at_or_above_parent_visibility(rt: sp.Runtime) -> None:
    parent = rt.task(5)
    with pytest.raises(sp.BelowVisibility) as e:
        parent.child(4)
    assert (e.value.timestamp, e.value.visibility) == (4, 5)
    child = parent.child(5, name="kid")
    assert (child.name, child.virtual_time) == ("kid", 5)
    assert child.zone == parent.zone
    assert parent.child().virtual_time == sp.INFINITY

    # Open items count in the parent's visibility.
    ch = rt.channel()
    other = rt.task(0)
    inp = parent.attach_input(ch)
    other.attach_output(ch).put(7, "x")
    parent.set_virtual_time(10)
    inp.get(7, timeout=LONG)
    assert parent.visibility == 7
    with pytest.raises(sp.BelowVisibility) as e:
        parent.child(6)
    assert (e.value.timestamp, e.value.visibility) == (6, 7)
    assert parent.child(7).virtual_time == 7


def test_rule_3_attach_consumes_items_present_below_visibility(rt: sp.Runtime) -> None:
    ch = rt.channel()
    out = rt.task(0).attach_output(ch)
    for ts in (3, 5, 7):
        out.put(ts, str(ts))
    late = rt.task(5)
    inp = late.attach_input(ch)
    assert inp.try_get(sp.OLDEST)[0] == 5
    with pytest.raises(sp.Gone):
        inp.try_get(3)
    assert inp.try_get(7)[0] == 7


def test_rule_3_a_task_at_infinity_sees_only_later_items(rt: sp.Runtime) -> None:
    ch = rt.channel()
    out = rt.task(0).attach_output(ch)
    out.put(1, "before")
    sink = rt.task(sp.INFINITY)
    inp = sink.attach_input(ch)
    with pytest.raises(sp.Gone):
        inp.try_get(1)
    with pytest.raises(sp.Unavailable):
        inp.try_get(sp.OLDEST)
    out.put(2, "after")
    assert inp.try_get(sp.OLDEST) == (2, "after")


def test_rule_3_uses_visibility_including_open_items(rt: sp.Runtime) -> None:
    ch = rt.channel()
    out = rt.task(0).attach_output(ch)
    t = rt.task(sp.INFINITY)
    a = t.attach_input(ch)
    for ts in (2, 4, 6):
        out.put(ts, str(ts))
    a.get(4, timeout=LONG)
    assert t.visibility == 4
    b = t.attach_input(ch)
    with pytest.raises(sp.Gone):
        b.try_get(2)
    assert b.try_get(sp.OLDEST)[0] == 4


def test_rule_3_marking_is_not_a_consume_for_reference_counts(rt: sp.Runtime) -> None:
    ch = rt.channel()
    out = rt.task(0).attach_output(ch)
    inp = rt.task(sp.INFINITY).attach_input(ch)
    out.put(3, "x", consumers=1)
    late_input = rt.task(5).attach_input(ch)
    with pytest.raises(sp.Gone):
        late_input.try_get(3)
    assert ch.timestamps() == [3]
    assert ch.stats().reclaimed == 0
    # The one real consume does.
    inp.consume(3)
    assert len(ch) == 0
    assert ch.stats().reclaimed == 1


def test_rule_3_across_zones_uses_the_containers_floor(rt: sp.Runtime) -> None:
    audio = rt.channel(zone=1)
    mic = rt.task(0, zone=1)
    mic.attach_output(audio).put(3, "sample")
    # A reader in the default zone at INFINITY: timestamps of zone 1 are not comparable to
    # its visibility, so nothing present is consumed on attach.
    reader = rt.task(sp.INFINITY)
    inp = reader.attach_input(audio)
    assert inp.try_get(sp.OLDEST)[0] == 3
    # And the item does not lower the reader's visibility in its own zone.
    assert reader.visibility == sp.INFINITY


def test_rule_4_virtual_time_never_below_visibility(rt: sp.Runtime) -> None:
    t = rt.task(5)
    with pytest.raises(sp.BelowVisibility) as e:
        t.set_virtual_time(4)
    assert (e.value.timestamp, e.value.visibility) == (4, 5)
    msg = str(e.value)
    assert "4" in msg and "5" in msg, msg
    t.set_virtual_time(5)
    t.set_virtual_time(9)
    with pytest.raises(sp.BelowVisibility):
        t.set_virtual_time(8)
    assert t.virtual_time == 9

    # With an open item, virtual time may go down, but not below the item.
    ch = rt.channel()
    src = rt.task(0)
    inp = t.attach_input(ch)
    src.attach_output(ch).put(6, "x")
    inp.get(6, timeout=LONG)
    assert t.visibility == 6
    with pytest.raises(sp.BelowVisibility) as e:
        t.set_virtual_time(5)
    assert e.value.visibility == 6
    t.set_virtual_time(6)
    assert t.virtual_time == 6
    t.set_virtual_time(sp.INFINITY)
    assert t.visibility == 6
    inp.consume(6)
    assert t.visibility == sp.INFINITY


def test_root_tasks_start_at_or_above_the_zone_floor(rt: sp.Runtime) -> None:
    ch = rt.channel()
    src = rt.task(0)
    out = src.attach_output(ch)
    for ts in range(20):
        out.put(ts, str(ts))
    src.set_virtual_time(10)
    assert rt.collect() == 10
    assert rt.gc_stats().floor == 10
    with pytest.raises(sp.BelowVisibility) as e:
        rt.task(5)
    assert (e.value.timestamp, e.value.visibility) == (5, 10)
    ran = threading.Event()
    with pytest.raises(sp.BelowVisibility):
        rt.spawn(lambda task: ran.set(), vt=9)
    assert not ran.is_set()
    assert rt.task(10).virtual_time == 10
    # Other zones have their own floor.
    assert rt.task(5, zone=1).virtual_time == 5
    # A child of a task at the floor cannot go below it either.
    at_floor = rt.task(10)
    with pytest.raises(sp.BelowVisibility):
        at_floor.child(9)


def test_the_floor_stops_one_above_the_newest_put(rt: sp.Runtime) -> None:
    ch = rt.channel()
    src = rt.task(0)
    src.attach_output(ch).put(3, "x")
    src.set_virtual_time(100)
    # The watermark would be 100, but nothing at or above 4 exists: the floor stops at 4.
    assert rt.collect() == 4
    assert len(ch) == 0
    late = rt.task(4)
    late.attach_output(ch).put(4, "y")


def test_a_zone_without_live_tasks_keeps_its_floor(rt: sp.Runtime) -> None:
    ch = rt.channel()
    src = rt.task(0)
    out = src.attach_output(ch)
    for ts in range(5):
        out.put(ts, str(ts))
    src.set_virtual_time(2)
    assert rt.collect() == 2
    src.exit()
    assert rt.collect() == 2
    assert ch.timestamps() == [2, 3, 4]
    # A late joiner can still read what is left.
    t = rt.task(2)
    assert t.attach_input(ch).try_get(sp.OLDEST)[0] == 2


def test_outputs_only_into_the_tasks_own_zone(rt: sp.Runtime) -> None:
    ch = rt.channel(zone=2)
    q = rt.queue(zone=2)
    assert (ch.zone, q.zone) == (2, 2)
    t = rt.task(0)
    with pytest.raises(sp.ZoneMismatch):
        t.attach_output(ch)
    with pytest.raises(sp.ZoneMismatch):
        t.attach_output(q)
    # Inputs from another zone are allowed.
    t.attach_input(ch)
    t.attach_input(q)


def test_an_exited_task_refuses_everything(rt: sp.Runtime) -> None:
    ch = rt.channel()
    t = rt.task(0)
    t.exit()
    assert t.exited
    with pytest.raises(sp.TaskExited):
        t.set_virtual_time(1)
    with pytest.raises(sp.TaskExited):
        t.attach_input(ch)
    with pytest.raises(sp.TaskExited):
        t.attach_output(ch)
    with pytest.raises(sp.TaskExited):
        t.child(5)
    # Exiting twice is harmless.
    t.exit()


def test_an_exited_task_no_longer_holds_the_watermark(rt: sp.Runtime) -> None:
    ch = rt.channel()
    src = rt.task(0)
    out = src.attach_output(ch)
    for ts in range(5):
        out.put(ts, str(ts))
    with rt.task(1) as slow:
        src.set_virtual_time(4)
        assert rt.collect() == 1
        assert slow.visibility == 1
    assert rt.collect() == 4
    assert ch.timestamps() == [4]


def test_spawned_tasks_run_with_their_virtual_time(rt: sp.Runtime) -> None:
    th = rt.spawn(lambda task, x: (task.virtual_time, task.name, x), 42, vt=8, name="worker")
    assert th.result(LONG) == (8, "worker", 42)
    assert th.task.exited
