"""The processes of the fault harness (``bench/chaos.py``).

``python bench/chaos_roles.py ROLE --app APP --endpoint EP --log FILE [--incarnation K]``

``hub`` is the application's router and owns the containers: a bounded channel with an
auditor task that gets every item (it lives with the owner, so it sees exactly what the
owner stored), a queue and a register. It watches membership and answers ``FINAL`` on stdin
with what the checker needs. Every other role is a client that joins through the relay, works
until its connection fails, and then joins again as a new *generation*: a fresh address space
whose timestamps start above everything before it. Each role appends one line per event to its
log, written through at once so that a SIGKILL loses nothing the role had already done:

- ``S ts mono``   a put is about to be sent (monotonic clock, shared by every process)
- ``ACK ts``      the put is acknowledged: its call returned, or a flush covering it did
- ``GOT gen ts``  an item got on generation ``gen``'s connection
- ``C ts`` / ``DONE ts``  a queue item's consume is about to be sent / returned
- ``HOME base space``  where the cluster mutex lives, as this generation found it
- ``A ts`` / ``Q ts`` / ``D ts``  (hub) audited, a job reclaimed once consumed, drained
- ``SLOW op mono seconds outcome``  a call that took longer than half a second
- ``JOIN gen space base`` / ``LOST gen error`` / ``LEFT gen seconds``  generations
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
from typing import TypeVar

import stampede as sp
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
# One time zone per container, so that one's tasks never hold another's garbage collection.
FRAMES_ZONE, JOBS_ZONE, MODE_ZONE = 0, 1, 2
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


# --- clients --------------------------------------------------------------------------

def ch_producer(space: sp.Space, base: int, log: Log, stop: threading.Event) -> None:
    """Numbers items into the channel, acknowledged by flushes (and every 16th put's reply)."""
    frames = timed(log, "lookup", lambda: space.lookup_channel(FRAMES, timeout=CALL_TIMEOUT))
    t = space.task(base, zone=FRAMES_ZONE)
    out = t.attach_output(frames)
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
    t = space.task(0, zone=FRAMES_ZONE)
    inp = t.attach_input(frames)
    t.set_virtual_time(sp.INFINITY)
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
    t = space.task(0, zone=JOBS_ZONE)
    inp = t.attach_input(jobs)
    t.set_virtual_time(sp.INFINITY)
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
    t = space.task(0, zone=MODE_ZONE)
    inp = t.attach_input(mode)
    t.set_virtual_time(sp.INFINITY)
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


CLIENTS: dict[str, Callable[[sp.Space, int, Log, threading.Event], None]] = {
    "ch-producer": ch_producer,
    "ch-consumer": ch_consumer,
    "q-producer": q_producer,
    "q-consumer": q_consumer,
    "reg-writer": reg_writer,
    "reg-reader": reg_reader,
    "mutex-user": mutex_user,
    "barrier-member": barrier_member,
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
    # The cluster mutex is homed where it is first made: here, with the owner.
    cluster = Cluster.start(space, timeout=2 * CALL_TIMEOUT)
    cluster.mutex(MUTEX)
    # The owner's own record of every job consumed (reclaimed once consumed).
    jobs.on_garbage(lambda ts, value: log("Q", ts))
    # The drain's task exists from the start, at infinity, so it never holds the watermark.
    drain = space.task(0, zone=JOBS_ZONE)
    drain_in = drain.attach_input(jobs)
    drain.set_virtual_time(sp.INFINITY)
    done = threading.Event()
    audited = [0]

    def audit() -> None:
        t = space.task(0, zone=FRAMES_ZONE)
        inp = t.attach_input(frames)
        t.set_virtual_time(sp.INFINITY)
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

    def membership() -> None:
        seen = {space.id}
        while not done.is_set():
            now = set(space.spaces())
            for s in sorted(now - seen):
                log("ARRIVED", s, f"{time.monotonic():.3f}")
            for s in sorted(seen - now):
                log("LEFT", s, f"{time.monotonic():.3f}")
            seen = now
            time.sleep(0.05)

    def barrier() -> None:
        barrier_rounds(cluster, log, done)

    threads = [threading.Thread(target=f, daemon=True) for f in (audit, membership, barrier)]
    for th in threads:
        th.start()
    log("HUB", space.id)
    print("READY", space.id, flush=True)
    for line in sys.stdin:
        if line.strip() == "FINAL":
            print("FINAL", json.dumps(final(space, frames, drain_in, audited, log)), flush=True)
            break
    done.set()
    for th in threads:
        th.join()
    cluster.stop()
    space.leave()


def final(space: sp.Space, frames: sp.Channel, inp: sp.QueueInput, audited: list[int],
          log: Log) -> dict[str, object]:
    """Once every client has left: the auditor has drained the channel, garbage collection
    reclaimed it, and the queue's remaining jobs are taken here."""
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
    drained = []
    while True:
        try:
            item = inp.try_get()
        except Unavailable:
            break
        drained.append(item.ts)
        log("D", item.ts)
        inp.consume(item.ticket)
    fs, qs = frames.stats(), inp.queue.stats()
    mode = space.lookup_register(MODE)
    peek = mode.peek() if mode is not None else None
    # What still holds a zone below infinity, other than the horizon (the newest put) and
    # the floor a zone without live tasks keeps for late joiners.
    holds = [f"zone {z}: {h.description}" for z in (FRAMES_ZONE, JOBS_ZONE, MODE_ZONE)
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
