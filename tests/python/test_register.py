"""Registers: overwrite, reads that wait for a newer write, per-connection last read,
timeouts and closing (mirrors tests/register.rs)."""

from __future__ import annotations

import time

import pytest

import stampede as sp
from _support import LONG, Background


def test_writes_overwrite(auto_rt: sp.Runtime) -> None:
    reg = auto_rt.register()
    t = auto_rt.task(0)
    w = t.attach_output(reg)
    r = t.attach_input(reg)
    assert reg.peek() is None
    assert w.write("a") == 1
    assert w.write("b") == 2
    assert w.write("c") == 3
    assert r.read(timeout=LONG) == (3, "c")
    assert reg.peek() == (3, "c")


def test_read_waits_for_a_newer_write(auto_rt: sp.Runtime) -> None:
    reg = auto_rt.register()
    t = auto_rt.task(0)
    w = t.attach_output(reg)
    r = t.attach_input(reg)
    w.write("old")
    assert r.read(timeout=LONG)[1] == "old"
    # Nothing newer than the last read.
    with pytest.raises(sp.Unavailable):
        r.try_read()
    reader = Background(lambda: r.read(timeout=LONG))
    reader.started.wait(LONG)
    w.write("new")
    assert reader.result() == (2, "new")


def test_read_timeout_expires_without_a_write(auto_rt: sp.Runtime) -> None:
    reg = auto_rt.register()
    r = auto_rt.task(0).attach_input(reg)
    start = time.monotonic()
    with pytest.raises(sp.Timeout):
        r.read(timeout=0.04)
    assert time.monotonic() - start >= 0.039
    # An empty register is not readable at all.
    with pytest.raises(sp.Unavailable):
        r.try_read()


def test_last_read_is_per_connection(auto_rt: sp.Runtime) -> None:
    reg = auto_rt.register()
    w = auto_rt.task(0).attach_output(reg)
    t = auto_rt.task(0)
    a = t.attach_input(reg)
    b = t.attach_input(reg)
    w.write("x")
    assert a.read(timeout=LONG)[1] == "x"
    # a's read does not mark it read on b.
    assert b.try_read()[1] == "x"
    with pytest.raises(sp.Unavailable):
        a.try_read()
    with pytest.raises(sp.Unavailable):
        b.try_read()
    w.write("y")
    assert a.try_read()[0] == 2
    with pytest.raises(sp.Unavailable):
        a.try_read()
    assert b.try_read()[0] == 2


def test_a_new_reader_sees_the_current_value(auto_rt: sp.Runtime) -> None:
    reg = auto_rt.register()
    t = auto_rt.task(0)
    w = t.attach_output(reg)
    w.write("1")
    w.write("2")
    late = t.attach_input(reg)
    assert late.try_read() == (2, "2")
    with pytest.raises(sp.Unavailable):
        late.try_read()


def test_peek_does_not_count_as_a_read(auto_rt: sp.Runtime) -> None:
    reg = auto_rt.register()
    t = auto_rt.task(0)
    w = t.attach_output(reg)
    r = t.attach_input(reg)
    w.write("v")
    assert reg.peek() == (1, "v")
    assert r.try_read()[0] == 1


def test_a_slow_reader_sees_only_the_latest_value(auto_rt: sp.Runtime) -> None:
    reg = auto_rt.register()
    t = auto_rt.task(0)
    w = t.attach_output(reg)
    r = t.attach_input(reg)
    for i in range(100):
        w.write(str(i))
    assert r.read(timeout=LONG) == (100, "99")


def test_register_values_of_every_kind(auto_rt: sp.Runtime) -> None:
    reg = auto_rt.register()
    t = auto_rt.task(0)
    w = t.attach_output(reg)
    r = t.attach_input(reg)
    config = {"mode": "track", "threshold": 0.5}
    w.write(config)
    config["mode"] = "changed after the write"
    assert r.read(timeout=LONG)[1] == {"mode": "track", "threshold": 0.5}
    blob = b"\x00\x01"
    w.write(blob)
    assert r.read(timeout=LONG)[1] is blob


def test_close_fails_writes_and_wakes_readers(auto_rt: sp.Runtime) -> None:
    reg = auto_rt.register()
    t = auto_rt.task(0)
    w = t.attach_output(reg)
    r = t.attach_input(reg)
    waiting = t.attach_input(reg)
    w.write("last")
    assert waiting.read(timeout=LONG)[1] == "last"
    reader = Background(lambda: waiting.read(timeout=LONG))
    reader.started.wait(LONG)
    reg.close()
    assert isinstance(reader.error(), sp.Closed)
    with pytest.raises(sp.Closed):
        w.write("more")
    # A write the reader has not seen is still delivered after close, then Closed.
    assert r.try_read()[1] == "last"
    with pytest.raises(sp.Closed):
        r.try_read()


def test_exited_task_cannot_use_its_connections(auto_rt: sp.Runtime) -> None:
    reg = auto_rt.register()
    writer = auto_rt.task(0)
    reader = auto_rt.task(0)
    w = writer.attach_output(reg)
    r = reader.attach_input(reg)
    blocked = reader.attach_input(reg)
    waiting = Background(lambda: blocked.read(timeout=LONG))
    waiting.started.wait(LONG)
    reader.exit()
    assert isinstance(waiting.error(), sp.Detached)
    w.write("x")
    with pytest.raises(sp.Detached):
        r.try_read()
    writer.exit()
    with pytest.raises(sp.Detached):
        w.write("y")


def test_registers_are_named_and_zoned(auto_rt: sp.Runtime) -> None:
    reg = auto_rt.register("mode", zone=3)
    assert reg.name == "mode"
    assert reg.zone == 3
    assert isinstance(auto_rt.lookup("mode"), sp.Register)
    with pytest.raises(sp.NameTaken):
        auto_rt.register("mode")
    # Writers must be in the register's zone.
    t = auto_rt.task(0)
    with pytest.raises(sp.ZoneMismatch):
        t.attach_output(reg)
    z = auto_rt.task(0, zone=3)
    assert z.zone == 3
    z.attach_output(reg).write("on")
    assert t.attach_input(reg).read(timeout=LONG)[1] == "on"
