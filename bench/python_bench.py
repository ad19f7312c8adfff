"""Python benchmarks: STM operations against queue.Queue, numpy arrays between two
processes against Zenoh pub/sub, and the demo pipeline's frame rate by worker count against
a sequential loop doing the same work.

Every figure is the median of several repeats, measured in the same run as its baseline.
Writes a JSON list of records (the format of bench-results/core.json) and prints a table.

    python bench/python_bench.py --out bench-results/python.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import queue
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import stampede as sp

Record = dict[str, Any]


def record(
    metric: str, payload: int, ours: float, base: float, base_name: str, unit: str, **extra: Any
) -> Record:
    r: Record = {
        "metric": metric,
        "payload_bytes": payload,
        "stampede": ours,
        "baseline": base,
        "baseline_name": base_name,
        "unit": unit,
    }
    r.update(extra)
    return r


def timed_per_op(fn: Callable[[int], None], n: int) -> float:
    """Microseconds per iteration of ``fn(n)``, with the cyclic collector off."""
    gc.disable()
    try:
        start = time.perf_counter()
        fn(n)
        return (time.perf_counter() - start) / n * 1e6
    finally:
        gc.enable()


def put_get_consume(size: int, n: int, repeats: int) -> tuple[float, float]:
    """One thread: Stampede put + get + consume against queue.Queue put + get (µs/op)."""
    payload = b"x" * size
    rt = sp.Runtime()
    producer, consumer = rt.task(0, name="producer"), rt.task(sp.INFINITY, name="consumer")
    ch = rt.channel("bench")
    out, inp = producer.attach_output(ch), consumer.attach_input(ch)
    next_ts = 0

    def stm(count: int) -> None:
        nonlocal next_ts
        get, put, consume, nxt = inp.get, out.put, inp.consume, sp.NEXT_UNSEEN
        for ts in range(next_ts, next_ts + count):
            put(ts, payload)
            got, _ = get(nxt)
            consume(got)
        next_ts += count
        producer.set_virtual_time(next_ts)  # lets the collector reclaim between repeats

    q: queue.Queue[bytes] = queue.Queue()

    def base(count: int) -> None:
        put, get = q.put, q.get
        for _ in range(count):
            put(payload)
            get()

    ours, theirs = [], []
    stm(n // 10)
    base(n // 10)
    for _ in range(repeats):
        ours.append(timed_per_op(stm, n))
        theirs.append(timed_per_op(base, n))
    rt.close()
    return statistics.median(ours), statistics.median(theirs)


def handoff_p50(n: int, repeats: int) -> tuple[float, float]:
    """Two threads ping-pong 64 B; one-way latency is half the round trip (µs, p50)."""
    payload = b"x" * 64

    def stm_run() -> float:
        rt = sp.Runtime()
        ping, pong = rt.channel("ping"), rt.channel("pong")
        main, echo_task = rt.task(0, name="main"), rt.task(0, name="echo")
        ping_out, pong_in = main.attach_output(ping), main.attach_input(pong)
        ping_in, pong_out = echo_task.attach_input(ping), echo_task.attach_output(pong)

        def echo() -> None:
            for _ in range(n):
                ts, v = ping_in.get(sp.NEXT_UNSEEN, timeout=10.0)
                ping_in.consume(ts)
                pong_out.put(ts, v)
                echo_task.set_virtual_time(ts + 1)

        th = threading.Thread(target=echo)
        th.start()
        lat = []
        for i in range(n):
            start = time.perf_counter_ns()
            ping_out.put(i, payload)
            ts, _ = pong_in.get(sp.NEXT_UNSEEN, timeout=10.0)
            lat.append((time.perf_counter_ns() - start) / 2000)
            pong_in.consume(ts)
            main.set_virtual_time(i + 1)
        th.join()
        rt.close()
        return statistics.median(lat)

    def queue_run() -> float:
        a: queue.Queue[bytes] = queue.Queue()
        b: queue.Queue[bytes] = queue.Queue()

        def echo() -> None:
            for _ in range(n):
                b.put(a.get(timeout=10.0))

        th = threading.Thread(target=echo)
        th.start()
        lat = []
        for _ in range(n):
            start = time.perf_counter_ns()
            a.put(payload)
            b.get(timeout=10.0)
            lat.append((time.perf_counter_ns() - start) / 2000)
        th.join()
        return statistics.median(lat)

    ours, theirs = [], []
    for _ in range(repeats):
        ours.append(stm_run())
        theirs.append(queue_run())
    return statistics.median(ours), statistics.median(theirs)


def micro(quick: bool, repeats: int) -> list[Record]:
    out = []
    for size in (64, 1 << 20):
        n = 20_000 if quick else 100_000
        ours, base = put_get_consume(size, n, repeats)
        out.append(
            record("py_put_get_consume", size, ours, base, "queue.Queue put+get", "us", target="<=1.0x")
        )
    ours, base = handoff_p50(2_000 if quick else 10_000, repeats)
    out.append(
        record(
            "py_handoff_latency_p50", 64, ours, base, "queue.Queue between two threads", "us",
            target="<=1.0x",
        )
    )
    return out


def zenoh_baseline(net_json: Path) -> dict[tuple[str, int], float]:
    """The Zenoh pub/sub figures of the Rust network benchmark, by (metric, payload)."""
    try:
        records = json.loads(net_json.read_text())
    except (OSError, ValueError):
        return {}
    return {
        (r["metric"], r["payload_bytes"]): r["baseline"]
        for r in records
        if r.get("baseline_name") == "zenoh_pubsub"
    }


def xproc(quick: bool, repeats: int, net_json: Path) -> list[Record]:
    """numpy arrays through a channel of another process, against the Zenoh pub/sub figures
    that ``stampede-net-bench`` wrote to ``net_json`` in the same ``make bench`` run."""
    import python_xproc

    base = zenoh_baseline(net_json)
    name = f"Zenoh pub/sub (Rust, {net_json})"
    if not base:
        print(f"no Zenoh baseline in {net_json}: run stampede-net-bench first", file=sys.stderr)
    out = []
    n = 300 if quick else 2_000
    for size in (64, 1 << 16, 1 << 20):
        ours = statistics.median(python_xproc.pingpong(size, n) for _ in range(repeats))
        out.append(
            record(
                "py_xproc_pingpong_oneway_p50", size, ours,
                base.get(("xproc_pingpong_oneway_p50", size), float("nan")), name, "us",
                target="<=1.5x",
            )
        )
    seconds = 1.0 if quick else 2.0
    for size in (1 << 16, 1 << 20):
        ours = statistics.median(python_xproc.bandwidth(size, seconds) for _ in range(repeats))
        out.append(
            record(
                "py_xproc_bandwidth", size, ours,
                base.get(("xproc_bandwidth", size), float("nan")), name, "MB/s",
                target=">=0.6x",
            )
        )
    return out


def demo(quick: bool, repeats: int, seconds: float) -> list[Record]:
    from stampede.demo.bench import measure_pipeline, measure_sequential

    out = []
    seq = [measure_sequential(seconds) for _ in range(repeats)]
    seq_fps = statistics.median(r["fps"] for r in seq)
    seq_lat = statistics.median(r["latency_ms_p50"] for r in seq)
    for k in (1, 2, 4):
        runs = [measure_pipeline(k, seconds) for _ in range(repeats)]
        fps = statistics.median(r["fps"] for r in runs)
        lat50 = statistics.median(r["latency_ms_p50"] for r in runs)
        lat99 = statistics.median(r["latency_ms_p99"] for r in runs)
        acc = statistics.median(r["accuracy"] for r in runs)
        frame = int(runs[0].get("frame_bytes", 0))
        out.append(
            record(
                "demo_fps", frame, fps, seq_fps, "sequential numpy/OpenCV loop", "frames/s",
                workers=k, target=">=1.5x at K=2" if k == 2 else None, accuracy=acc,
            )
        )
        out.append(
            record(
                "demo_latency_ms_p50", frame, lat50, seq_lat, "sequential numpy/OpenCV loop", "ms",
                workers=k, latency_ms_p99=lat99,
            )
        )
    return out


def show(records: list[Record]) -> None:
    print(
        f"{'metric':<24}{'payload':>10}{'K':>4}{'unit':>10}{'stampede':>14}{'baseline':>14}"
        f"{'ratio':>8}  target"
    )
    for r in records:
        ratio = r["stampede"] / r["baseline"] if r["baseline"] else float("nan")
        k = r.get("workers", "")
        print(
            f"{r['metric']:<24}{r['payload_bytes']:>10}{k!s:>4}{r['unit']:>10}"
            f"{r['stampede']:>14.3f}{r['baseline']:>14.3f}{ratio:>7.2f}x  {r.get('target') or ''}"
        )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("bench-results/python.json"))
    p.add_argument("--repeats", type=int, default=5, help="runs per figure (median reported)")
    p.add_argument("--quick", action="store_true", help="fewer iterations and repeats")
    p.add_argument("--only", choices=["micro", "xproc", "demo"], help="run one group")
    p.add_argument(
        "--net-json",
        type=Path,
        default=Path("bench-results/net.json"),
        help="the Rust network benchmark's results, for the Zenoh baseline of the xproc group",
    )
    p.add_argument("--seconds", type=float, default=6.0, help="length of each demo run")
    args = p.parse_args()
    # Zenoh's threads sized as the Rust network bench (the xproc baseline) sizes them.
    if "ZENOH_RUNTIME" not in os.environ and (runtime := sp.zenoh_runtime_for_this_machine()):
        os.environ["ZENOH_RUNTIME"] = runtime
    repeats = 3 if args.quick else args.repeats
    seconds = 3.0 if args.quick else args.seconds
    records: list[Record] = []
    if args.only in (None, "micro"):
        records += micro(args.quick, repeats)
    if args.only in (None, "xproc"):
        records += xproc(args.quick, repeats, args.net_json)
    if args.only in (None, "demo"):
        records += demo(args.quick, repeats, seconds)
    show(records)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(records, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
