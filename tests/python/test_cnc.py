"""Concurrent Collections from Python: collections, both scheduling modes, get-counts, and
every way a graph fails."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stampede as sp
from stampede import cnc

Tag = tuple[int | str, ...]


def test_tags_arrive_as_tuples_of_ints_and_strings() -> None:
    g = cnc.Graph(cnc.Executor(2))
    seen = g.items("seen")
    tags = g.tags("tags")

    def record(ctx: cnc.StepContext, tag: Tag) -> None:
        assert ctx.tag == tag
        ctx.put(seen, tag, tag)

    tags.prescribes(g.steps("record", record))
    g.put_tag(tags, 3)
    g.put_tag(tags, "cam")
    g.put_tag(tags, (1, "left", -2))
    g.wait()
    assert g.get(seen, 3) == (3,)
    assert g.get(seen, ("cam",)) == ("cam",)
    assert g.get(seen, (1, "left", -2)) == (1, "left", -2)
    assert g.get(seen, 4) is None
    assert len(seen) == 3 and len(tags) == 3


def test_a_tag_put_twice_prescribes_once_unless_not_memoized() -> None:
    g = cnc.Graph(cnc.Executor(1))
    runs = {"memo": 0, "plain": 0}
    lock = threading.Lock()

    def counter(key: str) -> Callable[[cnc.StepContext, Tag], None]:
        def step(ctx: cnc.StepContext, tag: Tag) -> None:
            with lock:
                runs[key] += 1

        return step

    memo, plain = g.tags("memo"), g.tags("plain", memoize=False)
    memo.prescribes(g.steps("m", counter("memo")))
    plain.prescribes(g.steps("p", counter("plain")))
    for _ in range(3):
        g.put_tag(memo, 1)
        g.put_tag(plain, 1)
    g.wait()
    assert runs == {"memo": 1, "plain": 3}


def chain(g: cnc.Graph, tuned: bool, n: int) -> tuple[cnc.ItemCollection, dict[Tag, int]]:
    """x[i] = x[i-1] + i, with the tags put in reverse so untuned steps suspend."""
    x = g.items("x")
    ids = g.tags("ids")
    runs: dict[Tag, int] = {}
    lock = threading.Lock()

    def step(ctx: cnc.StepContext, tag: Tag) -> None:
        (i,) = tag
        assert isinstance(i, int)
        with lock:
            runs[tag] = runs.get(tag, 0) + 1
        ctx.put(x, i, ctx.get(x, i - 1) + i)

    s = g.steps("add", step)
    if tuned:
        s.depends(lambda tag: [(x, int(tag[0]) - 1)])
    ids.prescribes(s)
    for i in reversed(range(1, n)):
        g.put_tag(ids, i)
    g.put(x, 0, 0)
    return x, runs


@pytest.mark.parametrize("tuned", [False, True])
def test_suspended_and_tuned_steps_compute_the_same(tuned: bool) -> None:
    g = cnc.Graph(cnc.Executor(2))
    x, runs = chain(g, tuned, 200)
    g.wait()
    assert [g.get(x, i) for i in range(200)] == [i * (i + 1) // 2 for i in range(200)]
    if tuned:
        assert set(runs.values()) == {1}, "a tuned step never runs twice"
    else:
        assert max(runs.values()) >= 2, "tags put in reverse make untuned steps suspend"


def test_the_environment_putting_an_item_twice_fails_the_graph() -> None:
    g = cnc.Graph(cnc.Executor(1))
    x = g.items("x")
    g.put(x, 1, b"a")
    g.put(x, 1, b"b")
    with pytest.raises(cnc.DuplicatePut) as e:
        g.wait()
    assert (e.value.collection, e.value.tag, e.value.by) == ("x", (1,), "environment")
    assert isinstance(e.value, sp.StampedeError)
    assert g.get(x, 1) == b"a", "the first value stays"


def test_a_step_putting_an_item_twice_fails_the_graph_with_its_name() -> None:
    g = cnc.Graph(cnc.Executor(2))
    x, ids = g.items("x"), g.tags("ids")

    def clash(ctx: cnc.StepContext, tag: Tag) -> None:
        ctx.put(x, 0, tag)

    ids.prescribes(g.steps("clash", clash))
    g.put_tag(ids, 1)
    g.put_tag(ids, 2)
    with pytest.raises(cnc.DuplicatePut) as e:
        g.wait()
    assert e.value.by == "clash" and e.value.tag == (0,)


def test_items_are_freed_after_their_declared_gets() -> None:
    g = cnc.Graph(cnc.Executor(2))
    x, out, ids = g.items("x"), g.items("out"), g.tags("ids")

    def use(ctx: cnc.StepContext, tag: Tag) -> None:
        ctx.put(out, tag, ctx.get(x, 0) * 2)

    ids.prescribes(g.steps("use", use))
    g.put(x, 0, 21, gets=3)
    for i in range(3):
        g.put_tag(ids, i)
    g.wait()
    assert [g.get(out, i) for i in range(3)] == [42, 42, 42]
    assert g.get(x, 0) is None and len(x) == 0


def test_a_get_past_the_declared_count_fails_the_graph() -> None:
    g = cnc.Graph(cnc.Executor(1))
    x, ids = g.items("x"), g.tags("ids")
    ids.prescribes(g.steps("use", lambda ctx, tag: ctx.get(x, 0)))
    g.put(x, 0, 1, gets=1)
    g.put_tag(ids, 1)
    g.put_tag(ids, 2)
    with pytest.raises(cnc.FreedItem) as e:
        g.wait()
    assert (e.value.collection, e.value.tag, e.value.step) == ("x", (0,), "use")


def test_gets_must_be_positive() -> None:
    g = cnc.Graph(cnc.Executor(1))
    with pytest.raises(sp.InvalidArgument):
        g.put(g.items("x"), 0, 1, gets=0)


def test_a_step_that_raises_fails_the_graph_with_step_tag_and_cause() -> None:
    g = cnc.Graph(cnc.Executor(2))
    ids = g.tags("ids")

    def fragile(ctx: cnc.StepContext, tag: Tag) -> None:
        if tag == (7,):
            raise ValueError("seven is unlucky")

    ids.prescribes(g.steps("fragile", fragile))
    for i in range(10):
        g.put_tag(ids, i)
    with pytest.raises(cnc.StepFailed) as e:
        g.wait()
    assert (e.value.step, e.value.tag) == ("fragile", (7,))
    assert "ValueError: seven is unlucky" in e.value.reason
    assert isinstance(e.value.__cause__, ValueError)


def test_a_graph_waiting_for_items_nobody_puts_reports_a_deadlock() -> None:
    g = cnc.Graph(cnc.Executor(2))
    x, y, ids = g.items("x"), g.items("y"), g.tags("ids")

    def step(ctx: cnc.StepContext, tag: Tag) -> None:
        ctx.put(y, tag, ctx.get(x, tag))

    ids.prescribes(g.steps("copy", step))
    g.put(x, 1, "one")
    for i in range(3):
        g.put_tag(ids, i)
    with pytest.raises(cnc.Deadlock) as e:
        g.wait(timeout=10)
    unmet = sorted(e.value.unmet)
    assert [(u.collection, u.tag) for u in unmet] == [("x", (0,)), ("x", (2,))]
    assert unmet[0].waiting == [("copy", (0,))]
    assert g.get(y, 1) == "one"


def test_a_tuned_graph_reports_the_same_deadlock() -> None:
    g = cnc.Graph(cnc.Executor(1))
    x, ids = g.items("x"), g.tags("ids")
    s = g.steps("never", lambda ctx, tag: None, depends=lambda tag: [(x, tag)])
    ids.prescribes(s)
    g.put_tag(ids, 5)
    with pytest.raises(cnc.Deadlock) as e:
        g.wait(timeout=10)
    assert e.value.unmet == [cnc.Unmet("x", (5,), [("never", (5,))])]


def test_a_depends_function_that_raises_is_reported() -> None:
    g = cnc.Graph(cnc.Executor(1))
    ids = g.tags("ids")

    def bad(tag: Tag) -> list[tuple[cnc.ItemCollection, cnc.Tag]]:
        raise KeyError("no inputs")

    ids.prescribes(g.steps("s", lambda ctx, tag: None, depends=bad))
    g.put_tag(ids, 1)
    with pytest.raises(cnc.StepFailed) as e:
        g.wait()
    assert e.value.step == "s" and "depends" in e.value.reason
    assert isinstance(e.value.__cause__, KeyError)


def test_wait_times_out_while_steps_run() -> None:
    g = cnc.Graph(cnc.Executor(1))
    ids = g.tags("ids")
    release = threading.Event()
    ids.prescribes(g.steps("slow", lambda ctx, tag: release.wait(10)))
    g.put_tag(ids, 1)
    with pytest.raises(sp.Timeout):
        g.wait(timeout=0.2)
    release.set()
    g.wait()


def test_arrays_come_back_as_read_only_views() -> None:
    g = cnc.Graph(cnc.Executor(2))
    tiles, ids = g.items("tiles"), g.tags("ids")

    def double(ctx: cnc.StepContext, tag: Tag) -> None:
        a = ctx.get(tiles, (0, *tag))
        assert isinstance(a, np.ndarray) and not a.flags.writeable
        ctx.put(tiles, (1, *tag), a * 2)

    ids.prescribes(g.steps("double", double))
    src = np.arange(12.0).reshape(3, 4)
    for i in range(4):
        g.put(tiles, (0, i), src + i)
    src[:] = -1  # the put copied the caller's writable array
    for i in range(4):
        g.put_tag(ids, i)
    g.wait()
    for i in range(4):
        np.testing.assert_array_equal(g.get(tiles, (1, i)), (np.arange(12.0).reshape(3, 4) + i) * 2)


def test_a_context_is_only_usable_while_its_step_runs() -> None:
    g = cnc.Graph(cnc.Executor(1))
    x, ids = g.items("x"), g.tags("ids")
    kept: list[cnc.StepContext] = []
    ids.prescribes(g.steps("keep", lambda ctx, tag: kept.append(ctx)))
    g.put_tag(ids, 1)
    g.wait()
    with pytest.raises(sp.InvalidArgument):
        kept[0].put(x, 1, 1)


def test_a_step_that_swallows_its_suspension_still_runs_again() -> None:
    g = cnc.Graph(cnc.Executor(1))
    x, y, ids = g.items("x"), g.items("y"), g.tags("ids")

    def stubborn(ctx: cnc.StepContext, tag: Tag) -> None:
        try:
            v = ctx.get(x, 0)
        except cnc.Suspended:
            v = "default"
        ctx.put(y, 0, v)

    ids.prescribes(g.steps("stubborn", stubborn))
    g.put_tag(ids, 0)
    time.sleep(0.05)
    g.put(x, 0, "real")
    g.wait()
    assert g.get(y, 0) == "real", "only the run that got its item commits"


def test_steps_release_the_gil_inside_kernels_and_run_on_every_worker() -> None:
    ex = cnc.Executor(2)
    ex.tracing = True
    g = cnc.Graph(ex)
    ids = g.tags("ids")
    ids.prescribes(g.steps("sleep", lambda ctx, tag: time.sleep(0.05)))
    for i in range(6):
        g.put_tag(ids, i)
    g.wait()
    trace = ex.take_trace()
    assert len(trace) == 6 and {e.worker for e in trace} == {0, 1}
    assert all(e.step == "sleep" and e.end >= e.start for e in trace)
    overlapping = any(
        a.worker != b.worker and a.start < b.end and b.start < a.end
        for a in trace
        for b in trace
    )
    assert overlapping, "two workers ran steps at the same time"
    assert ex.take_trace() == []


def test_high_priority_instances_run_before_queued_normal_ones() -> None:
    ex = cnc.Executor(1)
    ex.tracing = True
    g = cnc.Graph(ex)
    gate, work = g.tags("gate"), g.tags("work")
    release = threading.Event()
    gate.prescribes(g.steps("gate", lambda ctx, tag: release.wait(10)))
    work.prescribes(g.steps("work", lambda ctx, tag: None, priority=lambda tag: tag[0] == 99))
    g.put_tag(gate, 0)
    time.sleep(0.05)  # the only worker is now held by the gate
    for i in [*range(10), 99]:
        g.put_tag(work, i)
    release.set()
    g.wait()
    order = [e.tag for e in ex.take_trace() if e.step == "work"]
    assert order[0] == "(99)", order


def test_graphs_share_the_default_executor() -> None:
    a, b = cnc.Graph(), cnc.Graph()
    assert a.executor.workers == b.executor.workers >= 1


def test_bad_tags_and_bad_values_are_typed_errors() -> None:
    g = cnc.Graph(cnc.Executor(1))
    x, ids = g.items("x"), g.tags("ids")
    with pytest.raises(sp.InvalidArgument):
        g.put_tag(ids, 1.5)  # type: ignore[arg-type]
    with pytest.raises(sp.InvalidArgument):
        g.put(x, (1, [2]), 0)  # type: ignore[arg-type]
    with pytest.raises(sp.InvalidArgument):
        g.put(x, 2**70, 0)
    with pytest.raises(sp.MarshalError):
        g.put(x, 1, lambda: None)
    with pytest.raises(sp.InvalidArgument):
        cnc.Executor(0)
    g.wait()


# Random DAGs: node i sums the values of its parents (all lower-numbered) plus i. The graph
# computes them with tags put in a shuffled order; a sequential evaluation is the reference.
@settings(max_examples=25, deadline=None)
@given(
    parents=st.lists(st.lists(st.integers(0, 1000), max_size=3), min_size=1, max_size=40),
    order=st.randoms(use_true_random=False),
    tuned=st.booleans(),
)
def test_random_dags_compute_what_a_sequential_evaluation_does(
    parents: list[list[int]], order: object, tuned: bool
) -> None:
    deps = [sorted({p % i for p in ps}) if i else [] for i, ps in enumerate(parents)]
    expected: list[int] = []
    for i, ds in enumerate(deps):
        expected.append(i + sum(expected[d] for d in ds))

    g = cnc.Graph(cnc.Executor(2))
    v, nodes = g.items("v"), g.tags("nodes")

    def node(ctx: cnc.StepContext, tag: Tag) -> None:
        (i,) = tag
        assert isinstance(i, int)
        ctx.put(v, i, i + sum(ctx.get(v, d) for d in deps[i]))

    s = g.steps("node", node)
    if tuned:
        s.depends(lambda tag: [(v, d) for d in deps[int(tag[0])]])
    nodes.prescribes(s)
    tags = list(range(len(deps)))
    order.shuffle(tags)  # type: ignore[attr-defined]
    for i in tags:
        g.put_tag(nodes, i)
    g.wait(timeout=60)
    assert [g.get(v, i) for i in range(len(deps))] == expected
