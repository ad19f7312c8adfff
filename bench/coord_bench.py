r"""The coordination applications against baselines measured in the same run, added to the Rust
coordination benchmark's results (bench-results/coord.json; its records are kept).

* ``cholesky_gflops``: the tiled Cholesky on Concurrent Collections (``apps/cholesky.py``,
  tuned, at the best tile of a small sweep) against scipy's LAPACK ``dpotrf`` on the same
  Fortran-ordered matrix with BLAS on every core, against the ``dgemm`` rate measured here, and
  against ``numpy.linalg.cholesky``; at n = 2048 and 4096. One record per baseline.
* ``cholesky_tuning_gain``: per n, the tile sweep in the style of the CnC paper's Fig. 11
  (speedup over the serial tiled code of the barrier-parallel, CnC untuned and CnC tuned
  versions, by tile size), and tuned against untuned at the best tile.
* ``cholesky_gflops_rust``: with ``--rust-cholesky``, the Rust example of the same graph (faer
  kernels) against faer's own parallel Cholesky, at the same n and tile.
* ``snet_cholesky_gflops``: the S-Net networks of the same factorization (``--mode snet1``,
  direct with a barrier per phase; ``snet2``, data-driven), each at its own best tile of the
  sweep, against CnC tuned at its best tile in the same run (target for S-Net (2) at
  n = 4096: at least 0.9x CnC), with dpotrf's rate alongside; one record per network.
* ``snet_cholesky_speedup_by_workers``: at n = 4096, the speedup over the serial tiled code
  of CnC untuned and tuned and of both S-Net networks with 1 and with every worker, each at
  its best tile (the S-Net paper's Fig. 12 on this machine).
* ``snet_policy``: the S-Net runtime's two scheduling policies side by side, furthest-advanced
  (the default) against most-queued, on the face detector (images per second) and on the
  data-driven Cholesky at n = 4096 (GFLOP/s); ``ratio`` > 1 means the default is faster.
* ``tile_dgemm_two_thread_speedup``: what two threads calling a tile GEMM get done over one,
  through the function pointers the Cholesky's kernels use against scipy.linalg.blas.dgemm
  (whose wrapper holds the GIL).
* The face-detection pipeline's records, when ``apps/face_detect.py`` is there; its S-Net
  rows carry metric names of their own (``snet_face_detect_images_per_s``, ...).

Every factorization is checked (‖LLᵀ − A‖/‖A‖). Figures are medians; the repeats are kept in
each record, with threadpoolctl's report of the BLAS libraries and their kernel, and how
loaded the machine was (other processes' share of the processors while it ran). Run it with
OpenBLAS free to pick its kernel, as ``make bench-coord`` does:

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/coord_bench.py \
        --out bench-results/coord.json
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from scipy.linalg import blas, lapack

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "apps"))

import cholesky  # noqa: E402  (apps/ is not a package)

from stampede import cnc  # noqa: E402

Record = dict[str, Any]
Matrix = cholesky.Matrix
SOURCE = "bench/coord_bench.py"  # marks the records this script wrote
VERSIONS = ("barrier", "untuned", "tuned", "snet1", "snet2")
SNET = {"snet1": "S-Net (1), direct, a barrier per phase (apps/cholesky_direct.snet)",
        "snet2": "S-Net (2), data-driven (apps/cholesky_flow.snet)"}
SNET_TARGET = 0.9  # S-Net (2) against CnC tuned at n = 4096
# Tile sizes swept per order: from per-step overhead dominating to too little parallelism.
SWEEP = {2048: [64, 128, 256, 512], 4096: [128, 256, 512, 1024]}
TARGETS = {"dpotrf": (1.0, ">= 1.0x (stretch 1.15x)"), "dgemm": (0.8, ">= 0.8x")}


# How loaded the machine is.


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


class Others:
    """Processor time other processes use while it is open, from /proc/stat less this
    process's own."""

    def __init__(self) -> None:
        self.busy0, self.mine0, self.wall0 = self._busy(), self._mine(), time.monotonic()

    @staticmethod
    def _busy() -> float:
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:]]
        return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # not idle, iowait

    @staticmethod
    def _mine() -> float:
        t = os.times()  # children too: the Rust example runs as one
        return t.user + t.system + t.children_user + t.children_system

    def share(self) -> float:
        """Other processes' processor seconds per second of wall time per processor."""
        wall = time.monotonic() - self.wall0
        others = (self._busy() - self.busy0) - (self._mine() - self.mine0)
        return max(0.0, others) / max(wall, 1e-9) / (os.cpu_count() or 1)


def load_note(share: float, start: str) -> Record:
    return {
        "load_avg_start": start,
        "others_cpu_share": round(share, 3),
        "loaded": share > 0.05,
    }


# One run of each contender, in GFLOP/s (BLAS with its default threads, every core, unless
# the tiled code pins it).


def settle() -> None:
    """Waits until the BLAS threads of the last multithreaded call (a baseline's, or a
    check's) have stopped spinning for more work, as OpenBLAS's do for a while, so they take
    no processor time from the next run, which may be another library's."""
    time.sleep(0.3)


def timed(fn: Callable[[], object]) -> float:
    settle()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def dgemm_gflops(x: Matrix, y: Matrix) -> float:
    n: int = x.shape[0]
    return 2 * n**3 / timed(lambda: blas.dgemm(1.0, x, y)) / 1e9


def dpotrf_gflops(a: Matrix) -> float:
    """LAPACK dpotrf in place on a Fortran-ordered copy of ``a`` made before the clock starts;
    zeroing the upper triangle is not timed either (the tiled versions' times include cutting
    A into tiles and writing all of L out); checked."""
    c = np.array(a, order="F")
    out: list[Any] = []
    secs = timed(lambda: out.extend(lapack.dpotrf(c, lower=1, clean=0, overwrite_a=1)))
    if out[1] != 0:
        raise RuntimeError(f"dpotrf failed: info {out[1]}")
    cholesky.verify(a, np.tril(out[0]))
    return cholesky.gflops(a.shape[0], secs)


def numpy_gflops(a: Matrix) -> float:
    out: list[Any] = []
    secs = timed(lambda: out.append(np.linalg.cholesky(a)))
    cholesky.verify(a, np.asfortranarray(out[0]))
    return cholesky.gflops(a.shape[0], secs)


def tiled_seconds(a: Matrix, out: Matrix, tile: int, mode: str, ex: cnc.Executor) -> float:
    """One run of a tiled version, which writes L into ``out``, an array already written to
    (as dpotrf overwrites a copy made before its clock starts); checked."""
    settle()
    f = cholesky.factor(a, tile, mode, ex.workers, ex, out)
    cholesky.verify(a, f.l)
    return f.seconds


def two_threads(kernel: Callable[[Matrix, Matrix, Matrix], object], tile: int) -> float:
    """How much more two threads get done than one, each calling ``kernel`` (a tile GEMM)
    on tiles of its own: 2 when the calls run in parallel, 1 when they take turns."""
    rng = np.random.default_rng(3)
    calls = max(4, int(4e9 / (2 * tile**3)))  # about 4 GFLOP per thread

    def work() -> None:
        c, x, y = (np.asfortranarray(rng.uniform(-1, 1, (tile, tile))) for _ in range(3))
        for _ in range(calls):
            kernel(c, x, y)

    def both() -> None:
        threads = [threading.Thread(target=work) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    with cholesky.one_blas_thread():
        work()
        return 2 * timed(work) / timed(both)


def kernel_records(tile: int, repeats: int) -> list[Record]:
    """Why the tile kernels are called through scipy's Cython BLAS: the two-thread speedup of
    a tile GEMM called that way (as apps/cholesky.py does) and through scipy.linalg.blas."""
    start, others = loadavg(), Others()

    def f2py(c: Matrix, x: Matrix, y: Matrix) -> object:
        return blas.dgemm(-1.0, x, y, beta=1.0, c=c, trans_b=1, overwrite_c=1)

    ours = [round(two_threads(cholesky.gemm, tile), 3) for _ in range(repeats)]
    base = [round(two_threads(f2py, tile), 3) for _ in range(repeats)]
    print(
        f"\ntile dgemm ({tile}), two threads over one: through scipy.linalg.cython_blas "
        f"{statistics.median(ours):.2f}x, through scipy.linalg.blas {statistics.median(base):.2f}x"
    )
    return [
        {
            "metric": "tile_dgemm_two_thread_speedup",
            "stampede": statistics.median(ours),
            "baseline": statistics.median(base),
            "baseline_name": "scipy.linalg.blas.dgemm (its wrapper holds the GIL)",
            "stampede_name": "scipy.linalg.cython_blas dgemm through ctypes (GIL released)",
            "ratio": round(statistics.median(ours) / statistics.median(base), 3),
            "target": None,
            "met": None,
            "unit": "x (2 = the calls run in parallel)",
            "tile": tile,
            "repeats": {"stampede": ours, "baseline": base},
            **load_note(others.share(), start),
        }
    ]


# The sweep and the head-to-head comparison.

Sweep = dict[int, dict[str, list[float]]]
sweeps: dict[int, Sweep] = {}  # by n, for the table by workers


def sweep(a: Matrix, tiles: list[int], repeats: int, ex: cnc.Executor) -> Sweep:
    """Seconds per run, by tile and version. The versions alternate within each repeat, so a
    burst of load falls on all of them."""
    table: Sweep = {}
    out = np.array(a, order="F")
    for tile in tiles:
        runs: dict[str, list[float]] = {m: [] for m in cholesky.MODES}
        for m in cholesky.MODES:  # warm-up: threads, allocator, code paths
            tiled_seconds(a, out, tile, m, ex)
        for _ in range(repeats):
            for m in cholesky.MODES:
                runs[m].append(round(tiled_seconds(a, out, tile, m, ex), 4))
        table[tile] = runs
    return table


def print_sweep(n: int, table: Sweep) -> None:
    print(f"\nn = {n}: speedup over the serial tiled code by tile size (medians, as Fig. 11)")
    print(f"{'tile':>6}{'serial s':>10}{'GFLOP/s':>9}" + "".join(f"{v:>10}" for v in VERSIONS))
    for tile, runs in table.items():
        serial = statistics.median(runs["serial"])
        cells = "".join(f"{serial / statistics.median(runs[v]):>9.2f}x" for v in VERSIONS)
        print(f"{tile:>6}{serial:>10.3f}{cholesky.gflops(n, serial):>9.1f}" + cells)


def head_to_head(
    a: Matrix, tiles: dict[str, int], repeats: int, ex: cnc.Executor
) -> dict[str, list[float]]:
    """GFLOP/s per run of the tuned graph and the S-Net networks, each at its tile in
    ``tiles``, and of the baselines, alternating."""
    rng = np.random.default_rng(2)
    n = a.shape[0]
    x = np.asfortranarray(rng.uniform(-1, 1, (n, n)))
    y = np.asfortranarray(rng.uniform(-1, 1, (n, n)))
    out = np.array(a, order="F")

    def tiled(mode: str) -> Callable[[], float]:
        return lambda: cholesky.gflops(n, tiled_seconds(a, out, tiles[mode], mode, ex))

    contenders: dict[str, Callable[[], float]] = {
        "tuned": tiled("tuned"),
        "snet1": tiled("snet1"),
        "snet2": tiled("snet2"),
        "dpotrf": lambda: dpotrf_gflops(a),
        "numpy": lambda: numpy_gflops(a),
        "dgemm": lambda: dgemm_gflops(x, y),
    }
    for run in contenders.values():  # warm-up
        run()
    runs: dict[str, list[float]] = {k: [] for k in contenders}
    for _ in range(repeats):
        for k, run in contenders.items():
            runs[k].append(round(run(), 2))
    return runs


def cholesky_records(n: int, repeats: int, ex: cnc.Executor, common: Record) -> list[Record]:
    start, others = loadavg(), Others()
    a = cholesky.random_spd(n)
    table = sweep(a, SWEEP[n], repeats, ex)
    print_sweep(n, table)
    sweeps[n] = table
    tiles = {m: min(table, key=lambda t: statistics.median(table[t][m])) for m in ("tuned", *SNET)}
    best = tiles["tuned"]
    print(f"best tiles at n = {n}: " + ", ".join(f"{m} {t}" for m, t in tiles.items()))
    runs = head_to_head(a, tiles, max(repeats, 5), ex)
    ours = statistics.median(runs["tuned"])
    shared: Record = {
        "n": n,
        "tile": best,
        "workers": ex.workers,
        "payload_bytes": 8 * n * n,
        "stampede_name": "apps/cholesky.py CnC tuned (Python steps, one BLAS thread each)",
        "flops": "n^3/3 per Cholesky, 2 n^3 per dgemm",
        "stampede_in_sweep": round(cholesky.gflops(n, statistics.median(table[best]["tuned"])), 2),
        **load_note(others.share(), start),
        **common,
    }
    names = {
        "dpotrf": "scipy.linalg.lapack.dpotrf (in place, Fortran order, BLAS on every core)",
        "dgemm": "scipy.linalg.blas.dgemm rate (n x n x n, BLAS on every core)",
        "numpy": "numpy.linalg.cholesky",
    }
    out: list[Record] = []
    for key, name in names.items():
        base = statistics.median(runs[key])
        bound, target = TARGETS.get(key, (None, None)) if n == 4096 else (None, None)
        out.append(
            {
                "metric": "cholesky_gflops",
                "stampede": round(ours, 2),
                "baseline": round(base, 2),
                "baseline_name": name,
                "ratio": round(ours / base, 3),
                "target": target,
                "met": None if bound is None else ours / base >= bound,
                "unit": "GFLOP/s",
                "repeats": {"stampede": runs["tuned"], "baseline": runs[key]},
                **shared,
            }
        )
    for mode, name in SNET.items():
        snet_rate = statistics.median(runs[mode])
        bound = SNET_TARGET if n == 4096 and mode == "snet2" else None
        out.append(
            {
                "metric": "snet_cholesky_gflops",
                "version": mode,
                "stampede": round(snet_rate, 2),
                "baseline": round(ours, 2),
                "baseline_name": f"CnC tuned (tile {best})",
                "ratio": round(snet_rate / ours, 3),
                "target": None if bound is None else f">= {bound}x CnC tuned",
                "met": None if bound is None else snet_rate / ours >= bound,
                "unit": "GFLOP/s",
                "dpotrf": round(statistics.median(runs["dpotrf"]), 2),
                "vs_dpotrf": round(snet_rate / statistics.median(runs["dpotrf"]), 3),
                "repeats": {"stampede": runs[mode], "baseline": runs["tuned"]},
                **shared,
                "tile": tiles[mode],
                "stampede_name": name,
            }
        )
    serial = {t: statistics.median(r["serial"]) for t, r in table.items()}
    tuned, untuned = (statistics.median(table[best][v]) for v in ("tuned", "untuned"))
    out.append(
        {
            "metric": "cholesky_tuning_gain",
            "stampede": round(serial[best] / tuned, 3),
            "baseline": round(serial[best] / untuned, 3),
            "baseline_name": "CnC untuned",
            "ratio": round(untuned / tuned, 3),
            "target": None,
            "met": None,
            "paper": "tuned about 1.15x untuned in the best range of tile sizes (Fig. 11)",
            "unit": "speedup over serial tiled",
            "repeats": {"stampede": table[best]["tuned"], "baseline": table[best]["untuned"]},
            "sweep_seconds": {str(t): r for t, r in table.items()},
            "sweep_speedup": {
                str(t): {v: round(serial[t] / statistics.median(r[v]), 3) for v in VERSIONS}
                for t, r in table.items()
            },
            **shared,
        }
    )
    return out


def by_workers(n: int, table: Sweep, repeats: int, common: Record) -> Record:
    """The speedup over the serial tiled code with 1 worker and with every one, each version
    at its best tile of ``table`` (the S-Net paper's Fig. 12)."""
    start, others = loadavg(), Others()
    a = cholesky.random_spd(n)
    out = np.array(a, order="F")
    modes = ("untuned", "tuned", *SNET)
    tiles = {m: min(table, key=lambda t: statistics.median(table[t][m])) for m in modes}
    serial_tile = min(table, key=lambda t: statistics.median(table[t]["serial"]))
    serial = statistics.median(table[serial_tile]["serial"])
    counts = sorted({1, os.cpu_count() or 1})
    speedup: dict[str, dict[str, float]] = {}
    seconds: dict[str, dict[str, list[float]]] = {}
    for count in counts:
        ex = cnc.Executor(workers=count)
        runs: dict[str, list[float]] = {m: [] for m in modes}
        for m in modes:
            tiled_seconds(a, out, tiles[m], m, ex)  # warm-up
        for _ in range(repeats):
            for m in modes:
                runs[m].append(round(tiled_seconds(a, out, tiles[m], m, ex), 4))
        speedup[str(count)] = {m: round(serial / statistics.median(r), 3) for m, r in runs.items()}
        seconds[str(count)] = runs
    print(f"\nn = {n}: speedup over the serial tiled code by workers (as the S-Net paper's Fig. 12)")
    print(f"{'workers':>8}" + "".join(f"{m:>10}" for m in modes))
    for w, row in speedup.items():
        print(f"{w:>8}" + "".join(f"{row[m]:>9.2f}x" for m in modes))
    return {
        "metric": "snet_cholesky_speedup_by_workers",
        "n": n,
        "tiles": tiles,
        "serial_tile": serial_tile,
        "serial_seconds": serial,
        "speedup": speedup,
        "seconds": seconds,
        "unit": "speedup over the serial tiled code",
        "target": None,
        "met": None,
        **load_note(others.share(), start),
        **common,
    }


POLICIES = ("furthest-advanced", "most-queued")


def policy_records(repeats: int, common: Record, cholesky_tile: int | None) -> list[Record]:
    """Both S-Net policies on both applications, alternating within each repeat."""
    out: list[Record] = []
    start, others = loadavg(), Others()
    if (ROOT / "apps" / "face_detect.py").exists():
        face_detect = importlib.import_module("face_detect")
        work = face_detect.generate(200, 500)
        ex = cnc.Executor()
        rates: dict[str, list[float]] = {p: [] for p in POLICIES}
        for policy in POLICIES:  # warm-up
            face_detect.run_snet(work, ex.workers, ex, policy)
        for _ in range(repeats):
            for policy in POLICIES:
                run = face_detect.run_snet(work, ex.workers, ex, policy)
                rates[policy].append(round(len(work) / run.seconds, 2))
        out.append(policy_record("face detection, images/s", rates, "images/s", start, others))
    if cholesky_tile is not None:
        start, others = loadavg(), Others()
        n = 4096
        a = cholesky.random_spd(n)
        target = np.array(a, order="F")
        ex = cnc.Executor()
        gflops: dict[str, list[float]] = {p: [] for p in POLICIES}

        def one(policy: str) -> float:
            settle()
            t0 = time.perf_counter()
            f = cholesky.factor_snet_flow(a, cholesky_tile, ex, target, policy)
            secs = time.perf_counter() - t0
            cholesky.verify(a, f)
            return cholesky.gflops(n, secs)

        for policy in POLICIES:
            one(policy)
        for _ in range(repeats):
            for policy in POLICIES:
                gflops[policy].append(round(one(policy), 2))
        out.append(policy_record(f"Cholesky S-Net (2), n = {n}, tile {cholesky_tile}, GFLOP/s",
                                 gflops, "GFLOP/s", start, others) | {"n": n, "tile": cholesky_tile})
    for r in out:
        print(f"snet_policy {r['application']}: furthest-advanced {r['stampede']}, "
              f"most-queued {r['baseline']} ({r['ratio']}x)")
    return [r | common for r in out]


def policy_record(
    application: str, runs: dict[str, list[float]], unit: str, start: str, others: Others
) -> Record:
    ours, base = (statistics.median(runs[p]) for p in POLICIES)
    return {
        "metric": "snet_policy",
        "application": application,
        "stampede": ours,
        "stampede_name": "furthest-advanced (the default)",
        "baseline": base,
        "baseline_name": "most-queued",
        "ratio": round(ours / base, 3),
        "target": None,
        "met": None,
        "unit": unit,
        "repeats": {"stampede": runs[POLICIES[0]], "baseline": runs[POLICIES[1]]},
        **load_note(others.share(), start),
    }


def rust_records(binary: Path, n: int, tile: int, repeats: int, python_gflops: float) -> Record:
    """The Rust example of the same graph (faer kernels), tuned, against faer's parallel
    Cholesky of the whole matrix; both the best of ``repeats`` runs, as the example reports."""
    workers = os.cpu_count() or 1
    args = [str(binary), "--n", str(n), "--tile", str(tile), "--workers", str(workers)]
    start, others = loadavg(), Others()
    text = subprocess.run(
        [*args, "--tuned", "--reps", str(repeats)], check=True, capture_output=True, text=True
    ).stdout
    rate = {
        line.split(":")[0].split(" n=")[0]: float(m.group(1))
        for line in text.splitlines()
        if (m := re.search(r"([0-9.]+) GFLOP/s", line))
    }
    ours, base = rate["cnc tuned"], rate[f"faer parallel ({workers} threads)"]
    return {
        "metric": "cholesky_gflops_rust",
        "stampede": ours,
        "baseline": base,
        "baseline_name": "faer parallel Cholesky (whole matrix)",
        "ratio": round(ours / base, 3),
        "target": None,
        "met": None,
        "unit": "GFLOP/s",
        "n": n,
        "tile": tile,
        "workers": workers,
        "faer_sequential": rate["faer sequential"],
        "python_cnc_tuned": round(python_gflops, 2),
        "stampede_name": "crates/stampede-coord/examples/cholesky.rs --tuned (best of repeats)",
        "output": text.strip().splitlines(),
        **load_note(others.share(), start),
    }


def face_detect_records() -> list[Record]:
    """The face-detection pipeline's records (``apps/face_detect.py``'s ``run_benchmark``), or
    none when the application is not there."""
    if not (ROOT / "apps" / "face_detect.py").exists():
        print("apps/face_detect.py is not there: no face-detection records")
        return []
    face_detect = importlib.import_module("face_detect")
    records: list[Record] = face_detect.run_benchmark(log=print)
    return records


def merge(path: Path, ours: list[Record]) -> list[Record]:
    """The records in ``path`` of what this run did not measure (the Rust coordination
    benchmark's; face detection's, or another n's, when they were left out), then ``ours``."""
    try:
        existing = json.loads(path.read_text())
    except FileNotFoundError:
        existing = []
    measured = {(r["metric"], r.get("n")) for r in ours}
    kept = [r for r in existing if (r["metric"], r.get("n")) not in measured]
    return kept + [{**r, "source": SOURCE} for r in ours]


def save(path: Path, records: list[Record]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(merge(path, records), indent=2) + "\n")
    print(f"wrote {path}")


def show(records: list[Record]) -> None:
    print(f"\n{'metric':<22}{'n':>6}{'tile':>6}{'ours':>8}{'base':>8}{'ratio':>7}  baseline")
    for r in records:
        if "tile" in r and r["metric"].startswith(("cholesky", "snet_cholesky_gflops")):
            met = r["met"]
            verdict = "" if met is None else f"  [{r['target']}: {'met' if met else 'missed'}]"
            print(
                f"{r['metric']:<22}{r['n']:>6}{r['tile']:>6}{r['stampede']:>8}{r['baseline']:>8}"
                f"{r['ratio']:>7}  {r['baseline_name']}{verdict}"
            )


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", type=Path, default=Path("bench-results/coord.json"))
    p.add_argument("--repeats", type=int, default=5, help="runs per figure (median reported)")
    p.add_argument("--sizes", type=int, nargs="+", choices=sorted(SWEEP), default=sorted(SWEEP))
    p.add_argument("--rust-cholesky", type=Path, help="the Rust example's binary, to run as well")
    p.add_argument("--no-face-detect", action="store_true", help="leave face detection out")
    args = p.parse_args()

    allocator = cholesky.keep_freed_memory()
    common: Record = {
        "blas": cholesky.blas_info(),
        "blas_env": {k: os.environ.get(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")},
        "freed_memory_kept": allocator,
    }
    print(f"load average {loadavg()}")
    for lib in common["blas"]:
        print(
            f"BLAS: {lib['filepath']}: {lib['internal_api']} {lib['version']}, "
            f"{lib['architecture']} kernels, {lib['num_threads']} threads"
        )
    ex = cnc.Executor()
    records = kernel_records(512, args.repeats)
    for n in args.sizes:
        ours = cholesky_records(n, args.repeats, ex, common)
        records += ours
        if args.rust_cholesky:
            tile, gflops = ours[0]["tile"], ours[0]["stampede"]
            records.append(rust_records(args.rust_cholesky, n, tile, args.repeats, gflops))
    if 4096 in sweeps:
        records.append(by_workers(4096, sweeps[4096], args.repeats, common))
    snet2_tile = next((r["tile"] for r in records if r["metric"] == "snet_cholesky_gflops"
                       and r.get("version") == "snet2" and r.get("n") == 4096), None)
    if not args.no_face_detect or snet2_tile is not None:
        records += policy_records(args.repeats, {}, snet2_tile)
    show(records)
    save(args.out, records)  # before face detection, which takes a while
    if not args.no_face_detect:
        records += face_detect_records()
        save(args.out, records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
