"""Temporal correlation: exact matches, matches within a tolerance, skipped counting and
closed inputs (mirrors tests/correlate.rs)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator

import pytest

import stampede as sp
from _support import LONG, UNCONSUMED, Background, stamps


@dataclasses.dataclass
class Setup:
    rt: sp.Runtime
    chans: list[sp.Channel]
    outs: list[sp.ChannelOutput]
    sink: sp.Task
    inputs: list[sp.ChannelInput]

    def correlator(self, within: int | None = None) -> sp.Correlator:
        return sp.Correlator(self.inputs, within=within)


def make(rt: sp.Runtime, n: int) -> Setup:
    chans = [rt.channel() for _ in range(n)]
    src = rt.task(0)
    sink = rt.task(sp.INFINITY)
    return Setup(
        rt,
        chans,
        [src.attach_output(c) for c in chans],
        sink,
        [sink.attach_input(c) for c in chans],
    )


@pytest.fixture
def two(auto_rt: sp.Runtime) -> Iterator[Setup]:
    yield make(auto_rt, 2)


@pytest.fixture
def three(auto_rt: sp.Runtime) -> Iterator[Setup]:
    yield make(auto_rt, 3)


def test_exact_match_delivers_sets_in_timestamp_order(two: Setup) -> None:
    corr = two.correlator()
    for ts in (1, 2, 3):
        two.outs[0].put(ts, f"v{ts}")
    for ts in (3, 2):
        two.outs[1].put(ts, f"a{ts}")
    s = corr.try_get()
    # Video 1 has no partner, and audio has moved past it: skipped.
    assert (s.ts, stamps(s.items)) == (2, [2, 2])
    assert [v for _, v in s.items] == ["v2", "a2"]
    s = corr.try_get()
    assert (s.ts, stamps(s.items)) == (3, [3, 3])
    assert corr.skipped == 1
    with pytest.raises(sp.Unavailable):
        corr.try_get()


def test_exact_match_waits_for_a_missing_partner(three: Setup) -> None:
    corr = three.correlator()
    three.outs[0].put(5, "a")
    three.outs[1].put(5, "b")
    with pytest.raises(sp.Unavailable):
        corr.try_get()
    start = time.monotonic()
    with pytest.raises(sp.Timeout):
        corr.get(timeout=0.03)
    assert time.monotonic() - start >= 0.029
    assert corr.skipped == 0, "a pending item is not skipped"
    getter = Background(lambda: corr.get(timeout=LONG))
    getter.started.wait(LONG)
    three.outs[2].put(5, "c")
    s = getter.result()
    assert (s.ts, [v for _, v in s.items]) == (5, ["a", "b", "c"])


def test_within_tolerance_picks_the_nearest_and_the_older_on_a_tie(three: Setup) -> None:
    corr = three.correlator(within=2)
    three.outs[0].put(10, "frame")
    for ts in (8, 11, 12):
        three.outs[1].put(ts, str(ts))
    for ts in (9, 11):
        three.outs[2].put(ts, str(ts))
    s = corr.try_get()
    # Input 1: 11 is nearest. Input 2: 9 and 11 tie; the older wins.
    assert (s.ts, stamps(s.items)) == (10, [10, 11, 9])
    assert [v for _, v in s.items] == ["frame", "11", "9"]


def test_within_tolerance_never_reuses_an_item(two: Setup) -> None:
    corr = two.correlator(within=3)
    two.outs[0].put(10, "f10")
    two.outs[0].put(11, "f11")
    two.outs[1].put(10, "a10")
    assert stamps(corr.try_get().items) == [10, 10]
    # 11 could only match audio 10, which is taken: wait for a newer one.
    with pytest.raises(sp.Unavailable):
        corr.try_get()
    two.outs[1].put(13, "a13")
    assert stamps(corr.try_get().items) == [11, 13]


def test_items_outside_the_tolerance_are_skipped_and_counted(two: Setup) -> None:
    corr = two.correlator(within=1)
    for ts in (0, 10, 20, 30):
        two.outs[0].put(ts, str(ts))
    for ts in (5, 21, 40):
        two.outs[1].put(ts, str(ts))
    assert stamps(corr.try_get().items) == [20, 21]
    assert corr.skipped == 2, "0 and 10 cannot be matched any more"
    # 30: the other input has 40 beyond the window, so it can never match.
    with pytest.raises(sp.Unavailable):
        corr.try_get()
    assert corr.skipped == 3


def test_the_correlator_takes_over_its_inputs(two: Setup) -> None:
    corr = two.correlator()
    assert all(i.detached for i in two.inputs)
    with pytest.raises(sp.Detached):
        two.inputs[0].try_get(sp.OLDEST)
    # The connections themselves live on inside the correlator.
    assert two.chans[0].stats().connections == 1
    two.outs[0].put(1, "v")
    two.outs[1].put(1, "a")
    assert stamps(corr.try_get().items) == [1, 1]


def test_consume_marks_exactly_the_matched_items(two: Setup) -> None:
    ids = [i.id for i in two.inputs]
    corr = two.correlator()
    other = two.sink.attach_input(two.chans[0])
    for ts in (1, 2):
        two.outs[0].put(ts, "v")
        two.outs[1].put(ts, "a")
    first = corr.try_get()
    second = corr.try_get()
    # The matched items are open on the correlator's inputs.
    assert two.sink.visibility == 1
    assert [c.stats().open for c in two.chans] == [2, 2]
    corr.consume(second)
    assert [c.stats().open for c in two.chans] == [1, 1]
    assert two.sink.visibility == 1

    def unconsumed() -> dict[int, int]:
        """The oldest item not consumed on each of the correlator's connections."""
        return {
            h.connection: h.ts
            for h in two.rt.explain().holds
            if h.cause == UNCONSUMED and h.connection in ids
        }

    assert unconsumed() == {ids[0]: 1, ids[1]: 1}
    corr.consume_until(first)
    assert [c.stats().open for c in two.chans] == [0, 0]
    assert unconsumed() == {}
    assert two.sink.visibility == sp.INFINITY
    # Other connections are unaffected.
    assert other.try_get(1)[0] == 1
    assert other.try_get(2)[0] == 2


def test_a_closed_reference_input_ends_the_correlation(two: Setup) -> None:
    corr = two.correlator()
    two.outs[0].put(1, "v")
    two.outs[1].put(1, "a")
    two.chans[0].close()
    # What is left is still delivered, then Closed.
    assert stamps(corr.try_get().items) == [1, 1]
    with pytest.raises(sp.Closed):
        corr.try_get()
    with pytest.raises(sp.Closed):
        corr.get(timeout=LONG)


def test_a_closed_partner_input_skips_what_it_can_no_longer_match(two: Setup) -> None:
    corr = two.correlator()
    two.outs[0].put(1, "v")
    two.outs[0].put(2, "v")
    two.outs[1].put(2, "a")
    two.chans[1].close()
    assert stamps(corr.try_get().items) == [2, 2]
    assert corr.skipped == 1
    two.outs[0].put(3, "v")
    with pytest.raises(sp.Unavailable):
        corr.try_get()
    assert corr.skipped == 2
    two.chans[0].close()
    with pytest.raises(sp.Closed):
        corr.try_get()


def test_closing_a_channel_wakes_a_waiting_correlator(two: Setup) -> None:
    corr = two.correlator()
    getter = Background(lambda: corr.get(timeout=LONG))
    getter.started.wait(LONG)
    two.chans[0].close()
    assert isinstance(getter.error(), sp.Closed)


def test_closing_the_correlator_detaches_its_inputs(two: Setup) -> None:
    corr = two.correlator()
    assert two.chans[0].stats().connections == 1
    corr.close()
    two.outs[0].put(1, "v")
    assert two.chans[0].stats().connections == 0
    assert two.chans[1].stats().connections == 0


def test_a_single_input_correlates_with_itself(auto_rt: sp.Runtime) -> None:
    one = make(auto_rt, 1)
    corr = one.correlator(within=5)
    one.outs[0].put(4, "x")
    s = corr.get(timeout=LONG)
    assert (s.ts, s.items) == (4, [(4, "x")])


def test_a_correlator_needs_at_least_one_input() -> None:
    with pytest.raises(sp.InvalidArgument):
        sp.Correlator([])


def test_a_negative_tolerance_is_invalid(two: Setup) -> None:
    with pytest.raises(sp.InvalidArgument):
        two.correlator(within=-1)
