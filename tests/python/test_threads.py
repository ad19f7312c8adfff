"""Tasks on threads: spawn and join, producers and consumers, blocking operations released
from other threads, many threads without loss or duplication, and blocking calls that
release the GIL."""

from __future__ import annotations

import functools
import threading
import time
from typing import Any

import numpy as np
import pytest

import stampede as sp
from _support import LONG, Background, wait_pending_put, wait_until


def test_spawn_runs_the_target_with_its_task_and_arguments(rt: sp.Runtime) -> None:
    def target(task: sp.Task, a: int, b: str) -> tuple[str, int, str, str]:
        return task.name, task.virtual_time, f"{a}{b}", threading.current_thread().name

    th = rt.spawn(target, 1, "x", vt=7, name="worker")
    assert isinstance(th, sp.TaskThread)
    name, vt, args, thread_name = th.result(LONG)
    assert (name, vt, args) == ("worker", 7, "1x")
    assert thread_name == "worker"
    assert th.task.exited, "the task exits when its target returns"


def test_result_raises_what_the_target_raised_and_the_task_still_exits(
    rt: sp.Runtime,
) -> None:
    q = rt.queue()
    out = rt.task(0).attach_output(q)
    survivor = rt.task(sp.INFINITY).attach_input(q)
    ticket = out.put(1, "job")

    def crash(task: sp.Task) -> None:
        task.attach_input(q).get(timeout=LONG)
        raise ValueError("worker crashed")

    th = rt.spawn(crash, vt=sp.INFINITY)
    with pytest.raises(ValueError, match="worker crashed"):
        th.result(LONG)
    assert th.task.exited
    # Its held item went back to the queue.
    assert survivor.try_get().ticket == ticket


def test_join_all_waits_for_every_spawned_task(rt: sp.Runtime) -> None:
    done: list[int] = []
    release = threading.Event()

    def worker(task: sp.Task, i: int) -> None:
        assert release.wait(LONG)
        done.append(i)

    threads = [rt.spawn(worker, i) for i in range(4)]
    release.set()
    rt.join_all(LONG)
    assert sorted(done) == [0, 1, 2, 3]
    assert all(not th.is_alive() for th in threads)


def test_join_all_raises_what_a_task_raised(rt: sp.Runtime) -> None:
    def fail(task: sp.Task) -> None:
        raise LookupError("lost frame")

    ok = rt.spawn(lambda task: 42)
    bad = rt.spawn(fail)
    with pytest.raises(LookupError, match="lost frame"):
        rt.join_all(LONG)
    assert ok.result(LONG) == 42
    assert not bad.is_alive() and bad.task.exited


def test_a_three_stage_pipeline_on_threads(rt: sp.Runtime) -> None:
    """digitizer -> frames -> tracker -> results -> this thread, without a background
    collector: blocked puts into the bounded channel make room themselves."""
    n = 200
    frames = rt.channel("frames", capacity=8)
    results = rt.channel("results", capacity=8)
    collector = rt.task(sp.INFINITY)
    results_in = collector.attach_input(results)
    ready = threading.Event()

    def digitizer(task: sp.Task) -> None:
        out = task.attach_output(frames)
        assert ready.wait(LONG)
        for i in range(n):
            out.put(i, np.full(16, i % 256, dtype=np.uint8), timeout=LONG)
            task.set_virtual_time(i + 1)
        frames.close()

    def tracker(task: sp.Task) -> int:
        inp = task.attach_input(frames)
        out = task.attach_output(results)
        task.set_virtual_time(sp.INFINITY)
        ready.set()
        count = 0
        while True:
            try:
                ts, frame = inp.get(sp.NEXT_UNSEEN, timeout=LONG)
            except sp.Closed:
                results.close()
                return count
            assert int(frame[0]) == ts % 256
            out.put(ts, int(frame.sum()), timeout=LONG)  # inherits the frame's timestamp
            inp.consume_until(ts)
            count += 1

    tracker_thread = rt.spawn(tracker, vt=0, name="tracker")
    digitizer_thread = rt.spawn(digitizer, vt=0, name="digitizer")
    got = []
    while True:
        try:
            ts, total = results_in.get(sp.NEXT_UNSEEN, timeout=LONG)
        except sp.Closed:
            break
        got.append((ts, total))
        results_in.consume(ts)
    assert tracker_thread.result(LONG) == n
    digitizer_thread.result(LONG)
    assert got == [(i, 16 * (i % 256)) for i in range(n)]
    assert frames.stats().full == 0 and results.stats().full == 0


def test_a_skipping_tracker_sees_increasing_timestamps(auto_rt: sp.Runtime) -> None:
    rt = auto_rt
    n = 300
    ch = rt.channel(capacity=4)
    tracker = rt.task(0)
    inp = tracker.attach_input(ch)
    tracker.set_virtual_time(sp.INFINITY)

    def digitizer(task: sp.Task) -> None:
        out = task.attach_output(ch)
        for i in range(n):
            out.put(i, i.to_bytes(4, "little"), timeout=LONG)
            task.set_virtual_time(i + 1)
        ch.close()

    producer = rt.spawn(digitizer)
    last = -1
    seen = 0
    while True:
        try:
            ts, frame = inp.get(sp.NEWEST_UNSEEN, timeout=LONG)
        except sp.Closed:
            break
        assert ts > last
        assert int.from_bytes(frame, "little") == ts
        last = ts
        seen += 1
        inp.consume_until(ts)
    producer.result(LONG)
    assert last == n - 1
    stats = ch.stats()
    assert stats.skipped == n - seen, "every frame is either seen or counted as skipped"


def test_many_threads_share_a_queue_without_loss_or_duplication(auto_rt: sp.Runtime) -> None:
    rt = auto_rt
    producers, consumers, per_producer = 4, 4, 150
    q = rt.queue("jobs", capacity=16)
    got: list[tuple[int, int]] = []
    lock = threading.Lock()
    go = threading.Event()

    def produce(task: sp.Task, p: int) -> None:
        out = task.attach_output(q)
        # A producer that finished before the others were created would let the floor rise
        # above their virtual time 0.
        assert go.wait(LONG)
        for i in range(per_producer):
            out.put(i, (p, i), timeout=LONG)

    def consume(task: sp.Task) -> int:
        inp = task.attach_input(q)
        count = 0
        while True:
            try:
                item = inp.get(timeout=LONG)
            except sp.Closed:
                return count
            with lock:
                got.append(item.value)
            inp.consume(item.ticket)
            count += 1

    workers = [rt.spawn(consume, vt=sp.INFINITY) for _ in range(consumers)]
    sources = [rt.spawn(produce, p) for p in range(producers)]
    go.set()
    for source in sources:
        source.result(LONG * 3)
    q.close()
    counts = [w.result(LONG) for w in workers]
    assert sum(counts) == producers * per_producer
    assert len(got) == len(set(got)), "an item was delivered twice"
    assert set(got) == {(p, i) for p in range(producers) for i in range(per_producer)}
    s = q.stats()
    assert (s.puts, s.gets, s.consumed, s.waiting, s.held) == (600, 600, 600, 0, 0)


def test_multicast_to_several_readers_with_reference_counts(auto_rt: sp.Runtime) -> None:
    rt = auto_rt
    n, readers = 200, 3
    ch = rt.channel(capacity=4)
    freed: list[int] = []
    ch.on_garbage(lambda ts, v: freed.append(ts))
    go = threading.Barrier(readers + 1)

    def reader(task: sp.Task) -> list[int]:
        inp = task.attach_input(ch)
        go.wait(LONG)
        seen: list[int] = []
        while True:
            try:
                ts, value = inp.get(sp.NEXT_UNSEEN, timeout=LONG)
            except sp.Closed:
                return seen
            assert value == f"item {ts}"
            seen.append(ts)
            inp.consume(ts)

    threads = [rt.spawn(reader, vt=sp.INFINITY) for _ in range(readers)]
    producer = rt.task(0)
    out = producer.attach_output(ch)
    go.wait(LONG)
    for i in range(n):
        # The producer stays at 0: only the reference counts free space.
        out.put(i, f"item {i}", consumers=readers, timeout=LONG)
    ch.close()
    for th in threads:
        assert th.result(LONG * 3) == list(range(n))
    assert ch.stats().full == 0
    # Every item was reclaimed by its count once all readers consumed it.
    wait_until("every item is reclaimed", lambda: len(freed) == n)
    assert sorted(freed) == list(range(n))
    producer.exit()


def test_a_blocked_get_is_released_by_a_put_from_another_thread(rt: sp.Runtime) -> None:
    ch = rt.channel()
    inp = rt.task(sp.INFINITY).attach_input(ch)
    out = rt.task(0).attach_output(ch)
    getter = Background(lambda: inp.get(sp.NEXT_UNSEEN, timeout=LONG))
    getter.started.wait(LONG)
    putter = Background(lambda: out.put(3, "three"))
    putter.result()
    assert getter.result() == (3, "three")


def test_a_blocked_queue_get_is_released_by_a_put_from_another_thread(rt: sp.Runtime) -> None:
    q = rt.queue()
    inp = rt.task(sp.INFINITY).attach_input(q)
    out = rt.task(0).attach_output(q)
    getters = [Background(lambda: inp.get(timeout=LONG).value) for _ in range(3)]
    for g in getters:
        g.started.wait(LONG)
    for i in range(3):
        out.put(i, i)
    assert sorted(g.result() for g in getters) == [0, 1, 2]


def _work(iterations: int) -> int:
    total = 0
    for i in range(iterations):
        total += i * i % 7
    return total


def _calibrate() -> int:
    """Iterations of pure-Python work that take about 20 ms here."""
    n = 20_000
    while True:
        start = time.perf_counter()
        _work(n)
        if time.perf_counter() - start >= 0.02:
            return n
        n *= 2


def test_a_blocking_get_releases_the_gil(rt: sp.Runtime) -> None:
    """Pure-Python work on another thread finishes while a get is blocked."""
    iterations = _calibrate()
    ch = rt.channel()
    inp = rt.task(sp.INFINITY).attach_input(ch)
    go = threading.Event()
    worker = Background(lambda: (go.wait(LONG), _work(iterations)))
    start = time.monotonic()
    go.set()
    with pytest.raises(sp.Timeout):
        inp.get(0, timeout=1.5)  # blocks, nothing comes
    get_returned = time.monotonic()
    worker.result(LONG)
    assert worker.finished_at is not None
    assert worker.finished_at < get_returned, (
        f"the worker finished {worker.finished_at - start:.2f} s after the get started, "
        "only once the get returned: the blocked get held the GIL"
    )


def test_blocked_waits_of_every_kind_release_the_gil(rt: sp.Runtime) -> None:
    """While threads are blocked in a channel get, a queue get, a register read, a full
    put and an arrivals wait, the main thread does pure-Python work at normal speed."""
    iterations = _calibrate()
    ch = rt.channel()
    full = rt.channel(capacity=1)
    q = rt.queue()
    reg = rt.register()
    reader = rt.task(sp.INFINITY)
    inp = reader.attach_input(ch)
    qin = reader.attach_input(q)
    rin = reader.attach_input(reg)
    p = rt.task(0)
    fout = p.attach_output(full)
    fout.put(0, "fills it")
    arrivals = ch.arrivals(4)
    blocked: list[Background[Any]] = [
        Background(lambda: inp.get(sp.NEXT_UNSEEN, timeout=LONG)),
        Background(lambda: qin.get(timeout=LONG)),
        Background(lambda: rin.read(timeout=LONG)),
        Background(lambda: fout.put(1, "waits", timeout=LONG)),
        Background(lambda: arrivals.next_timeout(LONG)),
    ]
    wait_pending_put(rt)
    for b in blocked:
        b.started.wait(LONG)
    start = time.perf_counter()
    _work(iterations * 5)  # about 100 ms alone
    elapsed = time.perf_counter() - start
    assert all(b.alive() for b in blocked), "a blocked operation returned early"
    assert elapsed < 3.0, f"100 ms of work took {elapsed:.2f} s: a blocked call holds the GIL"
    # Closing releases them all.
    for container in (ch, q, reg, full):
        container.close()
    *gets_and_put, arrival = blocked
    for b in gets_and_put:
        assert isinstance(b.error(), sp.Closed)
    assert isinstance(arrival.error(), StopIteration)


def test_python_callbacks_from_many_putting_threads(rt: sp.Runtime) -> None:
    ch = rt.channel()
    seen: list[int] = []
    lock = threading.Lock()

    def on_arrival(ts: int) -> None:
        with lock:
            seen.append(ts)

    ch.on_arrival(on_arrival)
    outs = [rt.task(0).attach_output(ch) for _ in range(4)]

    def put_range(out: sp.ChannelOutput, k: int) -> None:
        for i in range(k, 400, 4):
            out.put(i, i)

    threads = [Background(functools.partial(put_range, o, k)) for k, o in enumerate(outs)]
    for th in threads:
        th.result(LONG)
    assert sorted(seen) == list(range(400))
    assert ch.timestamps() == list(range(400))
