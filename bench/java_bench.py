"""The Java face's benchmark: D-Stampede's Experiment 3 (one-way producer-consumer latency by
payload, half the ping-pong round trip between two processes on this host).

In one run, per payload: Java to Java over Stampede (platform threads, and again on virtual
threads), Rust to Rust over Stampede in the same topology and with the same Zenoh settings
(the baseline ``rust_face``, target at most 1.2x), and Java to Java over a plain TCP socket
(``java_sockets``, reported without a target: Zenoh itself sits above loopback TCP). Every
figure is the median over repeats of each run's median. Writes a JSON list of records (the
format of bench-results/core.json) and prints a table.

    python bench/java_bench.py --out bench-results/java.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import stampede as sp

ROOT = Path(__file__).resolve().parents[1]
NET_BENCH = ROOT / "target" / "release" / "stampede-net-bench"
LIBRARY = ROOT / "target" / "release" / "libstampede_c.so"
CLASSES = [ROOT / "target" / "java" / "stampede" / "classes", ROOT / "target" / "java" / "examples" / "classes"]
# The paper's payloads run from 1 B to 55,000 B.
SIZES = [1, 1000, 10_000, 35_000, 55_000]
TARGET = 1.2

Record = dict[str, Any]


def java_binary() -> str:
    """A java of version 22 or later: $JAVA_HOME's, else the JDK 25 beside the default."""
    for home in (os.environ.get("JAVA_HOME", ""), "/usr/lib/jvm/temurin-25-jdk-amd64"):
        exe = Path(home) / "bin" / "java"
        if home and exe.exists():
            out = subprocess.run(
                [str(exe), "-XshowSettings:properties", "-version"],
                capture_output=True,
                text=True,
            ).stderr
            for line in out.splitlines():
                if "java.specification.version" in line and int(line.split("=")[1]) >= 22:
                    return str(exe)
    sys.exit("no Java 22 or later: set JAVA_HOME")


def runs(argv: list[str]) -> list[dict[str, Any]]:
    """Runs a benchmark program; returns its JSON lines. Every program, and the child it
    starts, sizes Zenoh's threads alike (what the Rust programs do for themselves)."""
    env = os.environ.copy()
    sized = sp.zenoh_runtime_for_this_machine()
    if sized is not None:
        env.setdefault("ZENOH_RUNTIME", sized)
    p = subprocess.run(argv, stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    if p.returncode != 0:
        sys.exit(f"{argv[0]} failed with exit code {p.returncode}")
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


def p50s(lines: list[dict[str, Any]]) -> dict[int, list[float]]:
    """Each run's median one-way latency, by payload size."""
    out: dict[int, list[float]] = {}
    for r in lines:
        out.setdefault(r["size"], []).append(statistics.median(r["one_way_us"]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "bench-results" / "java.json")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--round-trips", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    for c in CLASSES:
        if not c.exists():
            sys.exit(f"{c} is missing: run `make java`")
    common = ["--sizes", args.sizes, "--round-trips", str(args.round_trips)]
    common += ["--repeats", str(args.repeats)]
    java = [
        java_binary(),
        "--enable-native-access=ALL-UNNAMED",
        f"-Dstampede.library={LIBRARY}",
        "-cp",
        os.pathsep.join(map(str, CLASSES)),
        "dev.stampede.examples.PingPong",
    ]
    load = os.getloadavg()[0]
    series = {
        "rust_face": p50s(runs([str(NET_BENCH), "pingpong", *common])),
        "java": p50s(runs([*java, "stampede", *common])),
        "java_virtual": p50s(runs([*java, "stampede", "--virtual", *common])),
        "java_sockets": p50s(runs([*java, "sockets", *common])),
    }
    records: list[Record] = []
    note = f"1-minute load average {load:.2f} at the start on {os.cpu_count()} cores"
    for size in map(int, args.sizes.split(",")):
        med = {k: statistics.median(v[size]) for k, v in series.items()}
        raw = {k: v[size] for k, v in series.items()}
        for metric, ours in (
            ("java_pingpong_oneway_p50", med["java"]),
            ("java_virtual_pingpong_oneway_p50", med["java_virtual"]),
        ):
            for base in ("rust_face", "java_sockets"):
                records.append(
                    {
                        "metric": metric,
                        "payload_bytes": size,
                        "stampede": round(ours, 2),
                        "baseline": round(med[base], 2),
                        "baseline_name": base,
                        "unit": "us",
                        "ratio": round(ours / med[base], 3),
                        "target": f"<= {TARGET}x" if base == "rust_face" else None,
                        "met": (ours / med[base] <= TARGET) if base == "rust_face" else None,
                        "repeats_p50_us": {k: [round(x, 2) for x in raw[k]] for k in raw},
                        "note": note,
                    }
                )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(records, indent=2) + "\n")
    print(f"{'metric':<36}{'payload':>8}{'java us':>10}{'baseline':>14}{'us':>9}{'ratio':>8}")
    for r in records:
        print(
            f"{r['metric']:<36}{r['payload_bytes']:>8}{r['stampede']:>10.1f}"
            f"{r['baseline_name']:>14}{r['baseline']:>9.1f}{r['ratio']:>7.2f}x"
            f"  {r['target'] or ''}"
        )
    print(note)
    print(f"results written to {args.out}")


if __name__ == "__main__":
    main()
