"""The processes of the fault harness (``bench/chaos.py``).

``python bench/chaos_roles.py ROLE --app APP --endpoint EP --log FILE [--incarnation K]``

``hub`` is the application's router and owns the containers: a bounded channel with an
auditor task that gets every item (it lives with the owner, so it sees exactly what the
owner stored), a queue and a register. It watches membership and answers ``FINAL`` on stdin
with what the checker needs. Every other role is a client that joins through the relay, works
until its connection fails, and then joins again as a new *generation*: a fresh address space
whose timestamps start above everything before it. Each role appends one line per event to its
log, written through at once so that a SIGKILL loses nothing the role had already done:

- ``ATT mono``    a writer's connection (a mutex user's handle) is made at the owner (a space
  seen leaving and back may attach afresh: only the connections it had when it was dropped
  are fenced)
- ``S ts mono``   a put is about to be sent (monotonic clock, shared by every process)
- ``ACK ts``      the put is acknowledged: its call returned, or a flush covering it did
- ``GOT gen ts``  an item got on generation ``gen``'s connection
- ``C ts`` / ``DONE ts``  a queue item's consume is about to be sent / returned
- ``HOME base space``  where the cluster mutex lives, as this generation found it
- ``A ts`` / ``Q ts`` / ``D ts``  (hub) audited, a job reclaimed once consumed, drained
- ``ARRIVED space mono`` / ``LEFT space mono polled`` (hub)  membership as the owner saw it
  (``polled``: when the look that found the space away began)
- ``SLOW op mono seconds outcome``  a call that took longer than half a second
- ``JOIN gen space base`` / ``LOST gen error`` / ``LEFT gen seconds``  generations
- ``N gen ts size`` (hub)  a size the S-Net stage put, taken from the sizes queue
- ``CNC name`` / ``CNCOK name`` / ``CNCBAD name what`` / ``CNCFAIL name error``  a CnC graph
  run (``cnc-env``) and how it ended; ``SERVED name`` / ``CNCFAIL name error`` (``cnc-worker``)

The S-Net stage feeds every frame of the channel through a network that measures it and
puts each size into a queue the hub audits. The CnC environment and worker run one small
distributed graph after another, the environment naming each run in a register the worker
reads; a run that returned must have computed every item right.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TypeVar, overload

import stampede as sp
from stampede import cnc, snet
from stampede.cluster import Cluster
from stampede.errors import BarrierFailed, Full, StampedeError, Timeout, Unavailable

LEASE = 1.0
OP_TIMEOUT = 3.0
CALL_TIMEOUT = 2.0
CAPACITY = 64
# Timestamps: each incarnation (process) and generation (space) gets its own block.
INCARNATION = 1_000_000_000
GENERATION = 1_000_000

FRAMES, JOBS, MODE, MUTEX = "chaos/frames", "chaos/jobs", "chaos/mode", "chaos/mutex"
BARRIER = "chaos/barrier"
SIZES, CNC_RUN = "chaos/sizes", "chaos/cnc-run"
# One time zone per container, so that one's tasks never hold another's garbage collection.
FRAMES_ZONE, JOBS_ZONE, MODE_ZONE, SIZES_ZONE, CNC_ZONE = 0, 1, 2, 3, 4
# A graph run: the chain's length, and how long its environment waits for it.
CNC_STEPS = 30
CNC_WAIT = 10.0
# A graph's participants that do not all join within this are a distribution error.
CNC_JOIN = 30.0
# The S-Net stage: one box measures each frame; the frame's timestamp flows through.
SIZES_NET = """
net sizes {
    box measure ((frame) -> (<size>));
} connect measure;
"""
_R = TypeVar("_R")


class Log:
    def __init__(self, path: str) -> None:
        self.f = open(path, "a", buffering=1)
        self.lock = threading.Lock()

    def __call__(self, *words: object) -> None:
        with self.lock:
            self.f.write(" ".join(str(w) for w in words) + "\n")


def payload(ts: int) -> str:
    return f"item {ts}"


def timed(log: Log, op: str, call: Callable[[], _R]) -> _R:
    """Runs ``call``, logging it if it took more than half a second."""
    start = time.monotonic()
    outcome = "ok"
    try:
        return call()
    except BaseException as e:
        outcome = type(e).__name__
        raise
    finally:
        took = time.monotonic() - start
        if took > 0.5:
            log("SLOW", op, f"{start:.3f}", f"{took:.3f}", outcome)


class Stopped(Exception):
    """The role was told to stop while in a call that does not heed signals."""


def heeding(stop: threading.Event, call: Callable[[], _R]) -> _R:
    """Runs ``call`` on a thread of its own, raising ``Stopped`` if ``stop`` is set first (a
    graph's ``distribute`` waits up to 30 s for its participants and hears no signal)."""
    out: list[tuple[bool, object]] = []

    def run() -> None:
        try:
            out.append((True, call()))
        except BaseException as e:  # handed to the caller
            out.append((False, e))

    th = threading.Thread(target=run, daemon=True)
    th.start()
    while th.is_alive():
        if stop.is_set():
            raise Stopped
        th.join(0.1)
    ok, value = out[0]
    if not ok:
        assert isinstance(value, BaseException)
        raise value
    return value  # type: ignore[return-value]


# --- clients --------------------------------------------------------------------------

@overload
def reader(space: sp.Space, c: sp.Channel, zone: int) -> tuple[sp.Task, sp.ChannelInput]: ...
@overload
def reader(space: sp.Space, c: sp.Queue, zone: int) -> tuple[sp.Task, sp.QueueInput]: ...
@overload
def reader(space: sp.Space, c: sp.Register, zone: int) -> tuple[sp.Task, sp.RegisterInput]: ...
def reader(space: sp.Space, c: sp.Channel | sp.Queue | sp.Register, zone: int) -> tuple[
    sp.Task, sp.ChannelInput | sp.QueueInput | sp.RegisterInput
]:
    """A task reading ``c``, at infinity once attached so that it never holds the watermark
    (keep the task: it is the connection's)."""
    t = space.task(0, zone=zone)
    inp = t.attach_input(c)
    t.set_virtual_time(sp.INFINITY)
    return t, inp


def ch_producer(space: sp.Space, base: int, log: Log, stop: threading.Event) -> None:
    """Numbers items into the channel, acknowledged by flushes (and every 16th put's reply)."""
    frames = timed(log, "lookup", lambda: space.lookup_channel(FRAMES, timeout=CALL_TIMEOUT))
    t = space.task(base, zone=FRAMES_ZONE)
    out = t.attach_output(frames)
    log("ATT", f"{time.monotonic():.3f}")
    ts, acked = base, base
    while not stop.is_set():
        log("S", ts, f"{time.monotonic():.3f}")
        sync = ts % 16 == 0
        timed(log, "put", lambda: out.put(ts, payload(ts), timeout=CALL_TIMEOUT, sync=sync))
        if sync or ts % 8 == 7:
            if not sync:
                timed(log, "flush", out.flush)
            t.set_virtual_time(ts + 1)
            for a in range(acked, ts + 1):
                log("ACK", a)
            acked = ts + 1
        ts += 1
        time.sleep(0.002)


def ch_consumer(space: sp.Space, base: int, log: Log, stop: threading.Event) -> None:
    """Takes the newest unseen item and dawdles, so it skips; checks each payload."""
    frames = timed(log, "lookup", lambda: space.lookup_channel(FRAMES, timeout=CALL_TIMEOUT))
    t, inp = reader(space, frames, FRAMES_ZONE)
    gen = base // GENERATION
    while not stop.is_set():
        try:
            ts, value = timed(log, "get", lambda: inp.get(sp.NEWEST_UNSEEN, timeout=CALL_TIMEOUT))
        except Timeout:
            continue
        if value != payload(ts):
            log("CORRUPT", ts, repr(value)[:60])
        log("GOT", gen, ts)
        timed(log, "consume", lambda: inp.consume_until(ts))
        time.sleep(0.02)


def q_producer(space: sp.Space, base: int, log: Log, stop: threading.Event) -> None:
    """Puts numbered jobs; a returned put is acknowledged."""
    jobs = timed(log, "lookup", lambda: space.lookup_queue(JOBS, timeout=CALL_TIMEOUT))
    t = space.task(base, zone=JOBS_ZONE)
    out = t.attach_output(jobs)
    log("ATT", f"{time.monotonic():.3f}")
    ts = base
    while not stop.is_set():
        log("S", ts, f"{time.monotonic():.3f}")
        try:
            timed(log, "put", lambda: out.put(ts, payload(ts), timeout=CALL_TIMEOUT))
        except Full:
            continue  # refused whole: the same job again
        log("ACK", ts)
        ts += 1
        if ts % 8 == 0:
            t.set_virtual_time(ts)
        time.sleep(0.004)


def q_consumer(space: sp.Space, base: int, log: Log, stop: threading.Event) -> None:
    """Gets jobs and consumes each; a killed or fenced consumer's jobs come back."""
    jobs = timed(log, "lookup", lambda: space.lookup_queue(JOBS, timeout=CALL_TIMEOUT))
    t, inp = reader(space, jobs, JOBS_ZONE)
    gen = base // GENERATION
    while not stop.is_set():
        try:
            item = timed(log, "get", lambda: inp.get(timeout=CALL_TIMEOUT))
        except Timeout:
            continue
        if item.value != payload(item.ts):
            log("CORRUPT", item.ts, repr(item.value)[:60])
        log("GOT", gen, item.ts)
        time.sleep(0.005)
        log("C", item.ts)
        timed(log, "consume", lambda: inp.consume(item.ticket))
        log("DONE", item.ts)


def reg_writer(space: sp.Space, base: int, log: Log, stop: threading.Event) -> None:
    """Writes increasing numbers; a returned write is acknowledged."""
    mode = timed(log, "lookup", lambda: space.lookup_register(MODE, timeout=CALL_TIMEOUT))
    t = space.task(base, zone=MODE_ZONE)
    out = t.attach_output(mode)
    log("ATT", f"{time.monotonic():.3f}")
    n = base
    while not stop.is_set():
        log("S", n, f"{time.monotonic():.3f}")
        timed(log, "write", lambda: out.write(n))
        log("ACK", n)
        n += 1
        t.set_virtual_time(n)
        time.sleep(0.01)


def reg_reader(space: sp.Space, base: int, log: Log, stop: threading.Event) -> None:
    """Reads the register; what one connection reads never goes back."""
    mode = timed(log, "lookup", lambda: space.lookup_register(MODE, timeout=CALL_TIMEOUT))
    t, inp = reader(space, mode, MODE_ZONE)
    gen = base // GENERATION
    while not stop.is_set():
        try:
            _, value = timed(log, "read", lambda: inp.read(timeout=CALL_TIMEOUT))
        except (Timeout, Unavailable):
            continue
        log("GOT", gen, value)
        time.sleep(0.01)


def mutex_user(space: sp.Space, base: int, log: Log, stop: threading.Event) -> None:
    """Takes the hub's cluster mutex in turn with another user: ``IN``/``OUT`` bracket each
    hold (monotonic clock); ``IN``'s last word says whether the lock reported that the
    previous holder's space died holding it."""
    c = Cluster.start(space, timeout=CALL_TIMEOUT)
    try:
        m = c.mutex(MUTEX)
        log("HOME", base, m.home)
        log("ATT", f"{time.monotonic():.3f}")
        while not stop.is_set():
            try:
                died = timed(log, "lock", lambda: m.lock(timeout=CALL_TIMEOUT))
            except Timeout:
                continue
            log("IN", base, f"{time.monotonic():.4f}", int(died))
            time.sleep(0.005)
            log("OUT", base, f"{time.monotonic():.4f}")
            timed(log, "unlock", m.unlock)
            time.sleep(0.002)
    finally:
        c.stop()


def barrier_rounds(c: Cluster, log: Log, stop: threading.Event) -> None:
    """Waits at the two-member barrier round after round: ``BW`` before each wait (the
    arrival), ``BOK`` after it returned; a failed barrier is joined again."""
    while not stop.is_set():
        try:
            b = c.barrier(BARRIER, 2)
        except (BarrierFailed, Timeout) as e:
            log("BFAIL", "join", type(e).__name__)
            continue
        while not stop.is_set():
            log("BW", f"{time.monotonic():.4f}")
            try:
                b.wait()
            except (BarrierFailed, Timeout) as e:
                log("BFAIL", "wait", type(e).__name__)
                break
            log("BOK", f"{time.monotonic():.4f}")
            time.sleep(0.01)


def barrier_member(space: sp.Space, base: int, log: Log, stop: threading.Event) -> None:
    """The other member of the hub's barrier."""
    c = Cluster.start(space, timeout=CALL_TIMEOUT)
    try:
        barrier_rounds(c, log, stop)
    finally:
        c.stop()


def snet_stage(space: sp.Space, base: int, log: Log, stop: threading.Event) -> None:
    """Feeds the channel's frames through an S-Net network (the library's feed, over the
    remote channel, on a thread of its own) and puts each size it emits into the hub's
    sizes queue: ``S``/``ACK gen ts`` for each put."""
    frames = timed(log, "lookup", lambda: space.lookup_channel(FRAMES, timeout=CALL_TIMEOUT))
    sizes = timed(log, "lookup", lambda: space.lookup_queue(SIZES, timeout=CALL_TIMEOUT))
    t_in, inp = reader(space, frames, FRAMES_ZONE)
    # At 0 for good: it puts at the frames' timestamps, which the queue does not order.
    t_out = space.task(0, zone=SIZES_ZONE)
    out = t_out.attach_output(sizes)
    log("ATT", f"{time.monotonic():.3f}")
    gen = base // GENERATION

    def measure(ctx: snet.BoxContext, frame: str) -> None:
        ctx.emit(0, len(frame))

    run = snet.Network.parse(SIZES_NET).run({"measure": measure})
    failed: list[StampedeError] = []

    def feed() -> None:
        try:
            run.feed(inp, "frame")
        except StampedeError as e:
            failed.append(e)
        run.close()

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        put_sizes(run, out, gen, failed, log, stop)
    finally:
        # Leaving ends the feed's get; a thread left inside the library at exit aborts it.
        space.leave()
        feeder.join(OP_TIMEOUT)


def put_sizes(run: snet.NetworkRun, out: sp.QueueOutput, gen: int,
              failed: list[StampedeError], log: Log, stop: threading.Event) -> None:
    """The S-Net stage's output: each size the network emits, put into the sizes queue."""
    while not stop.is_set():
        try:
            r = timed(log, "recv", lambda: run.recv(timeout=CALL_TIMEOUT))
        except Timeout:
            continue
        if r is None:  # the feed ended (its connection failed) and the network drained
            if failed:
                raise failed[0]
            return
        ts, size = r["<ts>"], r["<size>"]
        log("S", gen, ts, f"{time.monotonic():.3f}")
        while True:
            try:
                timed(log, "put", lambda: out.put(ts, f"{gen} {ts} {size}", timeout=CALL_TIMEOUT))
                break
            except Full:
                if stop.is_set():
                    return
        log("ACK", gen, ts)


def chain(executor: cnc.Executor) -> tuple[cnc.Graph, cnc.ItemCollection, cnc.TagCollection]:
    """x[i] = x[i-1] + i, step i and item x[i] in the space of rank i % 2: every step gets
    its input from the other space."""
    g = cnc.Graph(executor)
    x, ids = g.items("x"), g.tags("ids")

    def add(ctx: cnc.StepContext, tag: tuple[int]) -> None:
        (i,) = tag
        ctx.put(x, i, ctx.get(x, i - 1) + i)

    ids.prescribes(g.steps("add", add).compute_on(lambda tag: tag[0] % 2))
    x.home(lambda tag: tag[0] % 2)
    return g, x, ids


def graph_failure(e: StampedeError) -> str:
    """What ended a graph run, in one word."""
    if isinstance(e, cnc.ParticipantLost):
        return "participant-lost"
    if isinstance(e, cnc.DistributionFailed):
        return "distribution-failed"
    if isinstance(e, cnc.ParticipantUnreachable):
        return "network"
    return type(e).__name__


def cnc_env(space: sp.Space, base: int, log: Log, stop: threading.Event) -> None:
    """Rank 0 of one chain graph after another, each under a new name written to the run
    register first; a failed run ends the generation."""
    runs = timed(log, "lookup", lambda: space.lookup_register(CNC_RUN, timeout=CALL_TIMEOUT))
    t = space.task(base, zone=CNC_ZONE)
    out = t.attach_output(runs)
    log("ATT", f"{time.monotonic():.3f}")
    executor = cnc.Executor(1)
    k = 0
    while not stop.is_set():
        k += 1
        name = f"chain-{base + k}"
        g, x, ids = chain(executor)
        timed(log, "write", lambda: out.write(f"{name} {space.id}"))
        t.set_virtual_time(base + k)
        log("CNC", name)
        try:
            timed(log, "distribute", lambda: heeding(stop, lambda: g.distribute(space, name, 0, 2)))
            for i in reversed(range(1, CNC_STEPS)):
                g.put_tag(ids, i)
            g.put(x, 0, 0)
            timed(log, "cnc-wait", lambda: g.wait(timeout=CNC_WAIT))
            got = timed(log, "cnc-get", lambda: [g.get(x, i) for i in range(CNC_STEPS)])
            want = [i * (i + 1) // 2 for i in range(CNC_STEPS)]
            if got == want:
                log("CNCOK", name)
            else:
                bad = next(i for i in range(CNC_STEPS) if got[i] != want[i])
                log("CNCBAD", name, f"x[{bad}]={got[bad]!r}")
            timed(log, "release", g.release)
        except StampedeError as e:
            log("CNCFAIL", name, graph_failure(e))
            raise


def cnc_worker(space: sp.Space, base: int, log: Log, stop: threading.Event) -> None:
    """Rank 1 of each run the register names, once: serves it (in slices, so that a SIGTERM
    is heard) until released or its environment is lost."""
    runs = timed(log, "lookup", lambda: space.lookup_register(CNC_RUN, timeout=CALL_TIMEOUT))
    t, inp = reader(space, runs, CNC_ZONE)
    executor = cnc.Executor(1)
    served: set[str] = set()
    while not stop.is_set():
        try:
            _, run = timed(log, "read", lambda: inp.read(timeout=CALL_TIMEOUT))
        except (Timeout, Unavailable):
            continue
        name, env = run.split()
        if name in served or env not in space.spaces():  # done, or its environment is gone
            time.sleep(0.02)
            continue
        served.add(name)
        g, _, _ = chain(executor)
        try:
            timed(log, "distribute", lambda: heeding(stop, lambda: g.distribute(space, name, 1, 2)))
        except StampedeError as e:  # its environment is gone: the next run
            log("CNCFAIL", name, graph_failure(e))
            continue
        while not stop.is_set():
            try:
                g.serve(timeout=0.2)
            except Timeout:
                continue
            except StampedeError as e:
                log("CNCFAIL", name, graph_failure(e))
                break
            log("SERVED", name)
            break


CLIENTS: dict[str, Callable[[sp.Space, int, Log, threading.Event], None]] = {
    "ch-producer": ch_producer,
    "ch-consumer": ch_consumer,
    "q-producer": q_producer,
    "q-consumer": q_consumer,
    "reg-writer": reg_writer,
    "reg-reader": reg_reader,
    "mutex-user": mutex_user,
    "barrier-member": barrier_member,
    "snet-stage": snet_stage,
    "cnc-env": cnc_env,
    "cnc-worker": cnc_worker,
}


def client(role: str, a: argparse.Namespace) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    log = Log(a.log)
    log("START", a.incarnation, os.getpid(), f"{time.monotonic():.3f}")
    gen = 0
    while not stop.is_set():
        try:
            space = timed(log, "join", lambda: sp.Space.join(
                a.app, mode="client", connect=[a.endpoint], lease=LEASE,
                op_timeout=OP_TIMEOUT, connect_timeout=5.0))
        except StampedeError as e:
            log("JOINFAIL", type(e).__name__)
            time.sleep(0.3)
            continue
        gen += 1
        base = a.incarnation * INCARNATION + gen * GENERATION
        log("JOIN", gen, space.id, base)
        try:
            CLIENTS[role](space, base, log, stop)
        except StampedeError as e:
            log("LOST", gen, type(e).__name__, str(e)[:120].replace("\n", " "))
        except Stopped:
            pass
        finally:
            start = time.monotonic()
            space.leave()
            log("LEFT", gen, f"{time.monotonic() - start:.3f}")
    log("BYE")


# --- the owner -------------------------------------------------------------------------

def hub(a: argparse.Namespace) -> None:
    log = Log(a.log)
    space = sp.Space.join(a.app, mode="router", listen=[a.endpoint], lease=LEASE,
                          op_timeout=OP_TIMEOUT)
    frames = space.channel(FRAMES, capacity=CAPACITY, zone=FRAMES_ZONE)
    jobs = space.queue(JOBS, capacity=4 * CAPACITY, zone=JOBS_ZONE)
    space.register(MODE, zone=MODE_ZONE)
    sizes = space.queue(SIZES, capacity=4 * CAPACITY, zone=SIZES_ZONE)
    space.register(CNC_RUN, zone=CNC_ZONE)
    # The cluster mutex is homed where it is first made: here, with the owner.
    cluster = Cluster.start(space, timeout=2 * CALL_TIMEOUT)
    cluster.mutex(MUTEX)
    # The owner's own record of every job consumed (reclaimed once consumed).
    jobs.on_garbage(lambda ts, value: log("Q", ts))
    # The drain's task exists from the start, at infinity, so it never holds the watermark.
    drain, drain_in = reader(space, jobs, JOBS_ZONE)
    done = threading.Event()
    audited = [0]

    def audit() -> None:
        t, inp = reader(space, frames, FRAMES_ZONE)
        while not done.is_set():
            try:
                ts, value = inp.get(sp.NEXT_UNSEEN, timeout=0.2)
            except Timeout:
                continue
            if value != payload(ts):
                log("CORRUPT", ts, repr(value)[:60])
            log("A", ts)
            audited[0] += 1
            inp.consume(ts)

    def sizes_audit() -> None:
        # The S-Net stage's sizes, each consumed as it is taken (the queue's exactly once).
        t, inp = reader(space, sizes, SIZES_ZONE)
        while not done.is_set():
            try:
                item = inp.get(timeout=0.2)
            except Timeout:
                continue
            log("N", item.value)
            inp.consume(item.ticket)

    def membership() -> None:
        seen = {space.id}
        while not done.is_set():
            # The change happened before `after`; a space away now was away at some instant
            # after `before` (the checker needs both bounds).
            before = time.monotonic()
            now = set(space.spaces())
            after = time.monotonic()
            for s in sorted(now - seen):
                log("ARRIVED", s, f"{after:.3f}")
            for s in sorted(seen - now):
                log("LEFT", s, f"{after:.3f}", f"{before:.3f}")
            seen = now
            time.sleep(0.05)

    def barrier() -> None:
        barrier_rounds(cluster, log, done)

    threads = [threading.Thread(target=f, daemon=True)
               for f in (audit, sizes_audit, membership, barrier)]
    for th in threads:
        th.start()
    log("HUB", space.id)
    print("READY", space.id, flush=True)
    for line in sys.stdin:
        if line.strip() == "FINAL":
            print("FINAL", json.dumps(final(space, frames, drain_in, sizes, audited, log)),
                  flush=True)
            break
    done.set()
    for th in threads:
        th.join()
    cluster.stop()
    space.leave()


def final(space: sp.Space, frames: sp.Channel, inp: sp.QueueInput, sizes: sp.Queue,
          audited: list[int], log: Log) -> dict[str, object]:
    """Once every client has left: the auditor has drained the channel, garbage collection
    reclaimed it, the sizes' auditor has taken every size, and the queue's remaining jobs
    are taken here."""
    waited = time.monotonic()
    deadline = waited + 4 * LEASE + 10
    while len(space.spaces()) > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    clients_gone = time.monotonic() - waited
    # The auditor is at infinity: once it consumed everything, nothing holds the channel.
    last, quiet = audited[0], time.monotonic()
    while time.monotonic() < deadline and (len(frames) > 0 or time.monotonic() - quiet < 1.0):
        if audited[0] != last:
            last, quiet = audited[0], time.monotonic()
        space.collect()
        time.sleep(0.05)
    while time.monotonic() < deadline and sizes.stats().waiting > 0:
        time.sleep(0.05)
    drained = []
    while True:
        try:
            item = inp.try_get()
        except Unavailable:
            break
        drained.append(item.ts)
        log("D", item.ts)
        inp.consume(item.ticket)
    fs, qs, ss = frames.stats(), inp.queue.stats(), sizes.stats()
    mode = space.lookup_register(MODE)
    peek = mode.peek() if mode is not None else None
    # What still holds a zone below infinity, other than the horizon (the newest put) and
    # the floor a zone without live tasks keeps for late joiners.
    holds = [f"zone {z}: {h.description}"
             for z in (FRAMES_ZONE, JOBS_ZONE, MODE_ZONE, SIZES_ZONE, CNC_ZONE)
             for h in space.explain(z).holds
             if h.ts != sp.INFINITY and h.cause not in ("horizon", "no_live_task")]
    return {
        "spaces": space.spaces(),
        "clients_gone_s": round(clients_gone, 3),
        "frames": {"items": fs.items, "connections": fs.connections, "open": fs.open,
                   "puts": fs.puts, "gets": fs.gets, "reclaimed": fs.reclaimed,
                   "skipped": fs.skipped, "full": fs.full},
        "jobs": {"waiting": qs.waiting, "held": qs.held, "puts": qs.puts, "gets": qs.gets,
                 "consumed": qs.consumed, "redelivered": qs.redelivered, "full": qs.full},
        "sizes": {"waiting": ss.waiting, "held": ss.held, "puts": ss.puts,
                  "consumed": ss.consumed},
        "drained": drained,
        "register": None if peek is None else peek[1],
        "holds": holds,
        "stats": {k: getattr(space.stats(), k) for k in ("spaces_lost", "refused", "malformed")},
    }


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("role", choices=["hub", *CLIENTS])
    p.add_argument("--app", required=True)
    p.add_argument("--endpoint", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--incarnation", type=int, default=1)
    a = p.parse_args()
    if a.role == "hub":
        hub(a)
    else:
        client(a.role, a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
