"""Churn: address spaces join and leave a running application (``make churn``).

``python bench/churn.py [--cycles N] [--parallel P]`` runs an application in this process (the
router, a bounded channel, a producer putting a frame every 5 ms and a consumer) and lets N
address spaces come and go against it, half leaving cleanly and half killed with SIGKILL.
Each visiting space registers a name of its own, attaches to the channel and holds the newest
frame open, so that while it lives it holds the owner's watermark and the name server lists
it. Clean visits run one after another in a worker process; each killed visit is a process of
its own, killed once it holds its frame, P at a time. Afterwards the run passes when, within
the lease plus 10 s:

- the application knows no space but its own and the name server lists only its own names;
- nothing of the visitors holds the watermark: the channel's connections and open items are
  the application's own, and frames keep being reclaimed (the producer never stalls);
- the owner's resident memory is back within 32 MiB of its baseline (taken after a warm-up).

It writes the ``churn`` part of ``bench-results/reliability.json``.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import reliability_record
import stampede as sp
from stampede.errors import StampedeError, Timeout

MIB = 2**20
FRAMES = "churn/frames"
CAPACITY = 16
LEASE = 5.0
SLACK = 32 * MIB
WARMUP = 10
# How long the application waits for its own consumer to attach.
LONG_WAIT = 10.0


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def free_endpoint() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp/127.0.0.1:{s.getsockname()[1]}"


def visit(app: str, endpoint: str, tag: str) -> sp.Space:
    """Joins, registers a name, and holds the newest frame open; returns the space."""
    space = sp.Space.join(app, mode="peer", connect=[endpoint], lease=LEASE)
    space.channel(f"churn/visitor-{tag}", capacity=1)
    frames = space.lookup_channel(FRAMES, timeout=10)
    t = space.task(0)
    inp = t.attach_input(frames)
    t.set_virtual_time(sp.INFINITY)
    inp.get(sp.NEWEST, timeout=10)  # left open: it holds the owner's watermark
    return space


def worker(a: argparse.Namespace) -> None:
    """``--worker clean N``: N visits in turn, each leaving cleanly; ``--worker killed``: one
    visit that says READY and waits to be killed."""
    if a.worker == "killed":
        visit(a.app, a.endpoint, f"k{os.getpid()}")
        print("READY", flush=True)
        time.sleep(600)
        return
    for i in range(a.count):
        space = visit(a.app, a.endpoint, f"c{os.getpid()}-{i}")
        space.leave()
        print("CYCLE", flush=True)


@dataclass
class Churn:
    cycles: int
    clean: int = 0
    killed: int = 0
    seconds: float = 0.0
    settle_s: float = 0.0
    rss_baseline: int = 0
    rss_peak: int = 0
    rss_after: int = 0
    puts: int = 0
    visitors_seen: int = 0
    failures: list[str] = field(default_factory=list)


class App:
    """The running application: router, channel, producer and consumer."""

    def __init__(self) -> None:
        self.endpoint = free_endpoint()
        self.app = f"churn{os.getpid()}"
        self.space = sp.Space.join(self.app, mode="router", listen=[self.endpoint], lease=LEASE)
        self.frames = self.space.channel(FRAMES, capacity=CAPACITY)
        self.names = set(self.space.names())
        self.puts = 0
        self.stop = threading.Event()
        # The consumer attaches first: once the producer moves past 0 with no reader, a pass
        # may raise the floor above where the consumer's task would start.
        self.attached = threading.Event()
        self.threads = [threading.Thread(target=f, daemon=True) for f in (self.consume, self.produce)]
        self.threads[0].start()
        if not self.attached.wait(LONG_WAIT):
            raise RuntimeError("the consumer did not attach")
        self.threads[1].start()

    def produce(self) -> None:
        t = self.space.task(0)
        out = t.attach_output(self.frames)
        ts = 0
        while not self.stop.is_set():
            try:
                out.put(ts, b"x" * 4096, timeout=0.5)
            except StampedeError:
                continue  # full while a visitor holds the watermark: counted by the channel
            self.puts += 1
            ts += 1
            t.set_virtual_time(ts)
            time.sleep(0.005)

    def consume(self) -> None:
        t = self.space.task(0)
        inp = t.attach_input(self.frames)
        t.set_virtual_time(sp.INFINITY)
        self.attached.set()
        while not self.stop.is_set():
            try:
                ts, _ = inp.get(sp.NEWEST_UNSEEN, timeout=0.5)
            except Timeout:
                continue
            inp.consume_until(ts)

    def close(self) -> None:
        self.stop.set()
        for th in self.threads:
            th.join()
        self.space.leave()


def run(cycles: int, parallel: int = 2) -> Churn:
    r = Churn(cycles)
    app = App()
    me = [sys.executable, str(Path(__file__).resolve()), "--app", app.app, "--endpoint",
          app.endpoint, "--worker"]
    start = time.monotonic()
    try:
        kills = cycles // 2
        cleans = cycles - kills
        # Warm-up visits first, then the baseline.
        warm = min(WARMUP, cleans)
        subprocess.run(me + ["clean", "--count", str(warm)], check=True, stdout=subprocess.DEVNULL)
        r.clean += warm
        time.sleep(0.5)
        r.rss_baseline = r.rss_peak = rss()
        clean = subprocess.Popen(me + ["clean", "--count", str(cleans - warm)],
                                 stdout=subprocess.PIPE, text=True)
        running: list[subprocess.Popen[str]] = []
        started = 0
        while started < kills or running:
            while started < kills and len(running) < parallel:
                running.append(subprocess.Popen(me + ["killed"], stdout=subprocess.PIPE, text=True))
                started += 1
            p = running.pop(0)
            assert p.stdout is not None
            line = p.stdout.readline()
            if not line.startswith("READY"):
                r.failures.append(f"a visitor did not start: {line!r}")
            # The visitor holds a frame open on its own connection until it is killed; its
            # attachment reaches the owner on its own, so look for it for a while.
            deadline = time.monotonic() + (2.0 if r.visitors_seen == 0 else 0.0)
            while True:
                r.visitors_seen = max(r.visitors_seen, app.frames.stats().connections - 1)
                if r.visitors_seen > 0 or time.monotonic() >= deadline:
                    break
                time.sleep(0.01)
            p.send_signal(signal.SIGKILL)
            p.wait()
            r.killed += 1
            r.rss_peak = max(r.rss_peak, rss())
        assert clean.stdout is not None
        r.clean += sum(1 for line in clean.stdout if line.startswith("CYCLE"))
        if clean.wait() != 0:
            r.failures.append("the clean visits' worker failed")
        r.seconds = round(time.monotonic() - start, 1)
        if kills and r.visitors_seen == 0:
            r.failures.append("no visitor was ever seen attached to the channel")
        settled = time.monotonic()
        r.failures += settle(app, r)
        r.settle_s = round(time.monotonic() - settled, 1)
    finally:
        r.puts = app.puts
        app.close()
    return r


def settle(app: App, r: Churn) -> list[str]:
    """Waits for the application to forget every visitor; what it did not forget."""
    deadline = time.monotonic() + LEASE + 10
    while True:
        left: list[str] = []
        spaces = app.space.spaces()
        if spaces != [app.space.id]:
            left.append(f"{len(spaces) - 1} visiting spaces still known")
        names = {rec.name for rec in app.space.records()}
        if names - app.names:
            left.append(f"{len(names - app.names)} visitors' names still listed")
        s = app.frames.stats()
        # The application's own: the consumer's connection; at most its one open get.
        if s.connections != 1 or s.open > 1:
            left.append(f"channel: {s.connections} input connections, {s.open} open items")
        holds = [h.description for h in app.space.explain().holds if h.cause == "remote"]
        if holds:
            left.append(f"watermark held by {holds}")
        puts = app.puts
        time.sleep(0.3)
        if app.puts == puts:
            left.append("the producer is stalled")
        r.rss_after = rss()
        if r.rss_after > r.rss_baseline + SLACK:
            left.append(f"memory {r.rss_after / MIB:.0f} MiB against a baseline of "
                        f"{r.rss_baseline / MIB:.0f} MiB")
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def save(r: Churn) -> None:
    reliability_record.keep("churn", asdict(r))


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--cycles", type=int, default=1000)
    p.add_argument("--parallel", type=int, default=2)
    p.add_argument("--worker", choices=["clean", "killed"])
    p.add_argument("--app")
    p.add_argument("--endpoint")
    p.add_argument("--count", type=int, default=0)
    a = p.parse_args()
    if a.worker:
        worker(a)
        return 0
    r = run(a.cycles, a.parallel)
    save(r)
    print(f"{r.cycles} cycles ({r.clean} clean, {r.killed} killed) in {r.seconds:.0f} s; "
          f"settled in {r.settle_s:.1f} s; owner memory {r.rss_baseline / MIB:.0f} MiB at "
          f"baseline, {r.rss_peak / MIB:.0f} MiB peak, {r.rss_after / MIB:.0f} MiB after; "
          f"{r.puts:,} frames put")
    for f in r.failures:
        print(f"FAILED: {f}", file=sys.stderr)
    return 1 if r.failures else 0


if __name__ == "__main__":
    sys.exit(main())
