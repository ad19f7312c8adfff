"""Runs the fuzz targets and keeps the record (``make test-fuzz``, ``make fuzz``).

``python fuzz/run.py [--seconds S] [--jobs J] [TARGET ...]`` runs each target (all by
default) for S seconds with libFuzzer through ``cargo +nightly fuzz run``, on its working
corpus (``fuzz/corpus/TARGET``, not kept) seeded with the minimised corpus kept in the
repository (``fuzz/seeds/TARGET``). It prints executions, speed and the outcome per target,
and adds the run to ``bench-results/fuzz.json``, which sums each target's fuzzing time and
executions over every run on this machine. A crash fails the run; libFuzzer leaves the input
in ``fuzz/artifacts/TARGET``, to be turned into a regression test.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RECORD = ROOT / "bench-results" / "fuzz.json"
DONE = re.compile(r"Done (\d+) runs in (\d+) second")


def targets() -> list[str]:
    return sorted(p.stem for p in (HERE / "fuzz_targets").glob("*.rs"))


@dataclass
class Run:
    """One target's run."""

    target: str
    seconds: float
    executions: int
    crashed: bool


@dataclass
class Total:
    """A target's fuzzing on record."""

    seconds: float = 0.0
    executions: int = 0
    crashes: int = 0
    runs: int = 0


def run(target: str, seconds: int, jobs: int) -> Run:
    corpus = HERE / "corpus" / target
    seeds = HERE / "seeds" / target
    corpus.mkdir(parents=True, exist_ok=True)
    seeds.mkdir(parents=True, exist_ok=True)
    cmd = ["cargo", "+nightly", "fuzz", "run", target, str(corpus), str(seeds), "--",
           f"-max_total_time={seconds}", "-print_final_stats=1"]
    if jobs > 1:
        cmd += [f"-fork={jobs}"]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=HERE, capture_output=True, text=True)
    elapsed = time.monotonic() - start
    log = proc.stderr
    execs = sum(int(m.group(1)) for m in DONE.finditer(log))
    stat = re.search(r"stat::number_of_executed_units:\s*(\d+)", log)
    if stat:
        execs = max(execs, int(stat.group(1)))
    crashed = proc.returncode != 0
    if crashed:
        (HERE / "artifacts").mkdir(exist_ok=True)
        (HERE / "artifacts" / f"{target}.log").write_text(log)
    return Run(target, round(elapsed, 1), execs, crashed)


def keep(runs: list[Run]) -> dict[str, Total]:
    """Adds the runs to the record under a lock, so that runs side by side all count."""
    RECORD.parent.mkdir(exist_ok=True)
    with open(RECORD.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record: dict[str, Total] = {}
        if RECORD.exists():
            kept = json.loads(RECORD.read_text()).get("targets", {})
            record = {name: Total(**t) for name, t in kept.items()}
        for r in runs:
            total = record.setdefault(r.target, Total())
            total.seconds += r.seconds
            total.executions += r.executions
            total.crashes += int(r.crashed)
            total.runs += 1
        RECORD.write_text(json.dumps({"targets": {k: asdict(v) for k, v in record.items()}},
                                     indent=1) + "\n")
    return record


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("targets", nargs="*")
    p.add_argument("--seconds", type=int, default=60)
    p.add_argument("--jobs", type=int, default=1, help="libFuzzer processes per target")
    a = p.parse_args()
    chosen: list[str] = a.targets or targets()
    unknown = set(chosen) - set(targets())
    if unknown:
        p.error(f"no such target: {', '.join(sorted(unknown))} (have {', '.join(targets())})")
    failed = []
    record: dict[str, Total] = {}
    print(f"{'target':10} {'seconds':>8} {'executions':>12} {'exec/s':>8}  outcome", flush=True)
    for t in chosen:
        r = run(t, a.seconds, a.jobs)
        outcome = "CRASH (fuzz/artifacts)" if r.crashed else "no crash"
        speed = r.executions / max(r.seconds, 1.0)
        print(f"{t:10} {r.seconds:8.0f} {r.executions:12,} {speed:8,.0f}  {outcome}", flush=True)
        record = keep([r])
        if r.crashed:
            failed.append(t)
    hours = sum(t.seconds for t in record.values()) / 3600
    print(f"on record: {hours:.2f} fuzzing hours over {len(record)} targets ({RECORD})")
    if failed:
        print(f"crashes in: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
