r"""The Stampede paper's application studies on this machine (bench-results/apps.json).

Video textures' analysis (``stampede.textures``) of the synthetic 316-frame 640×480 clip:

* ``vt_analysis_s``: seconds for the all-pairs analysis, sequential (the same kernel, tiles
  and stripes on one thread, no Stampede) and with Stampede's tasks in one address space
  with 1 and 2 workers; medians of the repeats.
* ``vt_analysis_speedup_2_workers``: frame pairs compared per second by 2 workers against
  the sequential baseline (the ratio is the speedup; target at least 1.8).
* ``vt_stripe_sweep``: Fig. 12 on this machine: seconds by stripe size (2 to 480 lines)
  for 1 and 2 workers, and the best stripe size.
* ``vt_speedup_by_workers``: Fig. 13: speedup over the sequential baseline with 1 to 4
  workers in one address space, next to the tiling's own limit and this machine's cores.
* ``vt_distributed_s``: 2 to 4 address spaces, single source and tiling with chaining, on
  this host (loopback, shared memory) and on emulated hosts (``bench/hosts.py``: network
  namespaces on a switch, every link rate-limited with ``tc tbf``): seconds, the frames
  and bytes each space received, the source's egress in frames (target under chaining:
  at most 1.2 N) and, from the link counters, in bytes; each worker's seconds getting
  frames against comparing them (Figs. 14-15).
* ``vt_chain_vs_single``: at 4 spaces on the rate-limited hosts, chaining's speed over
  single source's (target: at least 1).
* ``tracker_fps`` and ``tracker_latency_ms``: the color tracker split at two levels
  (``stampede.demo.tracker``) for every configuration of the paper's sweep (1, 2 and 4
  inner nodes by 1 to 3 threads each; Tables I-II), on this host and on the emulated
  hosts, and ``tracker_best``: the configuration with the best frame rate.

BLAS runs on one thread in every contender (threadpoolctl), so workers are the only
parallelism. Each record says how loaded the machine was.

    python bench/apps_bench.py --out bench-results/apps.json [--frames 316] [--quick]
        [--mbit 200] [--no-hosts]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from threadpoolctl import threadpool_limits

import stampede as sp
from stampede import textures as vt
from stampede.demo import tracker

sys.path.insert(0, str(Path(__file__).parent))
import hosts as emulated  # noqa: E402

Record = dict[str, Any]
T = TypeVar("T")


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


def _port(addr: str) -> int:
    with socket.socket() as s:
        s.bind((addr, 0))
        return int(s.getsockname()[1])


def on_emulated_hosts(net: emulated.Hosts, spaces: int,
                      run: Callable[[sp.Space], T]) -> tuple[T, list[tuple[int, int]]]:
    """Runs ``run`` with a source space on host 0 and a node agent on each of hosts 1 ..
    spaces - 1 (shared memory off everywhere, so every byte crosses a link); returns its
    result and the bytes each host sent and received meanwhile."""
    app = f"vt-bench-{os.getpid()}-{time.monotonic_ns()}"
    ep = f"tcp/{net.addr(0)}:{_port(net.addr(0))}"
    env = dict(os.environ, STAMPEDE_SHM_POOL="0",
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    with sp.Space.join(app, mode="router", listen=[ep], shm_pool=0) as space:
        agents = [
            subprocess.Popen(net.run_prefix(k) + [sys.executable, "-m", "stampede.cluster", "node",
                                                  "--app", app, "--host", f"h{k}", "--connect", ep],
                             env=env)
            for k in range(1, spaces)
        ]
        try:
            deadline = time.monotonic() + 60
            while sum(r.name.startswith("cluster/node/") for r in space.records()) < spaces - 1:
                if time.monotonic() > deadline or any(a.poll() is not None for a in agents):
                    raise RuntimeError("the emulated hosts' node agents did not start")
                time.sleep(0.05)
            before = net.counters()
            result = run(space)
            after = net.counters()
        finally:
            for a in agents:
                a.terminate()
            for a in agents:
                try:
                    a.wait(10)
                except subprocess.TimeoutExpired:
                    a.kill()
                    a.wait()
    return result, [(a[0] - b[0], a[1] - b[1]) for a, b in zip(after, before)]


THIS_HOST = "this host"


def places(mbit: int, use_hosts: bool) -> list[str]:
    """Where the distributed runs go: this host, and the emulated hosts when they can be
    made here."""
    why_not = emulated.available() if use_hosts else "--no-hosts"
    if why_not is not None:
        print(f"  emulated hosts skipped: {why_not}")
        return [THIS_HOST]
    return [THIS_HOST, f"emulated hosts, {mbit} Mbit/s links"]


def run_at(place: str, spaces: int, mbit: int,
           run: Callable[[sp.Space | None], T]) -> tuple[T, list[tuple[int, int]] | None]:
    """``run`` on this host (given no space: it makes its own application on loopback), or
    on ``spaces`` emulated hosts (given the source space on host 0), with the bytes each
    host's link carried."""
    if place == THIS_HOST:
        return run(None), None
    with emulated.Hosts(spaces, mbit) as net:
        return on_emulated_hosts(net, spaces, run)


def distributed_records(frames: np.ndarray, repeats: int, mbit: int, use_hosts: bool) -> list[Record]:
    n = int(frames.shape[0])
    frame_bytes = int(frames[0].nbytes)
    plan = vt.tiles(n, 16)
    total_pairs = sum(vt.tile_pairs(t) for t in plan)
    out: list[Record] = []
    at_places = places(mbit, use_hosts)
    for place in at_places:
        for spaces in (2, 3, 4):
            limit = total_pairs / max(sum(vt.tile_pairs(t) for t in r)
                                      for r in vt.split_rows(n, 16, spaces))
            for dist in vt.DISTRIBUTIONS:
                start, m0 = loadavg(), marks()
                runs: list[vt.Distributed] = []
                links: list[list[tuple[int, int]]] = []
                for _ in range(repeats):
                    r, link = run_at(place, spaces, mbit, lambda s: vt.analyze_distributed(
                        frames, spaces=spaces, distribution=dist, space=s))
                    runs.append(r)
                    if link is not None:
                        links.append(link)
                share = others_share(*m0)
                secs = [r.seconds for r in runs]
                at = secs.index(sorted(secs)[len(secs) // 2])
                mid = runs[at]
                rec: Record = {
                    "metric": "vt_distributed_s",
                    "what": f"video textures analysis, {n} frames, {spaces} address spaces, "
                            f"{dist}, {place}",
                    "place": place,
                    "spaces": spaces,
                    "distribution": dist,
                    "stampede": statistics.median(secs),
                    "unit": "s",
                    "repeats": secs,
                    "tiling_speedup_limit": round(limit, 3),
                    "frames_received_by_space": sorted(mid.frames_received.values()),
                    "bytes_received_by_space": sorted(v * frame_bytes
                                                      for v in mid.frames_received.values()),
                    "source_frames_sent": mid.source_frames_sent,
                    "source_egress_over_n": round(mid.source_frames_sent / n, 3),
                    "worker_seconds_getting": {k: round(v.getting, 3)
                                               for k, v in mid.worker_times.items()},
                    "worker_seconds_comparing": {k: round(v.comparing, 3)
                                                 for k, v in mid.worker_times.items()},
                    # The attached spaces are this run's own processes, counted here too.
                    "cpu_share_outside_this_process": round(share, 3),
                    "load_avg_start": start,
                }
                if dist == "chain":
                    rec["target"] = "source egress <= 1.2 N frames"
                    rec["met"] = mid.source_frames_sent <= 1.2 * n
                if links:
                    link = links[at]
                    rec["link_bytes_sent_by_host"] = [t for t, _ in link]
                    rec["link_bytes_received_by_host"] = [r for _, r in link]
                    rec["source_link_egress_over_n_frames"] = round(link[0][0] / (n * frame_bytes), 3)
                out.append(rec)
    for place in at_places[1:]:
        at4 = {r["distribution"]: r for r in out if r["place"] == place and r["spaces"] == 4}
        ratio = at4["single"]["stampede"] / at4["chain"]["stampede"]
        out.append({
            "metric": "vt_chain_vs_single",
            "what": f"4 address spaces on {place}: tiling with chaining against single source",
            "stampede": at4["chain"]["stampede"],
            "baseline": at4["single"]["stampede"],
            "baseline_name": "single source",
            "ratio": round(ratio, 3),
            "unit": "s",
            "target": ">= 1 (chaining at least as fast)",
            "met": ratio >= 1.0,
        })
    return out


def tracker_records(seconds: float, mbit: int, use_hosts: bool,
                    threads: tuple[int, ...]) -> list[Record]:
    out: list[Record] = []
    for place in places(mbit, use_hosts):
        runs: list[tracker.TrackerRun] = []
        for nodes in (1, 2, 4):
            for t in threads:
                p = tracker.Partition.paper(nodes, t)
                start, m0 = loadavg(), marks()
                r, _ = run_at(place, nodes + 1, mbit,
                              lambda s: tracker.run_two_level(p, seconds=seconds, space=s))
                share = others_share(*m0)
                runs.append(r)
                common = {
                    "place": place, "nodes": nodes, "threads_per_node": t,
                    "partition": {"Out_MP": p.out_mp, "Out_RP": p.out_rp,
                                  "In_MP": p.in_mp, "In_RP": p.in_rp},
                    "accuracy": round(r.accuracy, 4), "frames_decided": r.decided,
                    # The inner nodes are this run's own processes, counted here too.
                    "cpu_share_outside_this_process": round(share, 3),
                    "load_avg_start": start,
                }
                out.append({"metric": "tracker_fps", "stampede": round(r.fps, 3),
                            "unit": "frames/s",
                            "what": f"color tracker, {nodes} node(s) x {t} thread(s), {place}",
                            **common})
                out.append({"metric": "tracker_latency_ms", "stampede": round(r.latency_ms_p50, 1),
                            "p95": round(r.latency_ms_p95, 1), "unit": "ms",
                            "what": f"color tracker end-to-end latency (median), {nodes} node(s) "
                                    f"x {t} thread(s), {place}",
                            **common})
        best = max(runs, key=lambda r: r.fps)
        out.append({"metric": "tracker_best", "place": place, "nodes": best.partition.nodes,
                     "threads_per_node": best.partition.threads,
                     "partition": best.partition.label(), "stampede": round(best.fps, 3),
                     "latency_ms": round(best.latency_ms_p50, 1), "unit": "frames/s",
                     "what": f"the color tracker's best configuration, {place}"})
        print(f"  color tracker, {place} (fps / median latency ms):")
        print("    " + tracker.table(runs, "fps", ".2f").replace("\n", "\n    "))
        print("    " + tracker.table(runs, "latency_ms_p50", ".0f").replace("\n", "\n    "))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--out", default="bench-results/apps.json")
    ap.add_argument("--frames", type=int, default=316)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="a short stripe sweep")
    ap.add_argument("--mbit", type=int, default=200, help="the emulated hosts' link rate")
    ap.add_argument("--dist-repeats", type=int, default=2)
    ap.add_argument("--no-hosts", action="store_true", help="leave the emulated hosts out")
    ap.add_argument("--tracker-seconds", type=float, default=6.0)
    ap.add_argument("--only", choices=["vt", "tracker"], help="one application's records")
    a = ap.parse_args()
    records: list[Record] = []
    if a.only != "tracker":
        records += vt_records(a)
    if a.only != "vt":
        print("color tracker, two-level split (paper Tables I-II), unpaced")
        records += tracker_records(a.tracker_seconds, a.mbit, not a.no_hosts, (1, 2, 3))
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if a.only is not None and out.exists():
        # Keep the other application's records from the last run.
        kept = [r for r in json.loads(out.read_text())
                if not str(r.get("metric", "")).startswith(a.only)]
        records = kept + records
    out.write_text(json.dumps(records, indent=2, sort_keys=True))
    print(f"results written to {a.out}")


def vt_records(a: argparse.Namespace) -> list[Record]:
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
        m2 = marks()
        by_workers = {1: statistics.median(one), 2: statistics.median(two)}
        for w in (3, 4):
            by_workers[w] = vt.analyze(frames, workers=w, stripe_lines=stripe).seconds
        plan = vt.tiles(a.frames, 16)
        records.append(
            {
                "metric": "vt_speedup_by_workers",
                "what": "speedup over the sequential baseline by workers in one address space "
                        "(paper Fig. 13), next to the tiling's limit and this machine's cores",
                "speedup": {str(w): round(base / t, 3) for w, t in by_workers.items()},
                "seconds": {str(w): t for w, t in by_workers.items()},
                "tiling_limit": {str(w): round(vt.speedup_limit(plan, w), 3) for w in by_workers},
                "cores": os.cpu_count(),
                "others_cpu_share": round(others_share(*m2), 3),
                "loaded": others_share(*m2) > 0.05,
            }
        )
        records += distributed_records(frames, a.dist_repeats, a.mbit, not a.no_hosts)
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
    for r in records:
        if r["metric"] == "vt_speedup_by_workers":
            print("  speedup by workers: " + ", ".join(
                f"{w}: {v:.2f}x (tiling limit {r['tiling_limit'][w]:.2f})" for w, v in r["speedup"].items()))
        if r["metric"] == "vt_distributed_s":
            line = (f"  {r['place']:<32} {r['spaces']} spaces {r['distribution']:<6} "
                    f"{r['stampede']:6.2f} s  source sent {r['source_egress_over_n']:.2f} N frames")
            if "source_link_egress_over_n_frames" in r:
                line += f" ({r['source_link_egress_over_n_frames']:.2f} N on its link)"
            print(line)
        if r["metric"] == "vt_chain_vs_single":
            print(f"  {r['what']}: {r['ratio']:.2f}x (target >= 1)")
    return records


if __name__ == "__main__":
    main()
