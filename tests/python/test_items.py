"""Items: bytes and str shared as they are, numpy arrays as read-only zero-copy views, other
objects pickled, user types with marshal hooks, type tags (mirrors tests/items.rs)."""

from __future__ import annotations

import dataclasses
import gc
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import stampede as sp
from _support import LONG

NATIVE_DTYPES = [
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
]


@dataclasses.dataclass
class Pipe:
    """Two channels with a producer output and a consumer input each."""

    rt: sp.Runtime
    ch: sp.Channel
    out: sp.ChannelOutput
    inp: sp.ChannelInput
    other: sp.Channel
    other_out: sp.ChannelOutput
    other_inp: sp.ChannelInput

    def round_trip(self, value: object, ts: int = 0) -> Any:
        self.out.put(ts, value)
        return self.inp.get(ts, timeout=LONG)[1]


@pytest.fixture
def pipe(rt: sp.Runtime) -> Iterator[Pipe]:
    ch = rt.channel()
    other = rt.channel()
    p = rt.task(0)
    c = rt.task(sp.INFINITY)
    yield Pipe(
        rt,
        ch,
        p.attach_output(ch),
        c.attach_input(ch),
        other,
        p.attach_output(other),
        c.attach_input(other),
    )


def fnv1a(name: str) -> int:
    h = 0xCBF29CE484222325
    for b in name.encode():
        h ^= b
        h = (h * 0x100000001B3) % 2**64
    return h


# ---------------------------------------------------------------------------------------
# bytes and str
# ---------------------------------------------------------------------------------------


def test_bytes_and_str_come_back_as_the_same_object(pipe: Pipe) -> None:
    raw = b"\x00\x01\xfe\xff raw"
    text = "héllo, wörld"
    assert pipe.round_trip(raw, 0) is raw
    assert pipe.round_trip(text, 1) is text
    # Every get returns the same object.
    assert pipe.inp.get(0, timeout=LONG)[1] is raw
    empty = b""
    assert pipe.round_trip(empty, 2) is empty


def test_bytes_and_str_in_queues_and_registers(rt: sp.Runtime) -> None:
    q = rt.queue()
    reg = rt.register()
    t = rt.task(0)
    qout, qin = t.attach_output(q), t.attach_input(q)
    w, r = t.attach_output(reg), t.attach_input(reg)
    raw, text = b"job", "result"
    qout.put(0, raw)
    assert qin.get(timeout=LONG).value is raw
    w.write(text)
    assert r.read(timeout=LONG)[1] is text
    assert reg.peek() == (1, text)


def test_bytearray_is_copied_in(pipe: Pipe) -> None:
    buf = bytearray(b"abc")
    pipe.out.put(0, buf)
    buf[0] = ord("X")
    got = pipe.inp.get(0, timeout=LONG)[1]
    assert bytes(got) == b"abc"


# ---------------------------------------------------------------------------------------
# numpy arrays
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", NATIVE_DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (7,), (2, 3), (2, 3, 4)])
def test_arrays_keep_dtype_shape_and_values(
    pipe: Pipe, dtype: str, shape: tuple[int, ...]
) -> None:
    size = int(np.prod(shape))
    a = (np.arange(size) % 5).astype(dtype).reshape(shape)
    got = pipe.round_trip(a)
    assert isinstance(got, np.ndarray)
    assert got.dtype == np.dtype(dtype)
    assert got.shape == shape
    assert np.array_equal(got, a)
    assert not got.flags.writeable


def test_a_gotten_array_is_a_read_only_view_of_the_item(pipe: Pipe) -> None:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    pipe.out.put(0, a)
    _, x = pipe.inp.get(0, timeout=LONG)
    _, y = pipe.inp.get(0, timeout=LONG)
    assert not x.flags.writeable and not y.flags.writeable
    # Both views share the stored item's memory: no copy at get.
    assert np.shares_memory(x, y)
    with pytest.raises(ValueError):
        x[0, 0] = 99.0
    with pytest.raises(ValueError):
        x.flags.writeable = True
    assert np.array_equal(y, np.arange(12, dtype=np.float32).reshape(3, 4))


def test_a_writable_array_is_copied_at_put(pipe: Pipe) -> None:
    a = np.arange(6, dtype=np.int64)
    pipe.out.put(0, a)
    a[:] = -1  # the caller may reuse its buffer
    got = pipe.inp.get(0, timeout=LONG)[1]
    assert np.array_equal(got, np.arange(6))
    assert not np.shares_memory(got, a)


def test_a_read_only_array_of_the_caller_is_still_copied_in(pipe: Pipe) -> None:
    """Only arrays that are views of stored items may be shared: a caller's read-only array
    can be made writable again (or is a view of a writable base), so copy-in needs a copy."""
    owned = np.arange(8, dtype=np.int32)
    owned.flags.writeable = False
    base = np.arange(8, dtype=np.int32)
    view = base[:]
    view.flags.writeable = False
    pipe.out.put(0, owned)
    pipe.out.put(1, view)
    owned.flags.writeable = True
    owned[:] = -1
    base[:] = -2
    assert np.array_equal(pipe.inp.get(0, timeout=LONG)[1], np.arange(8))
    assert np.array_equal(pipe.inp.get(1, timeout=LONG)[1], np.arange(8))


def test_putting_a_gotten_array_does_not_copy(pipe: Pipe) -> None:
    frame = np.arange(1 << 16, dtype=np.uint8)
    pipe.out.put(0, frame)
    _, got = pipe.inp.get(0, timeout=LONG)
    # A tracker passes the frame on under the same timestamp: no copy.
    pipe.other_out.put(0, got)
    _, again = pipe.other_inp.get(0, timeout=LONG)
    assert np.shares_memory(again, got)
    assert not again.flags.writeable
    assert np.array_equal(again, frame)


def test_slices_and_reshapes_of_a_gotten_array_store_exactly_their_values(pipe: Pipe) -> None:
    pipe.out.put(0, np.arange(12, dtype=np.int64).reshape(3, 4))
    _, got = pipe.inp.get(0, timeout=LONG)
    pieces = [got[1:], got[:, 1:3], got.T, got.reshape(4, 3), got[1], got.ravel()[5:7]]
    for ts, piece in enumerate(pieces):
        pipe.other_out.put(ts, piece)
        stored = pipe.other_inp.get(ts, timeout=LONG)[1]
        assert stored.shape == piece.shape
        assert np.array_equal(stored, piece)


def test_the_view_stays_valid_after_reclamation(rt: sp.Runtime) -> None:
    ch = rt.channel()
    p = rt.task(0)
    c = rt.task(sp.INFINITY)
    out, inp = p.attach_output(ch), c.attach_input(ch)
    out.put(0, np.full(4096, 7, dtype=np.int32))
    out.put(1, "keeps the horizon above 0")
    _, got = inp.get(0, timeout=LONG)
    inp.consume_until(1)
    p.set_virtual_time(5)
    assert rt.collect() == 2
    assert len(ch) == 0, "the item was reclaimed"
    out.put(5, np.zeros(4096, dtype=np.int32))  # may reuse freed memory
    gc.collect()
    assert (got == 7).all()


def test_non_contiguous_arrays_are_stored_as_c_contiguous_copies(pipe: Pipe) -> None:
    base = np.arange(24, dtype=np.int16).reshape(4, 6)
    strided = base[:, ::2]
    transposed = base.T
    fortran = np.asfortranarray(base)
    for ts, a in enumerate([strided, transposed, fortran]):
        got = pipe.round_trip(a, ts)
        assert got.flags.c_contiguous
        assert got.shape == a.shape
        assert got.dtype == a.dtype
        assert np.array_equal(got, a)
        assert not np.shares_memory(got, base)
    base[:] = 0
    assert np.array_equal(pipe.inp.get(0, timeout=LONG)[1], np.arange(24).reshape(4, 6)[:, ::2])


def test_non_native_byte_order_keeps_its_values(pipe: Pipe) -> None:
    a = np.arange(5, dtype=">i4")
    got = pipe.round_trip(a)
    assert np.array_equal(got, np.arange(5))
    assert got.dtype.kind == "i" and got.dtype.itemsize == 4


@pytest.mark.parametrize(
    "array",
    [
        np.array([1 + 2j, 3 - 4j]),
        np.array(["a", "bc"]),
        np.array([{"x": 1}, None], dtype=object),
        np.array([(1, 2.5), (3, 4.5)], dtype=[("a", "i4"), ("b", "f8")]),
        np.array(["2024-01-01", "2024-02-01"], dtype="datetime64[D]"),
    ],
    ids=["complex", "unicode", "object", "structured", "datetime"],
)
def test_arrays_of_other_dtypes_are_pickled(pipe: Pipe, array: npt.NDArray[Any]) -> None:
    original = array.copy()
    pipe.out.put(0, array)
    array[...] = array[::-1].copy()  # after the put: not seen
    _, x = pipe.inp.get(0, timeout=LONG)
    _, y = pipe.inp.get(0, timeout=LONG)
    assert x.dtype == original.dtype
    assert x.tolist() == original.tolist()
    # Each get unpickles a fresh copy.
    assert x is not y
    assert not np.shares_memory(x, y)


def test_arrays_in_queues_are_read_only_views_too(rt: sp.Runtime) -> None:
    q = rt.queue()
    t = rt.task(0)
    out, inp = t.attach_output(q), t.attach_input(q)
    a = np.ones((2, 2), dtype=np.float32)
    out.put(0, a)
    got = inp.get(timeout=LONG).value
    assert not got.flags.writeable
    assert np.array_equal(got, a)
    assert not np.shares_memory(got, a)


def test_a_failed_put_hands_the_array_back(pipe: Pipe) -> None:
    pipe.out.put(0, "first")
    a = np.zeros(3)
    with pytest.raises(sp.DuplicateTimestamp) as e:
        pipe.out.put(0, a)
    assert e.value.item is a


# ---------------------------------------------------------------------------------------
# Pickled objects
# ---------------------------------------------------------------------------------------


@dataclasses.dataclass
class Track:
    ts: int
    boxes: list[tuple[int, int, int, int]]


@pytest.mark.parametrize(
    "value",
    [
        {"a": 1, "b": [1, 2, 3]},
        [1, "two", 3.0, None],
        (1, (2, 3)),
        {1, 2, 3},
        12345678901234567890,
        -1.5,
        None,
        True,
        Track(3, [(1, 2, 3, 4)]),
        np.float32(1.5),
    ],
    ids=lambda v: type(v).__name__,
)
def test_other_objects_round_trip_by_pickling(pipe: Pipe, value: object) -> None:
    got = pipe.round_trip(value)
    assert type(got) is type(value)
    assert got == value


def test_a_pickled_item_is_a_snapshot_and_every_get_a_fresh_copy(pipe: Pipe) -> None:
    value = {"boxes": [1, 2]}
    pipe.out.put(0, value)
    value["boxes"].append(3)
    value["new"] = []
    _, x = pipe.inp.get(0, timeout=LONG)
    _, y = pipe.inp.get(0, timeout=LONG)
    assert x == {"boxes": [1, 2]}
    assert x is not y and x["boxes"] is not y["boxes"]
    x["boxes"].append(99)
    assert pipe.inp.get(0, timeout=LONG)[1] == {"boxes": [1, 2]}


def test_an_unpicklable_object_makes_the_put_fail_and_stores_nothing(
    rt: sp.Runtime, pipe: Pipe
) -> None:
    lock = threading.Lock()
    with pytest.raises(sp.MarshalError):
        pipe.out.put(0, lock)
    with pytest.raises(sp.MarshalError):
        pipe.out.try_put(0, {"handler": lambda: None})
    assert isinstance(sp.MarshalError("x"), TypeError)
    assert pipe.ch.timestamps() == []
    # Nothing was stored, so the timestamp is still free.
    pipe.out.put(0, "fine")
    assert pipe.inp.get(0, timeout=LONG)[1] == "fine"

    q = rt.queue()
    reg = rt.register()
    t = rt.task(0)
    with pytest.raises(sp.MarshalError):
        t.attach_output(q).put(0, lock)
    assert len(q) == 0
    with pytest.raises(sp.MarshalError):
        t.attach_output(reg).write(lock)
    assert reg.peek() is None


class Exploding:
    def __reduce__(self) -> tuple[Any, ...]:
        raise RuntimeError("cannot pickle me")


def test_an_exception_while_pickling_is_a_marshal_error(pipe: Pipe) -> None:
    with pytest.raises(sp.MarshalError):
        pipe.out.put(0, Exploding())
    assert len(pipe.ch) == 0


# ---------------------------------------------------------------------------------------
# User types and type tags
# ---------------------------------------------------------------------------------------


class Point:
    marshals = 0
    unmarshals = 0

    def __init__(self, x: int, y: int) -> None:
        self.x, self.y = x, y

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Point) and (self.x, self.y) == (other.x, other.y)

    def __hash__(self) -> int:
        return hash((self.x, self.y))


class SubPoint(Point):
    pass


def marshal_point(p: Point) -> bytes:
    Point.marshals += 1
    return p.x.to_bytes(4, "little", signed=True) + p.y.to_bytes(4, "little", signed=True)


def unmarshal_point(data: bytes) -> Point:
    Point.unmarshals += 1
    if len(data) != 8:
        raise ValueError(f"a point is 8 bytes, not {len(data)}")
    return Point(
        int.from_bytes(data[:4], "little", signed=True),
        int.from_bytes(data[4:], "little", signed=True),
    )


_point_tag = sp.register_type(Point, "tests.python.point", marshal_point, unmarshal_point)


def test_register_type_returns_the_tag_of_its_name() -> None:
    assert _point_tag == sp.type_tag("tests.python.point")


def test_registered_types_use_their_hooks(pipe: Pipe) -> None:
    before = (Point.marshals, Point.unmarshals)
    p = Point(3, -4)
    pipe.out.put(0, p)
    assert Point.marshals > before[0], "marshalled at put"
    p.x = 100  # after the put: not seen
    got = pipe.inp.get(0, timeout=LONG)[1]
    assert type(got) is Point
    assert got == Point(3, -4)
    assert got is not p
    assert Point.unmarshals > before[1], "unmarshalled at get"


def test_hooks_apply_to_exactly_the_registered_class(pipe: Pipe) -> None:
    before = Point.marshals
    sub = SubPoint(1, 2)
    got = pipe.round_trip(sub)
    assert Point.marshals == before, "a subclass is pickled, not marshalled by Point's hook"
    assert type(got) is SubPoint and got == sub


class Badly:
    pass


def test_marshal_hook_errors_fail_the_put_and_unmarshal_errors_fail_the_get(
    pipe: Pipe,
) -> None:
    sp.register_type(Badly, "tests.python.badly", lambda b: "not bytes", lambda d: Badly())  # type: ignore[arg-type, return-value]
    with pytest.raises(sp.MarshalError):
        pipe.out.put(0, Badly())
    assert len(pipe.ch) == 0

    class Fragile:
        pass

    def refuse(data: bytes) -> Fragile:
        raise ValueError("corrupt")

    sp.register_type(Fragile, "tests.python.fragile", lambda f: b"x", refuse)
    pipe.out.put(1, Fragile())
    with pytest.raises(sp.MarshalError):
        pipe.inp.get(1, timeout=LONG)


@pytest.mark.parametrize(
    "name,tag",
    [("", 0xCBF29CE484222325), ("a", 0xAF63DC4C8601EC8C), ("foobar", 0x85944171F73967E8)],
)
def test_type_tags_are_fnv1a_of_the_name(name: str, tag: int) -> None:
    assert sp.type_tag(name) == tag


@pytest.mark.parametrize(
    "name", ["stampede.bytes", "stampede.utf8", "stampede.ndarray", "video/frame", "héllo"]
)
def test_type_tag_matches_a_python_fnv1a(name: str) -> None:
    assert sp.type_tag(name) == fnv1a(name)
    assert 0 <= sp.type_tag(name) < 2**64
