"""D-Stampede's Experiments 2 (C) and 3 (Java): one-way producer-to-consumer latency by
payload in the paper's three configurations, each against a TCP program in the same language.

The producer is an end device: a client-mode address space connected to a router over
loopback TCP. The router is the cluster: a Zenoh router process that owns the channel. The
consumer is, by configuration, (1) a task of the router's own address space (the get is
local), (2) a second cluster address space in peer mode, or (3) another end device in client
mode. The socket baselines cross as many TCP connections as the Stampede data crosses links:
(1) producer to consumer directly, (2, 3) producer to a TCP relay to consumer, the relay a
forwarder in the same language. Every process runs on this host; the roles are
examples/c/experiment.c and dev.stampede.examples.Experiment, which print JSON lines.

Per payload the producer writes its CLOCK_MONOTONIC time into the payload's first 8 bytes
just before the put (or send), the consumer reads the clock as the get returns, then
acknowledges (untimed) before the producer puts the next one. Each figure is the median over
repeats of each run's median. Writes a JSON list of records (the format of
bench-results/core.json) and prints a table.

    python bench/experiments_bench.py --out bench-results/experiments.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import queue
import statistics
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import stampede as sp
# The Java benchmark's paths, payloads and choice of JDK (this directory is on the path).
from java_bench import CLASSES, LIBRARY, ROOT, SIZES, java_binary

C_PROGRAM = ROOT / "target" / "c" / "experiment"
CONFIGS = [1, 2, 3]
# Seconds allowed for a role to say it is ready, and to exit once its work is done.
STARTUP = 60.0
EXIT = 30.0

# What the paper reports at 55,000 B (D-Stampede, §5.1, Experiments 2 and 3): its D-Stampede
# latency per configuration and, for C's configuration 1, its TCP pair's.
PAPER_SIZE = 55_000
PAPER_US = {("c", 1): 3300.0, ("c", 2): 5000.0, ("c", 3): 6100.0}
PAPER_US |= {("java", 1): 11000.0, ("java", 2): 12600.0, ("java", 3): 21700.0}
PAPER_BASELINE_US = {("c", 1): 2500.0}
PAPER_HARDWARE = (
    "the paper's figures (2002 hardware: 550 MHz Pentium III Xeon cluster nodes on Gigabit "
    "Ethernet, the end device one of them), read from its text; not measured here"
)

WHERE = {
    1: "the consumer is a task of the router's address space, which owns the channel (local get);"
    " baseline: the TCP producer sends straight to the TCP consumer (one loopback connection)",
    2: "the consumer is a second cluster address space (peer mode, connected to the router, which"
    " owns the channel); baseline: TCP producer to a TCP relay to the TCP consumer (two"
    " loopback connections)",
    3: "the consumer is another end device (client mode, connected to the router, which owns the"
    " channel); baseline: TCP producer to a TCP relay to the TCP consumer (two loopback"
    " connections)",
}
CONSUMER = {2: "cluster-consumer", 3: "device-consumer"}

Record = dict[str, Any]
Line = dict[str, Any]
Series = dict[int, list[float]]

RUNS = itertools.count()


class BenchFailure(Exception):
    """A role failed, exited early or said nothing in time."""


class Child:
    """A started role. A thread reads its JSON lines onto a queue; its stderr is ours."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        self.name = name
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env
        )
        self.lines: queue.Queue[Line | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.lines.put(json.loads(line))
        self.lines.put(None)

    def next(self, timeout: float) -> Line:
        """The next JSON line, waiting up to `timeout` seconds."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise BenchFailure(f"{self.name} said nothing for {timeout:.0f} s") from None
        if line is None:
            raise BenchFailure(f"{self.name} exited early with code {self.proc.wait()}")
        return line

    def expect(self, event: str, timeout: float) -> Line:
        line = self.next(timeout)
        if line.get("event") != event:
            raise BenchFailure(f"{self.name} said {line}, not {event}")
        return line

    def close_stdin(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()

    def finish(self) -> None:
        """Closes its standard input and waits for it to exit successfully."""
        self.close_stdin()
        try:
            code = self.proc.wait(timeout=EXIT)
        except subprocess.TimeoutExpired:
            raise BenchFailure(f"{self.name} did not exit within {EXIT:.0f} s") from None
        if code != 0:
            raise BenchFailure(f"{self.name} failed with exit code {code}")

    def kill(self) -> None:
        """Ends it if it still runs (after a failure)."""
        self.close_stdin()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class Runner:
    """Starts the roles of one language and collects what they measure."""

    def __init__(self, lang: str, program: list[str], args: argparse.Namespace) -> None:
        self.lang = lang
        self.program = program
        self.sizes = [int(s) for s in args.sizes.split(",")]
        self.items: int = args.items
        self.repeats: int = args.repeats
        self.schedule = ["--sizes", args.sizes, "--items", str(args.items)]
        self.schedule += ["--repeats", str(args.repeats)]
        self.shm = ["--shm"] if args.shm else []
        self.env = os.environ.copy()
        # Every process sizes Zenoh's threads alike (what the Rust programs do for themselves).
        sized = sp.zenoh_runtime_for_this_machine()
        if sized is not None:
            self.env.setdefault("ZENOH_RUNTIME", sized)
        self.children: list[Child] = []

    def start(self, role: str, *argv: str) -> Child:
        child = Child(f"{self.lang} {role}", [*self.program, role, *argv], self.env)
        self.children.append(child)
        return child

    def results(self, consumer: Child) -> Series:
        """Each run's median one-way latency by payload, as the consumer reports them."""
        # A generous bound on one size's run: 100 ms per payload.
        timeout = max(120.0, (self.items + max(10, self.items // 10)) * 0.1)
        out: Series = {}
        for _ in range(len(self.sizes) * self.repeats):
            line = consumer.next(timeout)
            if "p50_us" not in line:
                raise BenchFailure(f"{consumer.name} said {line}, not a result")
            out.setdefault(int(line["size"]), []).append(float(line["p50_us"]))
        return out

    def stampede(self, config: int) -> tuple[Series, Line]:
        """One run of `config` over Stampede; also the router's counters of the data channel."""
        app = f"experiments-{self.lang}-{config}-{os.getpid()}-{next(RUNS)}"
        common = ["--app", app, *self.schedule, *self.shm]
        try:
            router = self.start("router", *common, *(["--consume"] if config == 1 else []))
            ready = router.expect("ready", STARTUP)
            endpoint = str(ready["endpoint"])
            consumer = router
            if config != 1:
                consumer = self.start(CONSUMER[config], *common, "--connect", endpoint)
                ready = consumer.expect("ready", STARTUP)
            base = str(ready["base"])
            producer = self.start("device-producer", *common, "--connect", endpoint, "--base", base)
            series = self.results(consumer)
            producer.expect("done", EXIT)
            producer.finish()
            if consumer is not router:
                consumer.finish()
            router.close_stdin()
            stats = router.expect("stats", EXIT)
            router.finish()
            return series, stats
        finally:
            self.cleanup()

    def tcp(self, config: int) -> Series:
        """One run of `config`'s socket baseline."""
        try:
            consumer = self.start("tcp-consumer", *self.schedule)
            port = str(consumer.expect("ready", STARTUP)["port"])
            relay = None
            if config != 1:
                relay = self.start("tcp-relay", "--connect", port)
                port = str(relay.expect("ready", STARTUP)["port"])
            producer = self.start("tcp-producer", "--connect", port, *self.schedule)
            series = self.results(consumer)
            producer.expect("done", EXIT)
            producer.finish()
            consumer.finish()
            if relay is not None:
                relay.finish()
            return series
        finally:
            self.cleanup()

    def cleanup(self) -> None:
        """Kills whatever still runs (nothing, after a run that succeeded)."""
        for child in self.children:
            child.kill()
        self.children.clear()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "bench-results" / "experiments.json")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--items", "--round-trips", type=int, default=1000, help="recorded per run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--langs", default="c,java")
    ap.add_argument("--configs", default=",".join(map(str, CONFIGS)))
    ap.add_argument("--shm", action="store_true", help="let address spaces share memory")
    args = ap.parse_args()
    langs = args.langs.split(",")
    programs: dict[str, list[str]] = {}
    if "c" in langs:
        if not C_PROGRAM.exists():
            sys.exit(f"{C_PROGRAM} is missing: run `make c`")
        programs["c"] = [str(C_PROGRAM)]
    if "java" in langs:
        for c in CLASSES:
            if not c.exists():
                sys.exit(f"{c} is missing: run `make java`")
        programs["java"] = [
            java_binary(),
            "--enable-native-access=ALL-UNNAMED",
            f"-Dstampede.library={LIBRARY}",
            "-cp",
            os.pathsep.join(map(str, CLASSES)),
            "dev.stampede.examples.Experiment",
        ]
    configs = [int(c) for c in args.configs.split(",")]
    load = os.getloadavg()[0]
    records: list[Record] = []
    for lang, program in programs.items():
        runner = Runner(lang, program, args)
        for config in configs:
            try:
                ours, stats = runner.stampede(config)
                base = runner.tcp(config)
            except BenchFailure as e:
                sys.exit(f"{lang} configuration {config}: {e}")
            print(
                f"{lang} configuration {config}: the router's data channel took {stats['puts']}"
                f" puts, reclaimed {stats['reclaimed']}, held {stats['items']} at the end",
                file=sys.stderr,
            )
            baseline = f"{lang}_tcp" + ("_relay" if config != 1 else "")
            experiment = "exp2" if lang == "c" else "exp3"
            note = (
                f"1-minute load average {load:.2f} at the start on {os.cpu_count()} cores; "
                f"configuration {config}: the producer is an end device (a client-mode address "
                f"space of a Zenoh router on loopback TCP); {WHERE[config]}; payloads under 8 "
                f"bytes travel as 8 (the timestamp); shared memory "
                f"{'on' if args.shm else 'off'}"
            )
            for size in runner.sizes:
                med, bmed = statistics.median(ours[size]), statistics.median(base[size])
                record: Record = {
                    "metric": f"{experiment}_{lang}_config{config}_oneway_p50",
                    "payload_bytes": size,
                    "stampede": round(med, 2),
                    "baseline": round(bmed, 2),
                    "baseline_name": baseline,
                    "unit": "us",
                    "ratio": round(med / bmed, 3),
                    "repeats_p50_us": {
                        "stampede": [round(x, 2) for x in ours[size]],
                        baseline: [round(x, 2) for x in base[size]],
                    },
                    "note": note,
                }
                if size == PAPER_SIZE and (lang, config) in PAPER_US:
                    record["paper_us"] = PAPER_US[lang, config]
                    if (lang, config) in PAPER_BASELINE_US:
                        record["paper_baseline_us"] = PAPER_BASELINE_US[lang, config]
                    record["paper_note"] = PAPER_HARDWARE
                records.append(record)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(records, indent=2) + "\n")
    print(
        f"{'metric':<32}{'payload':>8}{'stampede us':>13}{'baseline':>15}{'us':>9}{'ratio':>8}"
        f"{'paper us (2002)':>17}"
    )
    for r in records:
        paper = f"{r['paper_us']:.0f}" if "paper_us" in r else ""
        print(
            f"{r['metric']:<32}{r['payload_bytes']:>8}{r['stampede']:>13.1f}"
            f"{r['baseline_name']:>15}{r['baseline']:>9.1f}{r['ratio']:>7.2f}x{paper:>17}"
        )
    print(f"1-minute load average {load:.2f} at the start on {os.cpu_count()} cores")
    print(f"results written to {args.out}")


if __name__ == "__main__":
    main()
