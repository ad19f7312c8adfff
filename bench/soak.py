"""Soak: a producer at full speed against a slow consumer, watching memory (``make soak``).

``python bench/soak.py [--seconds S] [--mode local|remote|both]`` runs, for S seconds per
mode, a producer that puts large frames as fast as a bounded channel takes them and a
consumer that takes only the newest frame it has not seen and then dawdles, so most frames
are skipped. Locally both tasks share this process; remotely the channel and the consumer
live in a child address space and the producer's puts cross Zenoh. Every second it samples
the resident memory of each process. It passes when:

- memory stays within the bound ``baseline + 4 x capacity x frame + 64 MiB`` in every
  process (the channel's items, one in each stage of a hand-off, and the runtimes' own
  buffers), and does not creep: the last third's mean is within 16 MiB of the first third's;
- the producer was paced by the capacity (it blocked on a full channel) rather than
  buffering, and the consumer's skips were counted by the channel;
- frames kept flowing to the end (no stall).

It writes the figures to ``bench-results/reliability.json`` (its ``soak`` part) and a plot of
memory over time per mode to ``bench-results/soak-MODE.png``.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import reliability_record
import stampede as sp

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench-results"
MIB = 2**20
CAPACITY = 8
FRAME = 256 * 1024
# The consumer's work per frame: ten times slower than the producer can put.
DAWDLE = 0.02
SLACK = 64 * MIB
CREEP = 16 * MIB
LEASE = 5.0


def rss() -> int:
    """This process's resident set size in bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@dataclass
class Soak:
    """One mode's run and its verdict."""

    mode: str
    seconds: float
    capacity: int = CAPACITY
    frame_bytes: int = FRAME
    puts: int = 0
    gets: int = 0
    skipped: int = 0
    # Puts that waited over a millisecond for room: the producer was paced by the capacity.
    waited: int = 0
    bound_bytes: int = 0
    # Per process: resident memory before the run, which the bound adds to.
    baseline_bytes: dict[str, int] = field(default_factory=dict)
    # Per process: its samples (seconds since the start, bytes).
    memory: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    peak_bytes: dict[str, int] = field(default_factory=dict)
    creep_bytes: dict[str, int] = field(default_factory=dict)
    longest_gap_s: float = 0.0
    failures: list[str] = field(default_factory=list)

    def judge(self, baselines: dict[str, int]) -> None:
        """Fills the peaks, creep and failures from the samples."""
        allowance = 4 * self.capacity * self.frame_bytes + SLACK
        self.bound_bytes = allowance
        self.baseline_bytes = dict(baselines)
        for who, samples in self.memory.items():
            values = [b for _, b in samples]
            if not values:
                self.failures.append(f"{who}: no memory samples")
                continue
            self.peak_bytes[who] = max(values)
            third = max(1, len(values) // 3)
            first = sum(values[:third]) / third
            last = sum(values[-third:]) / third
            self.creep_bytes[who] = int(last - first)
            bound = baselines[who] + allowance
            if max(values) > bound:
                self.failures.append(
                    f"{who}: peak {max(values) / MIB:.0f} MiB above the bound {bound / MIB:.0f} MiB")
            if last - first > CREEP:
                self.failures.append(f"{who}: memory crept by {(last - first) / MIB:.0f} MiB")
        if self.waited == 0:
            self.failures.append("no put ever waited for room: the producer was not paced")
        if self.skipped == 0:
            self.failures.append("no skip was counted")
        if self.longest_gap_s > 5.0:
            self.failures.append(f"frames stalled for {self.longest_gap_s:.1f} s")


class Sampler:
    """Samples this process's memory every second, and the lines a child reports."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.samples: list[tuple[float, int]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(1.0):
            self.samples.append((time.monotonic() - self.start, rss()))

    def close(self) -> list[tuple[float, int]]:
        self.stop.set()
        self.thread.join()
        return self.samples


def produce(out: sp.ChannelOutput, task: sp.Task, until: float, frame: bytes) -> tuple[int, int]:
    """Puts frames as fast as the channel takes them; returns how many, and how many
    waited over a millisecond for room."""
    ts = waited = 0
    while time.monotonic() < until:
        began = time.monotonic()
        try:
            out.put(ts, frame, timeout=1.0)
        except sp.errors.Full:
            waited += 1
            continue
        waited += time.monotonic() - began > 0.001
        ts += 1
        task.set_virtual_time(ts)
    return ts, waited


def consume(inp: sp.ChannelInput, until: float, gaps: list[float]) -> int:
    """Takes the newest unseen frame, dawdles, consumes everything up to it."""
    got, last = 0, time.monotonic()
    while time.monotonic() < until:
        try:
            ts, _ = inp.get(sp.NEWEST_UNSEEN, timeout=1.0)
        except (sp.errors.Timeout, sp.errors.Unavailable):
            continue
        now = time.monotonic()
        gaps.append(now - last)
        last = now
        got += 1
        time.sleep(DAWDLE)
        inp.consume_until(ts)
    return got


def soak_local(seconds: float) -> Soak:
    result = Soak("local", seconds)
    frame = bytes(FRAME)
    with sp.Runtime() as rt:
        ch = rt.channel("soak/frames", capacity=CAPACITY)
        baseline = rss()
        start = time.monotonic()
        until = start + seconds
        sampler = Sampler(start)
        gaps: list[float] = []
        got: list[int] = []
        with rt.task(0, name="producer") as p, rt.task(0, name="consumer") as c:
            out, inp = p.attach_output(ch), c.attach_input(ch)
            c.set_virtual_time(sp.INFINITY)
            consumer = threading.Thread(target=lambda: got.append(consume(inp, until, gaps)))
            consumer.start()
            result.puts, result.waited = produce(out, p, until, frame)
            consumer.join()
            p.set_virtual_time(sp.INFINITY)
        result.memory["process"] = sampler.close()
        result.gets = got[0] if got else 0
        result.skipped = ch.stats().skipped
        result.longest_gap_s = max(gaps, default=0.0)
        result.judge({"process": baseline})
    return result


def child(app: str, endpoint: str, seconds: float) -> None:
    """The remote mode's owner: the channel and the slow consumer; reports memory and its
    channel's counters on stdout."""
    with sp.Space.join(app, connect=[endpoint], listen=["tcp/127.0.0.1:0"], lease=LEASE) as space:
        ch = space.channel("soak/frames", capacity=CAPACITY)
        print(f"BASELINE {rss()}", flush=True)
        print("READY", flush=True)
        start = time.monotonic()
        until = start + seconds
        gaps: list[float] = []
        stop = threading.Event()

        def report() -> None:
            while not stop.wait(1.0):
                print(f"RSS {time.monotonic() - start:.2f} {rss()}", flush=True)

        reporter = threading.Thread(target=report, daemon=True)
        reporter.start()
        with space.task(0, name="consumer") as c:
            inp = c.attach_input(ch)
            c.set_virtual_time(sp.INFINITY)
            got = consume(inp, until, gaps)
        stop.set()
        print(f"DONE {got} {ch.stats().skipped} {max(gaps, default=0.0):.3f}", flush=True)


def free_endpoint() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp/127.0.0.1:{s.getsockname()[1]}"


def soak_remote(seconds: float) -> Soak:
    result = Soak("remote", seconds)
    frame = bytes(FRAME)
    app, endpoint = f"soak-{os.getpid()}", free_endpoint()
    with sp.Space.join(app, mode="router", listen=[endpoint], lease=LEASE) as space:
        proc = subprocess.Popen(
            [sys.executable, __file__, "--child", app, endpoint, str(seconds + 2.0)],
            stdout=subprocess.PIPE, text=True,
        )
        assert proc.stdout is not None
        lines = iter(proc.stdout)
        owner_baseline = int(next(lines).split()[1])
        assert next(lines).strip() == "READY"
        ch = space.lookup_channel("soak/frames", timeout=30.0)
        baseline = rss()
        start = time.monotonic()
        sampler = Sampler(start)
        with space.task(0, name="producer") as p:
            out = p.attach_output(ch)
            result.puts, result.waited = produce(out, p, start + seconds, frame)
            p.set_virtual_time(sp.INFINITY)
        result.memory["producer"] = sampler.close()
        owner: list[tuple[float, int]] = []
        for line in lines:
            word = line.split()
            if word[0] == "RSS":
                owner.append((float(word[1]), int(word[2])))
            elif word[0] == "DONE":
                result.gets, result.skipped = int(word[1]), int(word[2])
                result.longest_gap_s = float(word[3])
        proc.wait(60)
        result.memory["owner"] = owner
        result.judge({"producer": baseline, "owner": owner_baseline})
    return result


def plot(r: Soak) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = RESULTS / f"soak-{r.mode}.png"
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for who, samples in r.memory.items():
        line, = ax.plot([t for t, _ in samples], [b / MIB for _, b in samples], label=who)
        bound = (r.baseline_bytes.get(who, 0) + r.bound_bytes) / MIB
        ax.axhline(bound, color=line.get_color(), linestyle="--", linewidth=0.8)
    ax.set_xlabel("seconds")
    ax.set_ylabel("resident MiB")
    ax.set_title(f"soak, {r.mode}: capacity {r.capacity} x {r.frame_bytes // 1024} KiB frames "
                 "(dashed: each process's bound)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def save(results: list[Soak]) -> None:
    reliability_record.keep("soak", {r.mode: asdict(r) for r in results})


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=600.0)
    p.add_argument("--mode", choices=["local", "remote", "both"], default="both")
    p.add_argument("--child", nargs=3, metavar=("APP", "ENDPOINT", "SECONDS"),
                   help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        child(a.child[0], a.child[1], float(a.child[2]))
        return 0
    modes = ["local", "remote"] if a.mode == "both" else [a.mode]
    results = [soak_local(a.seconds) if m == "local" else soak_remote(a.seconds) for m in modes]
    save(results)
    print(f"{'mode':7} {'puts':>8} {'gets':>6} {'skipped':>8} {'waited':>6} {'peak MiB':>16} "
          f"{'creep MiB':>12} {'gap s':>6}  verdict")
    for r in results:
        peaks = "/".join(f"{v / MIB:.0f}" for v in r.peak_bytes.values())
        creep = "/".join(f"{v / MIB:+.0f}" for v in r.creep_bytes.values())
        verdict = "ok" if not r.failures else "; ".join(r.failures)
        print(f"{r.mode:7} {r.puts:8} {r.gets:6} {r.skipped:8} {r.waited:6} {peaks:>16} "
              f"{creep:>12} {r.longest_gap_s:6.2f}  {verdict}  ({plot(r).name})")
    return 0 if all(not r.failures for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
