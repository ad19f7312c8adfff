"""Two builds of the in-process throughput benchmark run alternately, for a change whose
cost is below this machine's run-to-run noise (the metrics' counters).

``python bench/ab_bench.py BASE_EXE NEW_EXE [--pairs N] [--out FILE]`` runs each build's
``stampede-bench --only throughput`` N times, in ABBA order so that a drift in the
machine's load falls on both alike, and reports the medians and their ratio. ``make
bench-overhead BASE=<commit>`` builds the base commit in its own target directory and runs
this against the work tree's build.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile


def run(exe: str) -> tuple[float, float]:
    """One run of ``exe``: Stampede's and crossbeam's items per second."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "core.json")
        subprocess.run([exe, "--only", "throughput", "--repeats", "3", "--out", out],
                       check=True, capture_output=True)
        with open(out) as f:
            row = json.load(f)[0]
    return float(row["stampede"]), float(row["baseline"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("base")
    p.add_argument("new")
    p.add_argument("--pairs", type=int, default=8)
    p.add_argument("--out", default="bench-results/overhead.json")
    a = p.parse_args()
    runs: dict[str, list[tuple[float, float]]] = {"base": [], "new": []}
    for i in range(a.pairs):
        order = [("base", a.base), ("new", a.new)]
        for name, exe in order if i % 2 == 0 else order[::-1]:
            runs[name].append(run(exe))
    result: dict[str, object] = {"pairs": a.pairs}
    for name, rows in runs.items():
        items = [s for s, _ in rows]
        ratio = statistics.median(s / b for s, b in rows)
        result[name] = {
            "stampede_items_per_s": statistics.median(items),
            "crossbeam_items_per_s": statistics.median(b for _, b in rows),
            "ratio_to_crossbeam": ratio,
            "runs": items,
        }
        print(f"{name:5} stampede median {statistics.median(items):10.0f} items/s, "
              f"ratio to crossbeam {ratio:.3f}")
    base = statistics.median(s for s, _ in runs["base"])
    new = statistics.median(s for s, _ in runs["new"])
    result["new_over_base"] = new / base
    result["load_average_at_end"] = os.getloadavg()[0]
    print(f"new/base {new / base:.3f}: cost {100 * (1 - new / base):.1f}% "
          f"({a.pairs} pairs, ABBA; load average {os.getloadavg()[0]:.2f} at the end)")
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
