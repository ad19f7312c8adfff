"""The fault harness (``make chaos``; a short run in ``make test``).

``python bench/chaos.py [--seconds S] [--seed N] [--keep DIR]`` runs an application across
two emulated hosts (``bench/chaos_net.py``): the hub (router, owner of a channel, a queue and
a register, with an auditor) on host ``a``; producers and consumers of each container on
host ``b``, reaching the hub only through a Toxiproxy relay. For S seconds it injects faults
on a schedule drawn from the seed, so that a failing run replays with the same ``--seed``:

- on the relay: latency (1 ms and 20 ms with jitter), a bandwidth limit, stalls (the relay
  stopped: nothing moves, nothing closes), resets, half-open connections (bytes from the hub
  vanish without a close);
- on the links: a partition that heals, a ``tc tbf`` rate limit;
- on the processes: SIGKILL (restarted as a new incarnation), SIGSTOP for less than the lease,
  and for more than the lease (the space must come back fenced).

Then it lifts every fault, checks that work resumed, stops the clients (timing each
shutdown), has the hub drain what is left, and checks the logs (``bench/chaos_roles.py``):

- no acknowledged put lost: every acknowledged channel item reached the owner's auditor, every
  acknowledged job was consumed or is still queued, the register holds the last acknowledged
  write or a later one;
- nothing delivered twice: each item once per channel connection, each job consumed once;
  register reads never go back on one connection;
- fencing: once the hub saw a space leave, nothing that space put afterwards was stored;
- garbage collection resumed (the channel emptied) and nothing leaked (no other space, open
  item, held job or hold left at the owner);
- a cluster mutex is held by one task at a time, a holder dropped while stopped or cut off
  loses it to the next (told its owner died) and learns it at its unlock, and a barrier
  never lets a member leave a round the other has not arrived at;
- every blocked call returned within its bound (call timeout + operation timeout + lease,
  plus 2 s), not counting time its own process was stopped; the longest is reported with the
  fault that was active.

It writes the ``chaos`` part of ``bench-results/reliability.json`` and prints the report table
(with the soak and fuzzing records already there).
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

import reliability_record
from chaos_net import Hosts, Relay, relay_binary
from chaos_roles import (CALL_TIMEOUT, CNC_JOIN, CNC_WAIT, GENERATION, LEASE, OP_TIMEOUT,
                         payload)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = ROOT / "bench-results"
CLIENTS = ["ch-producer", "ch-consumer", "q-producer", "q-consumer-1", "q-consumer-2",
           "reg-writer", "reg-reader", "mutex-user-1", "mutex-user-2", "barrier-member",
           "snet-stage", "cnc-env", "cnc-worker"]
WRITERS = ["ch-producer", "q-producer", "reg-writer", "mutex-user-1", "mutex-user-2",
           "snet-stage", "cnc-env"]
BOUND = CALL_TIMEOUT + OP_TIMEOUT + LEASE + 2.0
# Calls with bounds of their own: a graph's participants have CNC_JOIN to join, and its
# environment waits CNC_WAIT for it.
BOUNDS = {"distribute": CNC_JOIN + BOUND, "cnc-wait": CNC_WAIT + BOUND}
SHUTDOWN_BOUND = 10.0
# How long a stop past the lease waits for its writer to be connected.
CONNECT_WAIT = 8.0
# The hub logs membership by polling: a departure may reach others first by this much.
MEMBERSHIP_LAG = 0.5
RELAY_FAULTS = ["latency-1ms", "latency-20ms", "bandwidth", "stall", "reset", "half-open"]
LINK_FAULTS = ["partition", "rate-limit"]
PROCESS_FAULTS = ["kill", "stop", "stop-past-lease"]


@dataclass
class Fault:
    kind: str
    start: float
    end: float
    target: str = ""


@dataclass
class Report:
    """One run's figures and verdict."""

    seed: int
    seconds: float
    namespaces: bool
    faults: dict[str, int] = field(default_factory=dict)
    operations: dict[str, int] = field(default_factory=dict)
    lost: int = 0
    duplicated: int = 0
    fenced_spaces: int = 0
    fence_violations: int = 0
    in_doubt: int = 0
    longest_call: float = 0.0
    longest_call_what: str = ""
    shutdown_max: float = 0.0
    generations: int = 0
    violations: list[str] = field(default_factory=list)
    # Open defects the checker recognises, by what they are: counted and reported, not failed.
    note: str = ""


class Client:
    """One client role and its incarnations (processes)."""

    def __init__(self, name: str, logdir: Path, prefix: list[str], args: list[str]) -> None:
        self.name = name
        self.role = name.rsplit("-", 1)[0] if name[-1].isdigit() else name
        self.logdir, self.prefix, self.args = logdir, prefix, args
        self.incarnation = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.pids: list[int] = []
        self.start()

    @property
    def log(self) -> Path:
        return self.logdir / f"{self.name}.log"

    def start(self) -> None:
        self.incarnation += 1
        with open(self.logdir / f"{self.name}.err", "ab") as err:
            self.proc = subprocess.Popen(
                self.prefix + [self.role] + self.args
                + ["--log", str(self.log), "--incarnation", str(self.incarnation)],
                stdout=subprocess.DEVNULL, stderr=err)
        self.pids.append(self.proc.pid)

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)

    def connected(self) -> bool:
        """Whether its current generation has made its connection and still works."""
        connected = False
        for line in read(self.log):
            if line.startswith("ATT "):
                connected = True
            elif line.startswith(("JOIN ", "LOST ", "LEFT ")):
                connected = False
        return connected


def schedule(seed: int, seconds: float, kinds: list[str]) -> list[tuple[str, float, float]]:
    """(kind, duration, gap after) for ``seconds``: every kind once in a seeded order, then
    seeded choices."""
    rng = random.Random(seed)
    first = kinds[:]
    rng.shuffle(first)
    out: list[tuple[str, float, float]] = []
    t = 0.0
    while t < seconds:
        if not kinds:
            return [("none", seconds, 0.0)]
        kind = first.pop() if first else rng.choice(kinds)
        duration = {"stop": rng.uniform(0.2, 0.5 * LEASE),
                    "stop-past-lease": rng.uniform(2.5 * LEASE, 4 * LEASE),
                    "kill": 0.0, "reset": rng.uniform(0.2, 0.6),
                    "half-open": rng.uniform(1.5 * LEASE, 3 * LEASE)}.get(kind, rng.uniform(1, 3))
        gap = rng.uniform(0.5, 2.0)
        out.append((kind, duration, gap))
        t += duration + gap
    return out


class Chaos:
    """The hosts, the relay, the hub and the clients of one run."""

    def __init__(self, seconds: float, seed: int, logdir: Path,
                 only: list[str] | None = None) -> None:
        self.seconds, self.seed, self.logdir = seconds, seed, logdir
        self.rng = random.Random(seed ^ 0x5EED)
        self.faults: list[Fault] = []
        self.hosts = Hosts()
        binary = relay_binary()
        if binary is None:
            self.hosts.close()
            raise RuntimeError("Toxiproxy is not installed: run `make toxiproxy`")
        host, port = self.hosts.router
        self.relay = Relay(binary, self.hosts.relay, f"{host}:{port}", seed)
        self.app = f"chaos{os.getpid()}"
        py = [sys.executable, str(HERE / "chaos_roles.py")]
        with open(logdir / "hub.err", "ab") as err:
            self.hub = subprocess.Popen(
                self.hosts.wrap("a") + py + ["hub", "--app", self.app, "--endpoint",
                                             f"tcp/{host}:{port}", "--log",
                                             str(logdir / "hub.log")],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, stderr=err)
        assert self.hub.stdout is not None
        if not self.hub.stdout.readline().startswith("READY"):
            raise RuntimeError(f"the hub did not start: {(logdir / 'hub.err').read_text()[-2000:]}")
        args = ["--app", self.app, "--endpoint", f"tcp/{self.hosts.relay}"]
        self.clients = {n: Client(n, logdir, self.hosts.wrap("b") + py, args) for n in CLIENTS}
        self.kinds = RELAY_FAULTS + PROCESS_FAULTS + (LINK_FAULTS if self.hosts.namespaces else [])
        if only is not None:
            self.kinds = [k for k in self.kinds if k in only]
        self.stopped: list[tuple[int, float, float]] = []  # (pid, from, to)

    # --- faults ---------------------------------------------------------------------

    def inject(self, kind: str, duration: float) -> None:
        start = time.monotonic()
        target = ""
        r = self.relay
        if kind.startswith("latency"):
            ms = 1 if kind == "latency-1ms" else 20
            for stream in ("upstream", "downstream"):
                r.add(f"{kind}-{stream}", "latency", stream, latency=ms, jitter=max(1, ms // 4))
            time.sleep(duration)
            for stream in ("upstream", "downstream"):
                r.remove(f"{kind}-{stream}")
        elif kind == "bandwidth":
            for stream in ("upstream", "downstream"):
                r.add(f"bw-{stream}", "bandwidth", stream, rate=64)
            time.sleep(duration)
            for stream in ("upstream", "downstream"):
                r.remove(f"bw-{stream}")
        elif kind == "stall":
            r.pause(True)
            time.sleep(duration)
            r.pause(False)
        elif kind == "reset":
            r.add("reset", "reset_peer", "upstream", timeout=0)
            time.sleep(duration)
            r.remove("reset")
        elif kind == "half-open":
            r.add("half-open", "timeout", "downstream", timeout=0)
            time.sleep(duration)
            r.remove("half-open")
        elif kind == "partition":
            self.hosts.partition(True)
            time.sleep(duration)
            self.hosts.partition(False)
        elif kind == "rate-limit":
            self.hosts.rate_limit(1024)
            time.sleep(duration)
            self.hosts.rate_limit(None)
        elif kind == "none":
            time.sleep(duration)
            return
        elif kind == "kill":
            c = self.clients[self.rng.choice(CLIENTS)]
            target = c.name
            c.signal(signal.SIGKILL)
            # Its sockets are closed before its exit completes; a namespaced process's exit
            # can wait long on the kernel, so it is reaped in the background.
            assert c.proc is not None
            threading.Thread(target=c.proc.wait, daemon=True).start()
            time.sleep(self.rng.uniform(0.1, 0.8))
            c.start()
        elif kind.startswith("stop"):
            # A writer stopped past its lease shows fencing: its late puts must be refused.
            # Only a connection it had when it was dropped is fenced, so the stop waits (a
            # little) for the writer to be connected, not still joining after an earlier fault.
            c = self.clients[self.rng.choice(WRITERS if kind == "stop-past-lease" else CLIENTS)]
            if kind == "stop-past-lease":
                ready = time.monotonic() + CONNECT_WAIT
                while not c.connected() and time.monotonic() < ready:
                    time.sleep(0.05)
            assert c.proc is not None
            target, pid = c.name, c.proc.pid
            c.signal(signal.SIGSTOP)
            time.sleep(duration)
            c.signal(signal.SIGCONT)
            self.stopped.append((pid, start, time.monotonic()))
        fault = Fault(kind, start, time.monotonic(), target)
        self.faults.append(fault)
        with open(self.logdir / "faults.log", "a") as f:
            f.write(f"{fault.kind} {fault.start:.3f} {fault.end:.3f} {fault.target}\n")

    def run(self) -> Report:
        plan = schedule(self.seed, self.seconds, self.kinds)
        time.sleep(2.0)  # every client joined and working before the first fault
        began = time.monotonic()
        for kind, duration, gap in plan:
            self.inject(kind, duration)
            time.sleep(gap)
        # Faults lifted: work must resume on every container, within its bounds: a graph's
        # participants may first wait out a `distribute` with a partner that died.
        before = self.progress()
        time.sleep(3 * LEASE + 2)
        deadline = time.monotonic() + CNC_JOIN + CNC_WAIT
        while True:
            after = self.progress()
            stalled = [k for k in before if after.get(k, 0) <= before[k]]
            if not stalled or any(not k.startswith("cnc") for k in stalled) \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        shutdowns = self.stop_clients()
        assert self.hub.stdin is not None and self.hub.stdout is not None
        self.hub.stdin.write("FINAL\n")
        self.hub.stdin.flush()
        final: dict[str, object] = {}
        for line in self.hub.stdout:
            if line.startswith("FINAL "):
                final = json.loads(line[6:])
                break
        self.hub.stdin.close()
        try:
            self.hub.wait(timeout=SHUTDOWN_BOUND)
        except subprocess.TimeoutExpired:
            self.hub.kill()
        report = check(self, final, time.monotonic() - began)
        report.shutdown_max = max(shutdowns.values(), default=0.0)
        for name, took in shutdowns.items():
            if took > SHUTDOWN_BOUND:
                report.violations.append(f"{name} took {took:.1f} s to shut down")
        for k in stalled:
            report.violations.append(f"{k}: no progress after the faults were lifted")
        if not self.hosts.namespaces:
            report.note = f"loopback only, no link faults ({self.hosts.why_not})"
        return report

    def progress(self) -> dict[str, int]:
        """Acknowledged puts and gets so far, per container."""
        count = Counter[str]()
        for c in self.clients.values():
            for line in read(c.log):
                if line.startswith(("ACK ", "GOT ", "CNCOK ")):
                    count[f"{c.role} {line[:3]}"] += 1
        return {k: v for k, v in count.items()}

    def stop_clients(self) -> dict[str, float]:
        took = {}
        for c in self.clients.values():
            c.signal(signal.SIGTERM)
        start = time.monotonic()
        for c in self.clients.values():
            assert c.proc is not None
            try:
                c.proc.wait(timeout=max(0.1, SHUTDOWN_BOUND + 5 - (time.monotonic() - start)))
            except subprocess.TimeoutExpired:
                c.proc.kill()
                c.proc.wait()
            took[c.name] = time.monotonic() - start
        return took

    def close(self) -> None:
        for c in self.clients.values():
            if c.proc is not None and c.proc.poll() is None:
                c.proc.kill()
                c.proc.wait()
        if self.hub.poll() is None:
            self.hub.kill()
            self.hub.wait()
        self.relay.close()
        self.hosts.close()


def read(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []


def check(run: Chaos, final: dict[str, object], seconds: float) -> Report:
    """The checker: the logs and the hub's final state against the guarantees."""
    r = Report(run.seed, round(seconds, 1), run.hosts.namespaces)
    r.faults = dict(Counter(f.kind for f in run.faults))
    bad = r.violations
    if not final:
        bad.append("the hub gave no final report")
        return r
    logs = {name: read(c.log) for name, c in run.clients.items()}
    hub = read(run.logdir / "hub.log")
    for name, lines in [("hub", hub)] + list(logs.items()):
        for line in lines:
            if line.startswith("CORRUPT"):
                bad.append(f"{name}: {line}")
        # A process that died of its own (an exception, a panic, an abort at exit).
        err = "\n".join(read(run.logdir / f"{name}.err"))
        for word in ("Traceback", "panicked", "FATAL"):
            if word in err:
                at = err.index(word)
                bad.append(f"{name} crashed: {err[at:at + 300]!r}")
                break

    def acks(name: str) -> list[int]:
        return [int(x.split()[1]) for x in logs[name] if x.startswith("ACK ")]

    def sends(name: str) -> dict[int, float]:
        return {int(p[1]): float(p[2]) for p in (x.split() for x in logs[name])
                if p[0] == "S"}

    # Fencing: when the hub saw each space leave (the change happened before the first
    # time, and the space was away at some instant after the second), and which generation
    # each space was, with when its writer's connection was made.
    departures: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for line in hub:
        p = line.split()
        if p[0] == "LEFT":
            departures[p[1]].append((float(p[2]), float(p[3]) if len(p) > 3 else float(p[2])))
    gen_space: dict[str, dict[int, str]] = defaultdict(dict)  # client -> base -> space
    attached: dict[str, dict[int, float]] = defaultdict(dict)  # client -> base -> ATT time
    for name, lines in logs.items():
        base = None
        for line in lines:
            p = line.split()
            if p[0] == "JOIN":
                base = int(p[3])
                gen_space[name][base] = p[2]
            elif p[0] == "ATT" and base is not None:
                attached[name].setdefault(base, float(p[1]))
    r.generations = sum(len(v) for v in gen_space.values())

    def fenced_puts(name: str, stored: set[int]) -> None:
        sent = sends(name)
        # Calls that failed, typed, once past a fence: their writer was stopped inside them.
        failed = [(float(p[2]), float(p[2]) + float(p[3])) for p in (x.split() for x in logs[name])
                  if p[0] == "SLOW" and p[1] in ("put", "write", "flush") and p[4] != "ok"]
        for base, space in gen_space[name].items():
            t_att = attached[name].get(base)
            if t_att is None:
                continue  # never connected: nothing to fence
            # The first departure seen after the connection was made: a space seen leaving
            # while it was still joining or looking up comes back afresh and its later
            # connection is new, not fenced.
            t_left = min((seen for seen, polled in departures.get(space, []) if polled > t_att),
                         default=None)
            if t_left is None:
                continue
            mine = [t for ts, t in sent.items() if base <= ts < base + GENERATION]
            late = [ts for ts, t in sent.items() if base <= ts < base + GENERATION and t > t_left]
            cut = bool(mine) and any(min(mine) <= a <= t_left < b for a, b in failed)
            if late or cut:
                r.fenced_spaces += 1
            for ts in late:
                if ts in stored:
                    r.fence_violations += 1
                    bad.append(f"{name}: put {ts} sent after its space {space[:8]} was "
                               f"seen leaving was stored")

    # Channel: every acknowledged item reached the auditor; once per connection.
    audited = [int(x.split()[1]) for x in hub if x.startswith("A ")]
    stored = set(audited)
    acked = acks("ch-producer")
    lost = [ts for ts in acked if ts not in stored]
    r.lost += len(lost)
    if lost:
        bad.append(f"channel: {len(lost)} acknowledged items lost, first {lost[:5]}")
    dup = len(audited) - len(stored)
    got: Counter[tuple[str, str]] = Counter()
    for line in logs["ch-consumer"]:
        p = line.split()
        if p[0] == "GOT":
            got[(p[1], p[2])] += 1
    dup += sum(n - 1 for n in got.values() if n > 1)
    if dup:
        bad.append(f"channel: {dup} items delivered twice on one connection")
    r.duplicated += dup
    fenced_puts("ch-producer", stored)
    r.operations["channel acknowledged puts"] = len(acked)
    r.operations["channel items audited"] = len(audited)
    r.operations["channel gets"] = sum(got.values())

    # Queue: every acknowledged job consumed once (the owner's record) or still queued.
    done: Counter[int] = Counter()
    for name in ("q-consumer-1", "q-consumer-2"):
        for line in logs[name]:
            p = line.split()
            if p[0] == "DONE":
                done[int(p[1])] += 1
    drained = [int(x) for x in final["drained"]]  # type: ignore[attr-defined]
    reclaimed = Counter(int(x.split()[1]) for x in hub if x.startswith("Q "))
    owner = reclaimed + Counter(drained)
    qacked = acks("q-producer")
    qlost = [ts for ts in qacked if owner[ts] == 0]
    r.lost += len(qlost)
    if qlost:
        bad.append(f"queue: {len(qlost)} acknowledged jobs lost, first {qlost[:5]}")
    twice = [ts for ts, n in (done + owner).items() if done[ts] > 1 or owner[ts] > 1]
    r.duplicated += len(twice)
    if twice:
        bad.append(f"queue: {len(twice)} jobs consumed twice, first {twice[:5]}")
    # A consume the owner applied but whose reply its consumer never saw (killed or cut off).
    r.in_doubt += sum(1 for ts in reclaimed if done[ts] == 0)
    fenced_puts("q-producer", set(owner))
    r.operations["queue acknowledged puts"] = len(qacked)
    r.operations["queue jobs consumed"] = sum(reclaimed.values())
    r.operations["queue jobs left and drained"] = len(drained)

    # Register: the last acknowledged write or a later one; reads never go back.
    wacked = acks("reg-writer")
    last = final["register"]
    if wacked and (not isinstance(last, int) or last < wacked[-1]):
        r.lost += 1
        bad.append(f"register: holds {last}, the last acknowledged write was {wacked[-1]}")
    reads: dict[str, int] = {}
    back = 0
    for line in logs["reg-reader"]:
        p = line.split()
        if p[0] == "GOT":
            v = int(p[2])
            if v < reads.get(p[1], -1):
                back += 1
            reads[p[1]] = max(v, reads.get(p[1], -1))
    if back:
        r.duplicated += back
        bad.append(f"register: {back} reads went back on one connection")
    fenced_puts("reg-writer", set())
    r.operations["register acknowledged writes"] = len(wacked)
    r.operations["register reads"] = sum(1 for x in logs["reg-reader"] if x.startswith("GOT"))

    # Cluster mutex: holds never overlap, except that a holder dropped while stopped or cut
    # off loses the mutex to the next waiter, which is told its owner died; if the dropped
    # holder comes back, its unlock is refused, so it learns too.
    @dataclass
    class Hold:
        t_in: float
        t_out: float
        base: int
        space: str
        died: bool
        refused: bool = False
        home: str = ""
        closed: bool = False  # its holder lived to unlock it

    holds: list[Hold] = []
    for name in ("mutex-user-1", "mutex-user-2"):
        user_spaces = gen_space[name]
        opened: dict[int, Hold] = {}
        ended: Hold | None = None  # the last hold closed, until another line
        home: dict[int, str] = {}
        for line in logs[name]:
            p = line.split()
            if p[0] == "HOME":
                home[int(p[1])] = p[2]
            elif p[0] == "IN":
                base = int(p[1])
                opened[base] = Hold(float(p[2]), float("inf"), base, user_spaces.get(base, ""),
                                    p[3] == "1", home=home.get(base, ""))
            elif p[0] == "OUT" and int(p[1]) in opened:
                ended = opened.pop(int(p[1]))
                ended.t_out = float(p[2])
                ended.closed = True
                holds.append(ended)
                continue
            elif p[0] == "LOST" and ended is not None:
                ended.refused = True
            if p[0] != "SLOW":
                ended = None
        # A hold cut off by a kill or a fence: open until its space was seen leaving.
        holds += opened.values()

    # When the hub saw each space away: from a departure to its return (a space that comes
    # back after a partition or a stop goes on afresh, with new grants).
    away: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for line in hub:
        p = line.split()
        if p[0] == "LEFT":
            away[p[1]].append((float(p[2]), float("inf")))
        elif p[0] == "ARRIVED" and away[p[1]] and away[p[1]][-1][1] == float("inf"):
            away[p[1]][-1] = (away[p[1]][-1][0], float(p[2]))

    def dropped(h: Hold) -> float:
        """When the hub saw the holder's space leave, first after the hold began."""
        return min((gone for gone, _ in away.get(h.space, []) if gone >= h.t_in - MEMBERSHIP_LAG),
                   default=float("inf"))

    for h in holds:
        if h.t_out == float("inf"):
            h.t_out = dropped(h)
    holds.sort(key=lambda h: h.t_in)

    def stale(h: Hold) -> bool:
        """Taken while its space was away: on a grant it got before it was dropped (a hold
        its holder never unlocked, killed or fenced, is a dropped holder's, not stale)."""
        return h.closed and any(gone - MEMBERSHIP_LAG <= h.t_in <= back + MEMBERSHIP_LAG
                   for gone, back in away.get(h.space, []))

    # One mutex, homed at the hub: a space that looks it up while the hub is out of reach
    # must fail, not make a second mutex under the name in its own space.
    hub_id = next((x.split()[1] for x in hub if x.startswith("HUB ")), "")
    split = 0
    overlaps = 0
    for i, h1 in enumerate(holds):
        gone = dropped(h1)
        told = False
        for h2 in holds[i + 1:]:
            if h2.t_in >= h1.t_out:
                break
            if h2.base == h1.base:
                continue
            if h1.home != h2.home:
                split += 1
                continue
            if stale(h1) or stale(h2):
                for h in (h1, h2):
                    if stale(h) and not h.refused:
                        bad.append(f"mutex: {h.base} held it after its space was dropped, "
                                   f"and its unlock was not refused")
                continue
            if gone <= h2.t_in + MEMBERSHIP_LAG:
                if not told and not h2.died:
                    bad.append(f"mutex: {h2.base} took it from the dropped {h1.base} untold")
                told = True
                continue
            overlaps += 1
            bad.append(f"mutex: holds of {h1.base} and {h2.base} overlap at {h2.t_in:.3f}")
    r.operations["mutex holds"] = len(holds)
    r.operations["mutex holds after a holder died"] = sum(h.died for h in holds)
    r.operations["mutex holds refused as stale"] = sum(h.refused for h in holds)
    r.duplicated += overlaps
    away_homes = sum(
        1 for name in ("mutex-user-1", "mutex-user-2") for x in logs[name]
        if x.startswith("HOME ") and x.split()[2] != hub_id)
    r.operations["mutex handles homed away from the hub"] = away_homes
    if away_homes:
        r.duplicated += split
        bad.append(f"mutex: {away_homes} handles homed away from the hub, a second mutex "
                   f"under its name ({split} overlapping holds)")

    # Barrier: nobody leaves a round the other has not arrived at. Each completed wait takes
    # one arrival of the other member (a failed round's arrivals are taken by none), so at
    # every completion, the completions so far are at most the other's arrivals so far.
    def times(lines: list[str], word: str) -> list[float]:
        return sorted(float(x.split()[1]) for x in lines if x.startswith(word + " "))

    sides = {"hub": hub, "member": logs["barrier-member"]}
    for me, other in (("hub", "member"), ("member", "hub")):
        arrivals = times(sides[other], "BW")
        for k, t in enumerate(times(sides[me], "BOK"), start=1):
            if bisect.bisect_right(arrivals, t) < k:
                bad.append(f"barrier: the {me} left round {k} at {t:.3f} before the "
                           f"{other} arrived")
                break
    r.operations["barrier rounds"] = len(times(hub, "BOK"))
    r.operations["barrier rounds failed"] = sum(1 for x in hub if x.startswith("BFAIL wait"))

    # S-Net stage: every acknowledged size reached the hub, once, right, and of a frame the
    # producer sent; each frame at most once per connection (a generation's feed).
    produced = sends("ch-producer")
    stored_sizes: Counter[tuple[int, int]] = Counter()
    for line in hub:
        p = line.split()
        if p[0] == "N":
            key = (int(p[1]), int(p[2]))
            stored_sizes[key] += 1
            if int(p[3]) != len(payload(key[1])):
                bad.append(f"snet: size {p[3]} for frame {key[1]}, which has {len(payload(key[1]))}")
            if key[1] not in produced:
                bad.append(f"snet: a size for frame {key[1]}, which was never sent")
    sacked = [(int(p[1]), int(p[2])) for p in (x.split() for x in logs["snet-stage"])
              if p[0] == "ACK"]
    slost = [k for k in sacked if stored_sizes[k] == 0]
    r.lost += len(slost)
    if slost:
        bad.append(f"snet: {len(slost)} acknowledged sizes lost, first {slost[:5]}")
    sdup = sum(n - 1 for n in stored_sizes.values())
    r.duplicated += sdup
    if sdup:
        bad.append(f"snet: {sdup} frames measured twice on one connection")
    r.operations["snet sizes acknowledged"] = len(sacked)
    r.operations["snet sizes stored"] = sum(stored_sizes.values())

    # CnC: a run whose wait returned computed every item right; every run ended.
    env = logs["cnc-env"]
    runs = [x.split()[1] for x in env if x.startswith("CNC ")]
    ok = [x.split()[1] for x in env if x.startswith("CNCOK ")]
    for x in env:
        if x.startswith("CNCBAD "):
            bad.append(f"cnc: {x}")
    failed = Counter(x.split()[2] for x in env if x.startswith("CNCFAIL "))
    r.operations["cnc graphs run"] = len(runs)
    r.operations["cnc graphs completed and checked"] = len(ok)
    for kind, n in sorted(failed.items()):
        r.operations[f"cnc graphs failed with {kind}"] = n
    r.operations["cnc graphs served"] = sum(1 for x in logs["cnc-worker"] if x.startswith("SERVED "))

    # Garbage collection resumed; nothing leaked at the owner.
    frames, jobs = final["frames"], final["jobs"]
    assert isinstance(frames, dict) and isinstance(jobs, dict)
    spaces = final["spaces"]
    assert isinstance(spaces, list)
    if len(spaces) != 1:
        bad.append(f"{len(spaces) - 1} client spaces still known to the hub")
    if frames["items"] != 0:
        bad.append(f"channel: {frames['items']} items never reclaimed")
    if frames["open"] != 0 or frames["connections"] != 1:
        bad.append(f"channel: {frames['connections']} connections, {frames['open']} open items left")
    sizes = final["sizes"]
    assert isinstance(sizes, dict)
    if sizes["held"] != 0 or sizes["waiting"] != 0:
        bad.append(f"sizes: {sizes['held']} held, {sizes['waiting']} waiting at the end")
    if jobs["held"] != 0 or jobs["waiting"] != 0:
        bad.append(f"queue: {jobs['held']} held, {jobs['waiting']} waiting after the drain")
    if final["holds"]:
        bad.append(f"holds left at the owner: {final['holds']}")

    # Every blocked call returned within its bound, not counting its process's stops.
    for name, c in run.clients.items():
        for line in logs[name]:
            p = line.split()
            if p[0] != "SLOW":
                continue
            start, took = float(p[2]), float(p[3])
            own = sum(max(0.0, min(b, start + took) - max(a, start))
                      for pid, a, b in run.stopped if pid in c.pids)
            effective = took - own
            # A get that waited out its own timeout is not a stall.
            if effective > r.longest_call and p[4] != "Timeout":
                during = [f.kind for f in run.faults if f.start <= start + took and f.end >= start]
                r.longest_call = round(effective, 2)
                r.longest_call_what = (f"{name} {p[1]} ({p[4]}) during "
                                       f"{', '.join(during) or 'no fault'}")
            bound = BOUNDS.get(p[1], BOUND)
            if effective > bound:
                bad.append(f"{name}: {p[1]} blocked {effective:.1f} s (bound {bound:.0f} s)")
    return r


def save(report: Report) -> None:
    reliability_record.keep("chaos", asdict(report))


def table(report: Report) -> str:
    """The reliability report: this run, and the soak and fuzzing on record."""
    rows = [("scenario", "channel, queue, register, cluster mutex and barrier, S-Net network, "
             f"CnC graph; seed {report.seed}, "
             f"{report.seconds:.0f} s"
             + ("" if report.namespaces else " (loopback)"))]
    rows.append(("faults injected", ", ".join(f"{k} {v}" for k, v in sorted(report.faults.items()))))
    rows += [(k, f"{v:,}") for k, v in report.operations.items()]
    rows += [("items lost", str(report.lost)), ("items duplicated", str(report.duplicated)),
             ("consumes applied, reply cut off", str(report.in_doubt)),
             ("spaces fenced / late puts stored", f"{report.fenced_spaces} / {report.fence_violations}"),
             ("longest stall", f"{report.longest_call:.2f} s: {report.longest_call_what}"),
             ("longest shutdown", f"{report.shutdown_max:.2f} s (bound {SHUTDOWN_BOUND:.0f} s)"),
             ("client generations", str(report.generations))]
    for s in reliability_record.read().get("soak", {}).values():
        peaks = ", ".join(f"{k} {v / 2**20:.0f} MiB" for k, v in s["peak_bytes"].items())
        rows.append((f"soak {s['mode']}", f"{s['seconds']:.0f} s: peak {peaks} (bound: baseline "
                     f"+ {s['bound_bytes'] / 2**20:.0f} MiB), {len(s['failures'])} failures"))
    fuzz = RESULTS / "fuzz.json"
    if fuzz.exists():
        for name, t in sorted(json.loads(fuzz.read_text())["targets"].items()):
            rows.append((f"fuzz {name}", f"{t['seconds'] / 3600:.2f} h, {t['executions']:,} "
                         f"executions, {t['crashes']} crashes"))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=600.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--keep", help="keep the logs in this directory")
    p.add_argument("--faults", help="only these kinds of fault, comma-separated ('' for none)")
    a = p.parse_args()
    logdir = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="stampede-chaos-"))
    logdir.mkdir(parents=True, exist_ok=True)
    only = None if a.faults is None else [k for k in a.faults.split(",") if k]
    chaos = Chaos(a.seconds, a.seed, logdir, only)
    try:
        report = chaos.run()
    finally:
        chaos.close()
    save(report)
    print(table(report))
    if report.note:
        print(f"note: {report.note}")
    if report.violations:
        print(f"FAILED (logs in {logdir}, replay with --seed {a.seed}):", file=sys.stderr)
        for v in report.violations:
            print(f"  {v}", file=sys.stderr)
        return 1
    if not a.keep:
        shutil.rmtree(logdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
