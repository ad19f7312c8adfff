"""Address spaces in separate processes on loopback: a distributed application's containers
through the same classes as local ones, garbage collection across processes, a process
killed with SIGKILL, and the typed errors of joining, of naming and of unreachable owners.

This process is the router and usually the owner; the others run ``_space_child.py``. Every
wait has a generous deadline (a bug fails the test instead of hanging it), nothing asserts how
long anything took, and every child is killed when its test ends.
"""

from __future__ import annotations

import os
import pathlib
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator

import pytest

import stampede as sp
from stampede import cnc
from _space_child import LEASE, LONG, chain_graph
from _support import free_endpoint, wait_until

CHILD = pathlib.Path(__file__).with_name("_space_child.py")



class Child:
    """A child address space and the lines it prints."""

    def __init__(self, role: str, app: str, endpoint: str, n: int = 0) -> None:
        self.role = role
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), role, app, endpoint, str(n)],
            stdout=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def expect(self, prefix: str, timeout: float = LONG) -> str:
        """Waits for a line starting with ``prefix``; returns the rest of it."""
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(
                    f"{self.role} printed no {prefix!r} within {timeout} s; saw {self.seen}"
                ) from None
            if line is None:
                raise AssertionError(
                    f"{self.role} exited ({self.proc.wait()}) before {prefix!r}; saw {self.seen}"
                )
            self.seen.append(line)
            if line.startswith(prefix):
                return line[len(prefix) :].strip()

    def finish(self, timeout: float = LONG) -> list[str]:
        """Waits for a successful exit; returns every line printed."""
        rc = self.proc.wait(timeout)
        while (line := self.lines.get(timeout=timeout)) is not None:
            self.seen.append(line)
        assert rc == 0, f"{self.role} exited with {rc}; printed {self.seen}"
        return self.seen

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to leave."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(LONG)


class Cluster:
    """This process as the router of a fresh application, and the children it starts."""

    def __init__(self, name: str) -> None:
        self.app = f"t{os.getpid()}-{name}"
        self.endpoint = free_endpoint()
        self.space = sp.Space.join(
            self.app, mode="router", listen=[self.endpoint], lease=LEASE
        )
        self.children: list[Child] = []

    def start(self, role: str, n: int = 0) -> Child:
        child = Child(role, self.app, self.endpoint, n)
        self.children.append(child)
        return child

    def close(self) -> None:
        for c in self.children:
            c.kill()
        self.space.leave()


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    c = Cluster(request.node.name.replace("_", "-")[:40])
    try:
        yield c
    finally:
        c.close()


def reclaimed_all(space: sp.Space, ch: sp.Channel) -> bool:
    space.runtime.collect()
    return len(ch) == 0


def test_items_cross_processes_in_order_and_are_reclaimed_at_the_owner(
    cluster: Cluster,
) -> None:
    space, n = cluster.space, 200
    frames = space.channel("frames", capacity=4)
    assert frames.owner is None
    # A live task of the owner keeps the zone collecting once both others have left.
    observer = space.task(sp.INFINITY)
    consumer = cluster.start("consumer", n)
    consumer.expect("READY")
    producer = cluster.start("producer", n)
    lines = consumer.finish()
    got = [int(line.split()[1]) for line in lines if line.startswith("GOT ")]
    assert got == list(range(n)), "in order, none lost"
    producer.finish()
    # The bounded channel never held more than its capacity, and everything went.
    wait_until("every item is reclaimed", lambda: reclaimed_all(space, frames), LONG)
    assert space.runtime.gc_stats().reclaimed >= n
    assert frames.stats().puts == n
    assert space.stats().served > 0
    observer.exit()


def test_a_killed_consumer_does_not_stop_the_owners_gc(cluster: Cluster) -> None:
    space = cluster.space
    frames = space.channel("frames", capacity=4)
    camera = space.task(0, name="camera")
    out = camera.attach_output(frames)
    for ts in range(4):
        out.put(ts, f"frame {ts}")
    holder = cluster.start("holder")
    assert holder.expect("HELD") == "0"
    camera.set_virtual_time(4)
    # The other process's open item holds the watermark, so the full channel stays full.
    wait_until(
        "the remote item holds the watermark",
        lambda: space.runtime.explain().watermark == 0,
        LONG,
    )
    with pytest.raises(sp.Full) as full:
        out.try_put(4, "frame 4")
    assert full.value.item == "frame 4"

    holder.kill()
    wait_until("the holder's space is lost", lambda: space.stats().spaces_lost >= 1, LONG)
    # Its connection is released: the put goes through and the old items are reclaimed.
    out.put(4, "frame 4", timeout=LONG)
    wait_until(
        "items 0..3 are reclaimed",
        lambda: space.runtime.collect() >= 4 and frames.timestamps() == [4],
        LONG,
    )
    assert space.runtime.gc_stats().reclaimed >= 4
    assert holder.proc.returncode == -signal.SIGKILL


def test_a_missing_name_times_out_with_not_found(cluster: Cluster) -> None:
    space = cluster.space
    with pytest.raises(sp.NotFound) as e:
        space.lookup_channel("no/such/channel", timeout=0.5)
    assert e.value.name == "no/such/channel"
    assert isinstance(e.value, LookupError)
    assert space.record("no/such/channel") is None


def test_names_kinds_and_local_only_features(cluster: Cluster) -> None:
    space = cluster.space
    cluster.start("owner", 3).expect("READY")
    records = {r.name: r for r in space.records()}
    assert records["frames"].kind == "channel"
    assert records["frames"].space != space.id
    assert records["frames"].space in space.spaces()
    with pytest.raises(sp.WrongKind) as e:
        space.lookup_queue("frames", timeout=LONG)
    assert (e.value.name, e.value.kind) == ("frames", "channel")

    frames = space.lookup_channel("frames", timeout=LONG)
    assert frames.owner == records["frames"].space
    assert frames.name == "frames"
    assert frames.capacity is None
    # What only the owner knows raises NotLocal here.
    for local_only in (len, lambda c: c.stats(), lambda c: c.closed):
        with pytest.raises(sp.NotLocal):
            local_only(frames)
    # The same connections as for a local channel, with the same semantics.
    with space.task(0) as t:
        inp = t.attach_input(frames)
        with pytest.raises(sp.NotLocal):
            inp.id
        assert inp.get(sp.OLDEST, timeout=LONG) == (0, "frame 0")
        assert t.visibility == 0  # the open remote item counts in the task's visibility
        assert inp.try_get(2) == (2, "frame 2")
        inp.consume_until(1)
        with pytest.raises(sp.Gone):
            inp.try_get(1)
        with pytest.raises(sp.Unavailable) as u:
            inp.try_get(7)
        assert (u.value.below, u.value.above) == (2, None)
        out = t.attach_output(frames)
        with pytest.raises(sp.DuplicateTimestamp) as d:
            out.try_put(2, "again")
        assert d.value.item == "again"
        t.set_virtual_time(5)
        with pytest.raises(sp.BelowVisibility):
            out.put(1, "late")  # visibility is 2: the item at 2 is still open


def test_a_dead_owner_makes_operations_unreachable(cluster: Cluster) -> None:
    space = cluster.space
    owner = cluster.start("owner", 1)
    owner.expect("READY")
    frames = space.lookup_channel("frames", timeout=LONG)
    with space.task(0) as t:
        inp = t.attach_input(frames)
        out = t.attach_output(frames)
        owner.kill()
        wait_until("the owner's space is lost", lambda: space.stats().spaces_lost >= 1, LONG)
        with pytest.raises(sp.UnreachableError):
            inp.get(sp.OLDEST, timeout=LONG)
        with pytest.raises(sp.UnreachableError) as e:
            out.put(5, "lost")
        assert e.value.item == "lost"
        with pytest.raises(sp.UnreachableError):
            frames.close()
    assert space.stats().unreachable >= 3


def test_joining_errors_are_typed() -> None:
    with pytest.raises(sp.ConfigError):
        sp.Space.join("app", mode="satellite")
    with pytest.raises(sp.ConfigError):
        sp.Space.join("app", mode="client")  # a client needs a router to connect to
    with pytest.raises(sp.ConfigError):
        sp.Space.join("app", user="u")  # no password
    with pytest.raises(sp.InvalidName):
        sp.Space.join("a/b")
    with pytest.raises(sp.ConnectError):
        sp.Space.join("app", mode="client", connect=[free_endpoint()], connect_timeout=0.5)


@pytest.mark.parametrize(
    ("endpoint", "says"),
    [
        ("tcp/127.0.0.1", "has no port"),
        ("bogus/127.0.0.1:1", "unknown protocol"),
        ("tcp/127.0.0.1:99999", "out of range"),
        ("127.0.0.1:7447", "has no protocol"),
    ],
)
def test_malformed_endpoints_are_configuration_errors(endpoint: str, says: str) -> None:
    # Refused before joining: unchecked, each would wait out the connect timeout and fail
    # as a ConnectError.
    with pytest.raises(sp.ConfigError) as connecting:
        sp.Space.join("app", mode="client", connect=[endpoint], connect_timeout=30)
    with pytest.raises(sp.ConfigError) as listening:
        sp.Space.join("app", listen=[endpoint], connect_timeout=30)
    for e in (connecting, listening):
        message = str(e.value)
        assert endpoint in message and says in message, message
        assert ".rs:" not in message and ".cargo" not in message, message


def test_a_space_is_a_context_manager_with_its_own_runtime() -> None:
    with sp.Space.join(f"t{os.getpid()}-alone", listen=[free_endpoint()]) as space:
        assert space.spaces() == [space.id]
        ch = space.channel("frames")
        assert space.lookup_channel("frames", timeout=0).owner is None
        with space.task(0, name="camera") as t:
            t.attach_output(ch).put(0, b"x")
            child = t.child(1, name="helper")
            assert child.name == "helper"
            with pytest.raises(sp.BelowVisibility):
                t.child(-1, name="early")
        assert space.runtime.explain().watermark >= 0
        space.runtime.close()  # the space's collector runs until the space leaves
        [me] = space.explain_cluster()
        assert (me.space, me.error) == (space.id, None)
    assert space.left
    with pytest.raises(sp.Closed):
        space.task(0)
    space.leave()  # leaving twice is harmless


def test_wrong_or_missing_credentials_are_rejected(tmp_path: pathlib.Path) -> None:
    users = tmp_path / "users"
    users.write_text("alice:secret\n")
    endpoint = free_endpoint()
    app = f"t{os.getpid()}-auth"
    with sp.Space.join(
        app, mode="router", listen=[endpoint], credentials_file=users, user="hub", password="x"
    ):
        for user, password in (("alice", "wrong"), (None, None)):
            with pytest.raises(sp.AuthRejected):
                sp.Space.join(
                    app,
                    mode="client",
                    connect=[endpoint],
                    user=user,
                    password=password,
                    connect_timeout=2.0,
                )
        with sp.Space.join(
            app, mode="client", connect=[endpoint], user="alice", password="secret"
        ) as device:
            assert len(device.spaces()) == 2


def test_access_rules_deny_what_they_do_not_grant(tmp_path: pathlib.Path) -> None:
    users = tmp_path / "users"
    users.write_text("viewer:v1ewer\nwriter:wr1ter\n")
    rules = tmp_path / "rules"
    rules.write_text("viewer read video/**\nwriter all video/**\n")
    bad = tmp_path / "bad"
    bad.write_text("viewer read,fly video/**\n")
    endpoint = free_endpoint()
    app = f"t{os.getpid()}-access"
    with pytest.raises(sp.ConfigError, match="line 1"):
        sp.Space.join(app, mode="router", listen=[endpoint], access_file=bad)
    with sp.Space.join(
        app,
        mode="router",
        listen=[endpoint],
        credentials_file=users,
        user="hub",
        password="x",
        access_file=rules,
    ) as hub:
        hub.channel("video/frames")
        hub.channel("audio/mic")
        with sp.Space.join(
            app, mode="client", connect=[endpoint], user="viewer", password="v1ewer"
        ) as viewer, sp.Space.join(
            app, mode="client", connect=[endpoint], user="writer", password="wr1ter"
        ) as writer:
            w = writer.task(0)
            w.attach_output(writer.lookup_channel("video/frames", timeout=5)).put(1, b"f")
            t = viewer.task(0)
            frames = viewer.lookup_channel("video/frames", timeout=5)
            assert t.attach_input(frames).get(sp.OLDEST)[0] == 1
            with pytest.raises(sp.Denied) as denied:
                t.attach_output(frames)
            e = denied.value
            assert (e.user, e.op, e.container) == ("viewer", "write", "video/frames")
            assert isinstance(e, PermissionError)
            assert "v1ewer" not in str(e)
            with pytest.raises(sp.Denied):
                t.attach_input(viewer.lookup_channel("audio/mic", timeout=5))
            with pytest.raises(sp.Denied):
                frames.close()
            assert hub.stats().denied == 3


def test_an_owner_refuses_what_is_over_its_quotas() -> None:
    endpoint = free_endpoint()
    app = f"t{os.getpid()}-quota"
    with sp.Space.join(
        app, mode="router", listen=[endpoint], max_item_bytes=1024, max_connections=3
    ) as hub:
        hub.channel("frames")
        with sp.Space.join(app, mode="client", connect=[endpoint]) as client:
            t = client.task(0)
            frames = client.lookup_channel("frames", timeout=5)
            out = t.attach_output(frames)
            with pytest.raises(sp.TooLarge):
                out.put(1, b"x" * 4096)
                out.flush()
            out.put(2, b"x" * 1024)
            out.flush()
            held = [t.attach_input(frames), t.attach_input(frames)]
            with pytest.raises(sp.TooManyConnections):
                t.attach_input(frames)
            assert len(held) == 2
            assert hub.stats().quota_refused == 2


def program(
    task: Callable[[int], sp.Task],
    frames: sp.Channel,
    jobs: sp.Queue,
    mode: sp.Register,
) -> list[str]:
    """A user program written once: a producer and a consumer through a bounded channel,
    a bounded queue and a register. Returns what the consumer saw."""
    consumer = task(sp.INFINITY)
    fin, qin, rin = (
        consumer.attach_input(frames),
        consumer.attach_input(jobs),
        consumer.attach_input(mode),
    )
    producer = task(0)

    def produce() -> None:
        fout, qout, rout = (
            producer.attach_output(frames),
            producer.attach_output(jobs),
            producer.attach_output(mode),
        )
        rout.write("running")
        for n in range(12):
            # Bounded to 4: the producer waits for the consumer, here or across hosts.
            fout.put(n, f"frame {n}", timeout=LONG)
            qout.put(n, f"job {n}", timeout=LONG)
            producer.set_virtual_time(n + 1)
        rout.write("done")

    thread = threading.Thread(target=produce)
    thread.start()
    seen = [f"mode {rin.read(timeout=LONG)[1]}"]
    for _ in range(12):
        ts, frame = fin.get(sp.NEXT_UNSEEN, timeout=LONG)
        job = qin.get(timeout=LONG)
        # Both held items count in the consumer's visibility until consumed.
        seen.append(f"{ts} {frame} {job.value} held {consumer.visibility}")
        fin.consume_until(ts)
        qin.consume(job.ticket)
    thread.join(LONG)
    while (value := rin.read(timeout=LONG)[1]) != "done":
        pass
    seen.append(f"mode {value}")
    with pytest.raises(sp.Unavailable):
        fin.try_get(sp.NEXT_UNSEEN)
    producer.exit()
    consumer.exit()
    return seen


def test_one_program_runs_on_a_local_runtime_and_a_joined_space(cluster: Cluster) -> None:
    rt = sp.Runtime()
    here = program(
        lambda vt: rt.task(vt),
        rt.channel(capacity=4),
        rt.queue(capacity=4),
        rt.register(),
    )
    # The same program, with every container owned by another process.
    cluster.start("containers").expect("READY")
    space = cluster.space
    frames = space.lookup_channel("p/frames", timeout=LONG)
    jobs = space.lookup_queue("p/jobs", timeout=LONG)
    mode = space.lookup_register("p/mode", timeout=LONG)
    assert frames.owner is not None and frames.owner == jobs.owner == mode.owner
    assert (frames.capacity, jobs.capacity) == (4, 4)
    there = program(lambda vt: space.task(vt), frames, jobs, mode)
    assert here == there
    assert len(here) == 14 and here[1] == "0 frame 0 job 0 held 0"


def test_containers_made_in_another_space_forward_their_events(cluster: Cluster) -> None:
    space = cluster.space
    cluster.start("owner", 1).expect("READY")
    [other] = [s for s in space.spaces() if s != space.id]
    # Made there from here: it lives, is served and is named there.
    ch = space.channel_on(other, "made/events", capacity=64)
    assert (ch.owner, ch.name, ch.capacity) == (other, "made/events", 64)
    record = space.record("made/events")
    assert record is not None and record.space == other
    arrived: list[int] = []
    freed: list[tuple[int, object]] = []
    sub = ch.on_arrival(arrived.append)
    ch.on_garbage(lambda ts, value: freed.append((ts, value)))
    with space.task(1) as t:
        out, inp = t.attach_output(ch), t.attach_input(ch)
        for ts in range(1, 21):
            out.put(ts, f"v{ts}", consumers=1)
        for ts in range(1, 21):
            assert inp.get(ts, timeout=LONG) == (ts, f"v{ts}")
            inp.consume(ts)
        wait_until("every arrival is forwarded", lambda: len(arrived) == 20, LONG)
        assert arrived == list(range(1, 21))  # in order
        wait_until("every reclaimed item is forwarded", lambda: len(freed) == 20, LONG)
        assert sorted(freed) == [(ts, f"v{ts}") for ts in range(1, 21)]
        assert ch.unsubscribe(sub) and not ch.unsubscribe(sub)
    stats = space.stats()
    assert (stats.events_lost, stats.events_dropped) == (0, 0)
    assert stats.events_received >= 40
    # A queue made there, unnamed: used from here like any other.
    q = space.queue_on(other)
    assert q.owner == other and q.name is None
    with space.task(30) as t:
        t.attach_output(q).put(30, "job")
        item = t.attach_input(q).get(timeout=LONG)
        assert (item.ts, item.value) == (30, "job")
    with pytest.raises(sp.NameTaken):
        space.channel_on(other, "made/events")


def test_a_correlator_matches_channels_of_other_spaces(cluster: Cluster) -> None:
    space = cluster.space
    cluster.start("owner", 1).expect("READY")
    [other] = [s for s in space.spaces() if s != space.id]
    video = space.channel_on(other, "corr/video")
    audio = space.channel("corr/audio")  # one here, one there
    with space.task(10) as t:
        corr = sp.Correlator([t.attach_input(video), t.attach_input(audio)], within=2)
        v, a = t.attach_output(video), t.attach_output(audio)
        for ts in (10, 20, 30):
            v.put(ts, f"frame {ts}")
            a.put(ts + 1, f"chunk {ts + 1}")
        got = [corr.get(timeout=LONG) for _ in range(3)]
        assert [(s.ts, s.items) for s in got] == [
            (ts, [(ts, f"frame {ts}"), (ts + 1, f"chunk {ts + 1}")]) for ts in (10, 20, 30)
        ]
        corr.consume_until(got[-1])
        with pytest.raises(sp.Unavailable):
            corr.try_get()


def test_a_refusal_only_the_owner_sees_is_raised_by_the_next_put_or_flush(
    cluster: Cluster,
) -> None:
    cluster.space.channel(name="frames")

    def join() -> sp.Space:
        return sp.Space.join(cluster.app, mode="peer", connect=[cluster.endpoint], lease=LEASE)

    with join() as a, join() as b:
        theirs = b.lookup_channel("frames", timeout=LONG)
        with a.task(1) as ta, b.task(1) as tb:
            tb.attach_output(theirs).put(10, "ten", sync=True)
            out = ta.attach_output(a.lookup_channel("frames", timeout=LONG))
            with pytest.raises(sp.DuplicateTimestamp) as e:
                out.put(10, "ten", sync=True)
            assert not e.value.deferred
            out.put(10, "ten")  # returns once sent
            wait_until("the refusal is back", lambda: a.stats().puts_refused == 1, LONG)
            with pytest.raises(sp.DuplicateTimestamp) as e:
                out.put(11, "eleven")
            assert e.value.deferred
            assert (e.value.timestamp, e.value.item) == (10, "ten")
            assert e.value.unsent == (11, "eleven")
            out.put(11, "eleven")
            out.flush()
            theirs.close()
            out.put(12, "twelve")
            with pytest.raises(sp.Closed) as c:
                out.flush()
            assert c.value.deferred and c.value.item == "twelve"
            out.flush()


def test_a_loaned_array_is_put_into_another_space_without_a_copy(cluster: Cluster) -> None:
    np = pytest.importorskip("numpy")
    frames = cluster.space.channel("frames")
    with sp.Space.join(cluster.app, connect=[cluster.endpoint], lease=LEASE) as producer:
        remote = producer.lookup_channel("frames", timeout=LONG)
        with producer.task(0) as t, cluster.space.task(0) as reader:
            out = t.attach_output(remote)
            inp = reader.attach_input(frames)
            for ts in range(3):
                frame = out.loan_array((480, 640, 3), np.uint8)
                assert frame.flags.writeable and frame.shape == (480, 640, 3)
                frame[:] = ts + 1
                out.put(ts, frame)
                assert not frame.flags.writeable, "put: read-only from now on"
                got_ts, got = inp.get(sp.NEXT_UNSEEN, timeout=LONG)
                assert got_ts == ts and got.shape == (480, 640, 3)
                assert int(got.min()) == int(got.max()) == ts + 1
                inp.consume(ts)
            raw = out.loan(10_000)
            memoryview(raw)[:] = b"\x05" * 10_000
            out.put(3, raw)
            assert inp.get(3, timeout=LONG)[1] == b"\x05" * 10_000
            s = producer.stats()
            assert (s.loans_shared, s.loans_plain) == (4, 0)
            # Zenoh was handed each loan's own shared memory: nothing was copied in.
            assert (s.sent_as_received, s.sent_fresh) == (4, 0)
            with pytest.raises(TypeError, match="read-only"):
                memoryview(raw)[0] = 1  # put: read-only from now on


def test_a_loan_on_a_local_channel_is_plain_memory() -> None:
    np = pytest.importorskip("numpy")
    rt = sp.Runtime()
    ch = rt.channel("local")
    with rt.task(0) as t:
        out, inp = t.attach_output(ch), t.attach_input(ch)
        a = out.loan_array(4, "float32")
        a[:] = [1.5, 2.5, 3.5, 4.5]
        out.put(0, a)
        assert inp.get(0)[1].tolist() == [1.5, 2.5, 3.5, 4.5]
        part = out.loan_array((2, 4), np.int16)
        part[:] = 3
        out.put(1, part[0])  # a part of a loan is an ordinary array, copied
        assert inp.get(1)[1].tolist() == [3, 3, 3, 3]
        assert not out.loan(8).in_place
        with pytest.raises(sp.InvalidArgument):
            out.loan_array(2, ">f8")
        b = out.loan_array(4, np.uint8)
        b[:] = 200
        out.put(2, b.view(np.int8))  # another type over the loan: stored as put, copied
        assert inp.get(2)[1].dtype == np.int8
        c = out.loan_array((2, 2), np.uint16)
        c[:] = 5
        out.put(3, c)
        with pytest.raises(ValueError):
            c.base[0] = 1  # the array it views is read-only too once put
        assert inp.get(3)[1].tolist() == [[5, 5], [5, 5]]


def test_queue_gets_take_items_ahead_and_register_reads_use_pushed_writes(
    cluster: Cluster,
) -> None:
    owner = cluster.space
    jobs = owner.queue("jobs")
    mode = owner.register("mode")
    producer = owner.task(0)
    qout, wout = producer.attach_output(jobs), producer.attach_output(mode)
    for ts in range(1, 9):
        qout.put(ts, f"job {ts}")
    with sp.Space.join(
        cluster.app, connect=[cluster.endpoint], lease=LEASE, queue_prefetch=3
    ) as other:
        reader = other.task(sp.INFINITY)
        qin = reader.attach_input(other.lookup_queue("jobs", timeout=LONG))
        rin = reader.attach_input(other.lookup_register("mode", timeout=LONG))
        got = []
        for _ in range(8):
            job = qin.get(timeout=LONG)
            assert job.value == f"job {job.ts}"
            qin.consume(job.ticket)
            got.append(job.ts)
        assert got == list(range(1, 9))
        # Two gets took three more each; the gets in between were answered here.
        stats = other.stats()
        assert (stats.leased, stats.lease_hits) == (6, 6)
        wout.write("tracking")
        wait_until(
            "the write is pushed",
            lambda: other.stats().push_received > stats.push_received,
        )
        assert rin.try_read() == (1, "tracking")
        assert other.stats().register_hits == 1
        with pytest.raises(sp.Unavailable):
            rin.try_read()
        reader.exit()
    producer.exit()


def test_a_cnc_graph_places_steps_and_items_in_two_spaces(cluster: Cluster) -> None:
    n = 120
    child = cluster.start("cnc", n)
    g, x, ran, ids = chain_graph(n)
    assert g.rank is None
    g.distribute(cluster.space, "chain", 0, 2)
    assert g.rank == (0, 2)
    child.expect("SERVING")
    for i in reversed(range(1, n)):  # backwards: most steps suspend and ask another space
        g.put_tag(ids, i)
    g.put(x, 0, 0)
    g.wait(timeout=LONG)
    assert [g.get(x, i) for i in range(n)] == [i * (i + 1) // 2 for i in range(n)]
    pids = {i % 2: g.get(ran, i) for i in range(1, n)}
    assert pids[0] == os.getpid() and pids[1] == child.proc.pid
    g.release()
    lines = child.finish()
    assert lines[-1] == "DONE"
    assert int(lines[-2].split()[1]) > 0, "serve(timeout=...) returned before the release"


def test_a_distributed_graph_fails_when_a_rank_dies(cluster: Cluster) -> None:
    child = cluster.start("cnc", 50)
    g, x, _, ids = chain_graph(50)
    g.distribute(cluster.space, "chain", 0, 2)
    child.expect("SERVING")
    child.kill()
    for i in range(1, 50):
        g.put_tag(ids, i)
    with pytest.raises((cnc.ParticipantLost, cnc.ParticipantUnreachable)) as info:
        g.put(x, 0, 0)
        g.wait(timeout=LONG)
    lost = info.value
    assert isinstance(lost, (cnc.ParticipantLost, cnc.ParticipantUnreachable))
    assert lost.rank == 1 and lost.space != cluster.space.id


def test_a_step_failing_in_another_space_fails_the_graph_with_its_error(
    cluster: Cluster,
) -> None:
    n = 8
    cluster.start("cnc", -n)  # the last step, odd, runs there and raises
    g, x, _, ids = chain_graph(n, fail_at=n - 1)
    g.distribute(cluster.space, "chain", 0, 2)
    for i in range(1, n):
        g.put_tag(ids, i)
    g.put(x, 0, 0)
    with pytest.raises(cnc.RemoteGraphError) as info:
        g.wait(timeout=LONG)
    assert info.value.rank == 1 and info.value.space != cluster.space.id
    cause = info.value.__cause__
    assert isinstance(cause, cnc.StepFailed), repr(cause)
    assert cause.step == "add" and cause.tag == (n - 1,) and "on purpose" in cause.reason


def test_a_graph_that_cannot_be_distributed_or_placed_says_why(cluster: Cluster) -> None:
    g, *_ = chain_graph(4)
    with pytest.raises(cnc.DistributionFailed) as bad:
        g.distribute(cluster.space, "chain", 2, 2)
    assert "ranks count from 0" in bad.value.reason
    g = cnc.Graph(cnc.Executor(1))
    far = g.items("far").home(lambda tag: 5)
    g.distribute(cluster.space, "solo", 0, 1)
    with pytest.raises(cnc.NoSuchRank) as placed:
        g.put(far, 1, "x")
        g.wait(timeout=LONG)
    assert (placed.value.tuner, placed.value.tag) == ("far", (1,))
    assert (placed.value.rank, placed.value.ranks) == (5, 1)
    g.release()
