"""Cluster threads from Python: two address spaces in this process (a router and a peer,
each its own Zenoh session), tasks by name and by import path, their failures, and the
cluster's mutex, condition, semaphore and barrier used by threads of both spaces."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

import stampede as sp
from stampede import cluster
from stampede.errors import TaskCancelled, TaskFailed, UnknownTask, InvalidArgument
from _support import free_endpoint

LONG = 20.0



def fail(ctx: cluster.TaskContext, args: bytes) -> bytes:
    raise ValueError("on purpose")


TASKS = {"fail": fail}


@pytest.fixture
def pair() -> Iterator[tuple[cluster.Cluster, cluster.Cluster]]:
    ep = free_endpoint()
    app = f"pycluster-{os.getpid()}-{ep.rsplit(':', 1)[1]}"
    a = sp.Space.join(app, mode="router", listen=[ep])
    b = sp.Space.join(app, connect=[ep])
    ca = cluster.Cluster.start(a, TASKS, timeout=LONG)
    cb = cluster.Cluster.start(b, TASKS, timeout=LONG)
    for _ in range(2000):
        if len(ca.spaces()) == 2 and len(cb.spaces()) == 2:
            break
        threading.Event().wait(0.005)
    assert len(ca.spaces()) == 2
    yield ca, cb
    ca.stop()
    cb.stop()
    b.leave()
    a.leave()


def test_tasks_by_name_and_import_path_here_and_elsewhere(
    pair: tuple[cluster.Cluster, cluster.Cluster],
) -> None:
    ca, cb = pair
    for on in ("here", cb.id, "round_robin", "least_loaded"):
        assert ca.spawn("_cluster_tasks:square", b"12", on=on).join(timeout=LONG) == b"144"
    h = ca.spawn("_cluster_tasks:where", on=cb.id)
    assert h.space == cb.id
    assert h.join() == cb.id.encode()
    with pytest.raises(TaskFailed) as e:
        ca.spawn("fail", on=cb.id).join()
    assert "on purpose" in e.value.message and e.value.task == "fail"
    with pytest.raises(UnknownTask):
        ca.spawn("_cluster_tasks:nothing", on=cb.id).join()
    h = ca.spawn("_cluster_tasks:sleeper", on=cb.id)
    with pytest.raises(sp.Timeout):
        h.join(timeout=0.05)
    assert not h.done()
    h.cancel()
    with pytest.raises(TaskCancelled):
        h.join()
    listed = cluster.list_tasks(ca.space)
    assert sorted(s for s, _, _ in listed) == sorted([ca.id, cb.id])


def test_a_mutex_excludes_threads_of_both_spaces(
    pair: tuple[cluster.Cluster, cluster.Cluster],
) -> None:
    inside = [0]
    entered = [0]
    errors: list[str] = []

    def work(c: cluster.Cluster) -> None:
        m = c.mutex("m")
        for _ in range(20):
            with m as owner_died:
                assert not owner_died
                inside[0] += 1
                if inside[0] != 1:
                    errors.append("two holders")
                threading.Event().wait(0.0005)
                inside[0] -= 1
                entered[0] += 1

    ts = [threading.Thread(target=work, args=(c,)) for c in pair for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors and entered[0] == 80
    m = pair[0].mutex("m")
    assert m.home == pair[1].mutex("m").home
    with pytest.raises(InvalidArgument):
        m.unlock()
    with pytest.raises(InvalidArgument):
        pair[0].semaphore("m")


def test_condition_semaphore_and_barrier(pair: tuple[cluster.Cluster, cluster.Cluster]) -> None:
    ca, cb = pair
    m, cv = ca.mutex("cm"), ca.condition("cv")
    state = {"ready": False}
    woke = threading.Event()

    def waiter() -> None:
        mb, cvb = cb.mutex("cm"), cb.condition("cv")
        with mb:
            while not state["ready"]:
                assert cvb.wait(mb, timeout=LONG)
        woke.set()

    t = threading.Thread(target=waiter)
    t.start()
    threading.Event().wait(0.1)
    with m:
        state["ready"] = True
    cv.broadcast()
    t.join(LONG)
    assert woke.is_set()
    with m:
        assert not cv.wait(m, timeout=0.05)  # nobody signals: timed out, held again

    s = cb.semaphore("s", 1)
    s.wait()
    with pytest.raises(sp.Timeout):
        ca.semaphore("s").wait(timeout=0.05)
    ca.semaphore("s").post()
    s.wait(timeout=LONG)

    ranks: list[int] = []

    def member(c: cluster.Cluster) -> None:
        b = c.barrier("b", 2)
        for _ in range(3):
            b.wait()
        ranks.append(b.rank)

    ts = [threading.Thread(target=member, args=(c,)) for c in pair]
    for t in ts:
        t.start()
    for t in ts:
        t.join(LONG)
    assert sorted(ranks) == [0, 1]


def test_a_segment_written_under_a_lock_is_read_by_the_next_holder(
    pair: tuple[cluster.Cluster, cluster.Cluster],
) -> None:
    ca, cb = pair
    sa, sb = ca.segment("seg", 16), cb.segment("seg", 16)
    assert len(sa) == 16 and sa.home is None
    with cb.mutex("sl"):
        sb.write(0, b"from b")
    assert sb.home == cb.id
    with ca.mutex("sl"):
        assert sa.read(0, 6) == b"from b"
        assert sa.read()[6:] == bytes(10)
    with pytest.raises(InvalidArgument):
        sa.write(15, b"xy")


def test_typed_views_write_only_the_elements_they_change(
    pair: tuple[cluster.Cluster, cluster.Cluster],
) -> None:
    ca, cb = pair
    sa, sb = ca.segment("typed", 64), cb.segment("typed", 64)
    with ca.mutex("tl"):
        with cluster.segment_view(sa, np.float64) as a:
            assert a.shape == (8,) and not a.any()
            a[:4] = [1.0, 2.0, 3.0, 4.0]
    # The other space's view covers elements 6 and 7 only, and writes just those.
    with cb.mutex("tl"):
        with cluster.segment_view(sb, np.float64, offset=48) as b:
            b[:] = [6.5, 7.5]
    with ca.mutex("tl"):
        got = cluster.segment_array(sa, np.float64)
    assert got.tolist() == [1.0, 2.0, 3.0, 4.0, 0.0, 0.0, 6.5, 7.5]
    assert cluster.segment_array(sa, np.int32, offset=8, count=2).dtype == np.int32
    with pytest.raises(ValueError):
        with cluster.segment_view(sa, np.uint8) as c:
            c.resize(3, refcheck=False)


def test_a_node_agent_attaches_a_python_space_that_runs_tasks_by_import_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ep = free_endpoint()
    app = f"pyattach-{os.getpid()}"
    # The started interpreter finds the tasks' module as this one does.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in sys.path if p))
    with sp.Space.join(app, mode="router", listen=[ep]) as space:
        with cluster.Cluster.start(space, timeout=LONG) as c:
            agent = cluster.NodeAgent.start(space, "here", [ep])
            try:
                new = c.attach([sys.executable, "-m", "stampede.cluster"], timeout=60.0)
                assert new in c.spaces() and agent.running() == 1
                assert c.spawn("_cluster_tasks:square", b"9", on=new).join(timeout=LONG) == b"81"
                c.detach(new)
                deadline = time.monotonic() + LONG
                while agent.running() and time.monotonic() < deadline:
                    time.sleep(0.02)
                assert agent.running() == 0 and new not in c.spaces()
            finally:
                agent.stop()


# A holder in another process: locks the mutex homed in the test's space, says so, then
# unlocks when told (after it was stopped past its lease) and prints how that went.
HOLDER = """
import sys, time, stampede as sp
from stampede import cluster
space = sp.Space.join(sys.argv[1], connect=[sys.argv[2]], lease=1.0)
c = cluster.Cluster.start(space, timeout=20.0)
m = c.mutex("guard")
m.lock(timeout=20.0)
print("HELD", flush=True)
sys.stdin.readline()
time.sleep(3.0)  # back in touch with the home, which dropped this space meanwhile
try:
    m.unlock()
    print("UNLOCKED", flush=True)
except sp.StampedeError as e:
    print("REFUSED", type(e).__name__, flush=True)
"""


def test_a_holder_stopped_past_its_lease_loses_the_mutex_and_learns_it() -> None:
    import signal
    import subprocess

    ep = free_endpoint()
    app = f"pyfence-{os.getpid()}"
    space = sp.Space.join(app, mode="router", listen=[ep], lease=1.0)
    c = cluster.Cluster.start(space, timeout=LONG)
    m = c.mutex("guard")  # homed here
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, app, ep],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "HELD"
        os.kill(holder.pid, signal.SIGSTOP)
        # The home drops the silent space and hands the mutex on, telling the new holder.
        assert m.lock(timeout=LONG) is True
        os.kill(holder.pid, signal.SIGCONT)
        holder.stdin.write("unlock\n")
        holder.stdin.flush()
        # The stale holder's unlock is refused: it learns it lost the mutex, and the
        # current hold is untouched.
        assert holder.stdout.readline().split()[0] == "REFUSED"
        assert holder.wait(timeout=LONG) == 0
        m.unlock()
        assert m.lock(timeout=LONG) is False
        m.unlock()
    finally:
        if holder.poll() is None:
            os.kill(holder.pid, signal.SIGCONT)
            holder.kill()
            holder.wait()
        c.stop()
        space.leave()
