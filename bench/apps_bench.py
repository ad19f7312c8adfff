r"""The Stampede paper's application studies on this machine (bench-results/apps.json).

Video textures' analysis (``stampede.textures``) of the synthetic 316-frame 640×480 clip:

* ``vt_analysis_s``: seconds for the all-pairs analysis, sequential (the same kernel, tiles
  and stripes on one thread, no Stampede) and with Stampede's tasks in one address space
  with 1 and 2 workers; medians of the repeats.
* ``vt_analysis_speedup_2_workers``: frame pairs compared per second by 2 workers against
  the sequential baseline (the ratio is the speedup; target at least 1.8).
* ``vt_stripe_sweep``: Fig. 12 on this machine: seconds by stripe size (2 to 480 lines)
  for 1 and 2 workers, and the best stripe size.

BLAS runs on one thread in every contender (threadpoolctl), so workers are the only
parallelism. Each record says how loaded the machine was.

    python bench/apps_bench.py --out bench-results/apps.json [--frames 316] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from threadpoolctl import threadpool_limits

from stampede import textures as vt

Record = dict[str, Any]


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def others_share(busy0: float, mine0: float, wall0: float) -> float:
    """Other processes' processor seconds per second of wall time per processor since the
    marks."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    busy = (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")
    t = os.times()
    mine = t.user + t.system
    wall = time.monotonic() - wall0
    return max(0.0, (busy - busy0) - (mine - mine0)) / max(wall, 1e-9) / (os.cpu_count() or 1)


def marks() -> tuple[float, float, float]:
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    t = os.times()
    return (
        (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK"),
        t.user + t.system,
        time.monotonic(),
    )


def timed(fn: Any, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        out.append(fn().seconds)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--out", default="bench-results/apps.json")
    ap.add_argument("--frames", type=int, default=316)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="a short stripe sweep")
    a = ap.parse_args()
    frames = vt.synthetic(a.frames, 480, 640, period=40)
    pairs = a.frames * (a.frames - 1) // 2
    start, m0 = loadavg(), marks()
    records: list[Record] = []
    stripe = 2
    with threadpool_limits(limits=1, user_api="blas"):
        seq = timed(lambda: vt.sequential(frames, stripe_lines=stripe), a.repeats)
        one = timed(lambda: vt.analyze(frames, workers=1, stripe_lines=stripe), a.repeats)
        two = timed(lambda: vt.analyze(frames, workers=2, stripe_lines=stripe), a.repeats)
        share = others_share(*m0)
        load = {"load_avg_start": start, "others_cpu_share": round(share, 3), "loaded": share > 0.05}
        base = statistics.median(seq)
        for name, runs in (("sequential", seq), ("stampede_1_worker", one), ("stampede_2_workers", two)):
            records.append(
                {
                    "metric": "vt_analysis_s",
                    "what": f"video textures analysis, {a.frames} frames 640x480, stripe {stripe}: {name}",
                    "contender": name,
                    "stampede": statistics.median(runs),
                    "baseline": base,
                    "baseline_name": "sequential (same kernel, one thread, no Stampede)",
                    "ratio": base / statistics.median(runs),
                    "unit": "s",
                    "repeats": {"stampede": runs, "baseline": seq},
                    **load,
                }
            )
        speedup = base / statistics.median(two)
        records.append(
            {
                "metric": "vt_analysis_speedup_2_workers",
                "what": "frame pairs compared per second, 2 workers in one address space",
                "stampede": pairs / statistics.median(two),
                "baseline": pairs / base,
                "baseline_name": "sequential",
                "ratio": speedup,
                "unit": "pairs/s",
                "target": ">= 1.8x the sequential baseline",
                "met": speedup >= 1.8,
                **load,
            }
        )
        sizes = [2, 8, 32, 120, 480] if a.quick else [2, 4, 8, 16, 32, 60, 120, 240, 480]
        sweep: dict[str, dict[str, float]] = {}
        m1 = marks()
        for w in (1, 2):
            sweep[str(w)] = {
                str(s): vt.analyze(frames, workers=w, stripe_lines=s).seconds for s in sizes
            }
        share = others_share(*m1)
        best = {w: min(v, key=lambda k: v[k]) for w, v in sweep.items()}
        records.append(
            {
                "metric": "vt_stripe_sweep",
                "what": "seconds by stripe size (lines) and workers (paper Fig. 12), one run each",
                "seconds": sweep,
                "best_stripe_lines": best,
                "unit": "s",
                "others_cpu_share": round(share, 3),
                "loaded": share > 0.05,
            }
        )
    print(f"video textures analysis, {a.frames} frames of 640x480 ({pairs} pairs), BLAS on one thread")
    for r in records:
        if r["metric"] == "vt_analysis_s":
            print(f"  {r['contender']:<22} {r['stampede']:7.2f} s   {r['ratio']:.2f}x sequential")
    print(f"  2 workers: {speedup:.2f}x the sequential baseline (target >= 1.8)")
    print("  stripe sweep (s):  lines " + " ".join(f"{s:>6}" for s in sizes))
    for ws, v in sweep.items():
        print(f"    {ws} worker(s)        " + " ".join(f"{v[str(s)]:6.2f}" for s in sizes)
              + f"   best {best[ws]}")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(records, indent=2, sort_keys=True))
    print(f"results written to {a.out}")


if __name__ == "__main__":
    main()
