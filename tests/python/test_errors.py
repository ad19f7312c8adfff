"""Errors: one exception class per kind, each raised by the situation it names; failed puts
hand their value back; bad arguments are refused with InvalidArgument or TypeError."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

import pytest

import stampede as sp
import stampede.errors
from _support import LONG, Background, wait_pending_put

ERROR_CLASSES = [getattr(stampede.errors, name) for name in stampede.errors.__all__]


def test_every_error_class_is_exported_and_derives_from_stampede_error() -> None:
    assert ERROR_CLASSES
    for cls in ERROR_CLASSES:
        assert inspect.isclass(cls)
        assert issubclass(cls, sp.StampedeError), cls
        assert getattr(sp, cls.__name__) is cls
        assert cls.__doc__, cls
    assert issubclass(sp.StampedeError, Exception)


def test_the_error_hierarchy() -> None:
    for put_error in (sp.Full, sp.DuplicateTimestamp, sp.InvalidTimestamp, sp.ZeroConsumers):
        assert issubclass(put_error, sp.PutFailed)
    for get_error in (sp.Unavailable, sp.Timeout):
        assert issubclass(get_error, sp.GetFailed)
    assert issubclass(sp.Timeout, TimeoutError)
    assert issubclass(sp.InvalidArgument, ValueError)
    assert issubclass(sp.MarshalError, TypeError)


def fails(
    cls: type[BaseException], fn: Callable[[], object], match: str | None = None
) -> Any:
    """Runs ``fn``, which must raise exactly ``cls`` (not a sibling); returns the error."""
    with pytest.raises(sp.StampedeError) as e:
        fn()
    assert type(e.value) is cls, f"expected {cls.__name__}, got {type(e.value).__name__}: {e.value}"
    assert str(e.value), "errors carry a message"
    if match is not None:
        assert match in str(e.value)
    return e.value


# ---------------------------------------------------------------------------------------
# Each situation raises its class; a put's value is handed back.
# ---------------------------------------------------------------------------------------


def test_full(rt: sp.Runtime) -> None:
    ch = rt.channel(capacity=1)
    q = rt.queue(capacity=1)
    t = rt.task(0)
    rt.task(sp.INFINITY).attach_input(ch)
    out, qout = t.attach_output(ch), t.attach_output(q)
    out.put(0, "0")
    qout.put(0, "0")
    item = ["value"]
    e = fails(sp.Full, lambda: out.try_put(1, item))
    assert (e.item, e.timestamp) == (item, 1) and e.item is item
    e = fails(sp.Full, lambda: out.put(1, item, timeout=0.01))
    assert e.item is item
    e = fails(sp.Full, lambda: qout.try_put(1, item))
    assert e.item is item
    e = fails(sp.Full, lambda: qout.put(1, item, timeout=0.01))
    assert e.item is item


def test_duplicate_timestamp(rt: sp.Runtime) -> None:
    out = rt.task(0).attach_output(rt.channel())
    out.put(3, "first")
    item = b"second"
    e = fails(sp.DuplicateTimestamp, lambda: out.put(3, item), match="3")
    assert (e.item, e.timestamp) == (item, 3) and e.item is item


def test_invalid_timestamp(rt: sp.Runtime) -> None:
    out = rt.task(0).attach_output(rt.channel())
    item = "x"
    e = fails(sp.InvalidTimestamp, lambda: out.put(sp.INFINITY, item))
    assert e.item is item and e.timestamp == sp.INFINITY


def test_zero_consumers(rt: sp.Runtime) -> None:
    out = rt.task(0).attach_output(rt.channel())
    item = "x"
    e = fails(sp.ZeroConsumers, lambda: out.put(1, item, consumers=0))
    assert e.item is item and e.timestamp == 1


def test_below_visibility(rt: sp.Runtime) -> None:
    ch = rt.channel()
    t = rt.task(5)
    out = t.attach_output(ch)
    item = "x"
    e = fails(sp.BelowVisibility, lambda: out.put(4, item))
    assert (e.timestamp, e.visibility) == (4, 5) and e.item is item
    e = fails(sp.BelowVisibility, lambda: t.set_virtual_time(3))
    assert (e.timestamp, e.visibility) == (3, 5)
    e = fails(sp.BelowVisibility, lambda: t.child(2))
    assert (e.timestamp, e.visibility) == (2, 5)
    t.set_virtual_time(10)
    src = rt.task(10)
    src.attach_output(ch).put(20, "raises the horizon")
    assert rt.collect() == 10
    e = fails(sp.BelowVisibility, lambda: rt.task(9))
    assert (e.timestamp, e.visibility) == (9, 10)


def test_closed(rt: sp.Runtime) -> None:
    ch, q, reg = rt.channel(), rt.queue(), rt.register()
    t = rt.task(0)
    out, qout, w = t.attach_output(ch), t.attach_output(q), t.attach_output(reg)
    inp, qin, r = t.attach_input(ch), t.attach_input(q), t.attach_input(reg)
    for c in (ch, q, reg):
        c.close()
    item = "x"
    e = fails(sp.Closed, lambda: out.put(1, item))
    assert e.item is item
    e = fails(sp.Closed, lambda: qout.put(1, item))
    assert e.item is item
    fails(sp.Closed, lambda: w.write(item))
    fails(sp.Closed, lambda: inp.try_get(sp.OLDEST))
    fails(sp.Closed, lambda: inp.get(sp.NEXT_UNSEEN, timeout=LONG))
    fails(sp.Closed, lambda: qin.try_get())
    fails(sp.Closed, lambda: qin.get(timeout=LONG))
    fails(sp.Closed, lambda: r.try_read())
    fails(sp.Closed, lambda: r.read(timeout=LONG))


def test_detached(rt: sp.Runtime) -> None:
    ch, q, reg = rt.channel(), rt.queue(), rt.register()
    t = rt.task(0)
    out, qout, w = t.attach_output(ch), t.attach_output(q), t.attach_output(reg)
    inp, qin, r = t.attach_input(ch), t.attach_input(q), t.attach_input(reg)
    for k in (out, qout, w, inp, qin, r):
        k.detach()
        assert k.detached
    item = "x"
    e = fails(sp.Detached, lambda: out.put(1, item))
    assert e.item is item
    e = fails(sp.Detached, lambda: qout.put(1, item))
    assert e.item is item
    fails(sp.Detached, lambda: w.write(item))
    fails(sp.Detached, lambda: inp.try_get(1))
    fails(sp.Detached, lambda: inp.get(1, timeout=LONG))
    fails(sp.Detached, lambda: inp.consume(1))
    fails(sp.Detached, lambda: inp.consume_until(1))
    fails(sp.Detached, lambda: qin.try_get())
    fails(sp.Detached, lambda: qin.consume(1))
    fails(sp.Detached, lambda: r.try_read())


def test_get_failures(rt: sp.Runtime) -> None:
    ch = rt.channel()
    inp = rt.task(sp.INFINITY).attach_input(ch)
    out = rt.task(0).attach_output(ch)
    out.put(2, "2")
    out.put(8, "8")
    e = fails(sp.Unavailable, lambda: inp.try_get(5))
    assert (e.below, e.above) == (2, 8)
    e = fails(sp.Timeout, lambda: inp.get(5, timeout=0.01))
    assert (e.below, e.above) == (2, 8)
    inp.consume(2)
    e = fails(sp.Gone, lambda: inp.try_get(2), match="2")
    assert e.timestamp == 2


def test_zone_mismatch(rt: sp.Runtime) -> None:
    t = rt.task(0)
    fails(sp.ZoneMismatch, lambda: t.attach_output(rt.channel(zone=1)))
    fails(sp.ZoneMismatch, lambda: t.attach_output(rt.queue(zone=1)))
    fails(sp.ZoneMismatch, lambda: t.attach_output(rt.register(zone=1)))


def test_task_exited(rt: sp.Runtime) -> None:
    ch = rt.channel()
    t = rt.task(0)
    t.exit()
    fails(sp.TaskExited, lambda: t.set_virtual_time(1))
    fails(sp.TaskExited, lambda: t.attach_input(ch))
    fails(sp.TaskExited, lambda: t.attach_output(ch))
    fails(sp.TaskExited, lambda: t.child(1))


def test_unknown_ticket(rt: sp.Runtime) -> None:
    q = rt.queue()
    inp = rt.task(sp.INFINITY).attach_input(q)
    fails(sp.UnknownTicket, lambda: inp.consume(12345), match="12345")


def test_name_taken(rt: sp.Runtime) -> None:
    rt.channel("taken")
    fails(sp.NameTaken, lambda: rt.channel("taken"), match="taken")
    fails(sp.NameTaken, lambda: rt.queue("taken"))
    fails(sp.NameTaken, lambda: rt.register("taken"))


def test_too_many_connections(rt: sp.Runtime) -> None:
    ch = rt.channel()
    t = rt.task(0)
    conns = [t.attach_input(ch) for _ in range(64)]
    fails(sp.TooManyConnections, lambda: t.attach_input(ch), match="64")
    conns[0].detach()
    t.attach_input(ch)


def test_marshal_error(rt: sp.Runtime) -> None:
    out = rt.task(0).attach_output(rt.channel())
    fails(sp.MarshalError, lambda: out.put(1, lambda: None))


def test_a_failed_blocking_put_hands_the_item_back(rt: sp.Runtime) -> None:
    ch = rt.channel(capacity=1)
    out = rt.task(0).attach_output(ch)
    out.put(0, "0")
    item = bytearray(b"frame")
    putter = Background(lambda: out.put(1, item, timeout=LONG))
    wait_pending_put(rt)
    ch.close()
    err = putter.error()
    assert isinstance(err, sp.Closed)
    assert err.item is item


# ---------------------------------------------------------------------------------------
# Bad arguments: refused with a clear exception, never a crash.
# ---------------------------------------------------------------------------------------


def test_negative_timeouts_are_invalid(rt: sp.Runtime) -> None:
    ch = rt.channel()
    q = rt.queue()
    reg = rt.register()
    t = rt.task(0)
    inp, out = t.attach_input(ch), t.attach_output(ch)
    qin, qout = t.attach_input(q), t.attach_output(q)
    r = t.attach_input(reg)
    for fn in (
        lambda: inp.get(1, timeout=-1.0),
        lambda: out.put(1, "x", timeout=-1.0),
        lambda: qin.get(timeout=-0.5),
        lambda: qout.put(1, "x", timeout=-0.5),
        lambda: r.read(timeout=-1.0),
        lambda: inp.get(1, timeout=math.nan),
    ):
        with pytest.raises(sp.InvalidArgument):
            fn()
    assert len(ch) == 0 and len(q) == 0


def test_bad_capacities_are_invalid(rt: sp.Runtime) -> None:
    for make in (rt.channel, rt.queue):
        with pytest.raises(sp.InvalidArgument):
            make(capacity=0)
        with pytest.raises((sp.InvalidArgument, OverflowError)):
            make(capacity=-1)


def test_negative_reference_counts_are_invalid(rt: sp.Runtime) -> None:
    out = rt.task(0).attach_output(rt.channel())
    with pytest.raises((sp.InvalidArgument, sp.ZeroConsumers, OverflowError)):
        out.put(1, "x", consumers=-1)


def test_selectors_and_timestamps_must_be_integers_or_selectors(rt: sp.Runtime) -> None:
    ch = rt.channel()
    t = rt.task(0)
    inp, out = t.attach_input(ch), t.attach_output(ch)
    for bad in ("newest", 1.5, None, [1]):
        with pytest.raises(TypeError):
            inp.try_get(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        out.put("1", "x")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        out.put(1.0, "x")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        t.set_virtual_time("5")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        inp.consume(None)  # type: ignore[arg-type]


def test_timestamps_out_of_range_are_refused(rt: sp.Runtime) -> None:
    ch = rt.channel()
    t = rt.task(0)
    out, inp = t.attach_output(ch), t.attach_input(ch)
    for huge in (2**63, -(2**63) - 1, 2**100):
        with pytest.raises((sp.InvalidArgument, OverflowError)):
            out.put(huge, "x")
        with pytest.raises((sp.InvalidArgument, OverflowError)):
            inp.try_get(huge)
        with pytest.raises((sp.InvalidArgument, OverflowError)):
            t.set_virtual_time(huge)
    assert len(ch) == 0


def test_containers_of_the_wrong_kind_are_type_errors(rt: sp.Runtime) -> None:
    t = rt.task(0)
    for bad in (object(), "channel", None, rt):
        with pytest.raises(TypeError):
            t.attach_input(bad)  # type: ignore[call-overload]
        with pytest.raises(TypeError):
            t.attach_output(bad)  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        sp.Correlator([object()])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        sp.Correlator([t.attach_input(rt.queue())])  # type: ignore[list-item]


def test_callbacks_must_be_callable(rt: sp.Runtime) -> None:
    ch = rt.channel()
    with pytest.raises(TypeError):
        ch.on_arrival(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ch.on_garbage("not callable")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        rt.task(0).pacer(0.01, on_late=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        sp.register_type("not a class", "tests.errors.bad", bytes, bytes)  # type: ignore[arg-type]


def test_bad_runtime_and_task_arguments(rt: sp.Runtime) -> None:
    with pytest.raises(sp.InvalidArgument):
        sp.Runtime(gc_interval=-1.0)
    with pytest.raises(TypeError):
        rt.channel(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        rt.task("zero")  # type: ignore[arg-type]
    with pytest.raises((sp.InvalidArgument, OverflowError)):
        rt.channel(zone=-1)
    with pytest.raises((sp.InvalidArgument, OverflowError)):
        rt.channel().arrivals(-1)


def test_errors_are_printable(rt: sp.Runtime) -> None:
    out = rt.task(5).attach_output(rt.channel())
    with pytest.raises(sp.BelowVisibility) as e:
        out.put(4, "x")
    text = str(e.value)
    assert "4" in text and "5" in text
    assert "BelowVisibility" in repr(e.value)
