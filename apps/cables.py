"""CableS' pthreads programs on Stampede's cluster threads, in Python: PN (prime numbers),
PC (producer and consumer), PIPE (a threaded pipeline) and an SPMD relaxation of a rod over a
global segment with barriers, across address spaces attached
through a node agent, each checked against sequential code, with the calls each program made
of each operation and their mean cost (CableS' Table 5).

The tasks are named by import path (``cables:pn_worker``); the attached spaces are
``python -m stampede.cluster`` in the same environment, with this directory on their path.

    python apps/cables.py [--spaces 3]
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import stampede as sp
from stampede import cluster

TIMEOUT = 60.0


def _get(seg: cluster.Segment, i: int) -> int:
    value: int = struct.unpack("<Q", seg.read(i * 8, 8))[0]
    return value


def _put(seg: cluster.Segment, i: int, v: int) -> None:
    seg.write(i * 8, struct.pack("<Q", v))


def is_prime(n: int) -> bool:
    if n < 2:
        return False
    d = 2
    while d * d <= n:
        if n % d == 0:
            return False
        d += 1
    return True


# ---- PN: words 0 = next candidate, 1 = primes found, under mutex pn/lock.
PN_LIMIT = 5000


def pn_worker(ctx: cluster.TaskContext, args: bytes) -> bytes:
    c = ctx.cluster
    m, seg = c.mutex("pn/lock"), c.segment("pn/state", 16)
    mine = 0
    while True:
        with m:
            start = max(_get(seg, 0), 2)
            _put(seg, 0, start + 100)
        if start >= PN_LIMIT:
            return str(mine).encode()
        found = sum(1 for n in range(start, min(start + 100, PN_LIMIT)) if is_prime(n))
        mine += found
        with m:
            _put(seg, 1, _get(seg, 1) + found)


def pn(c: cluster.Cluster, workers: int) -> str:
    hs = [c.spawn("cables:pn_worker", on="round_robin") for _ in range(workers)]
    by_tasks = sum(int(h.join(TIMEOUT)) for h in hs)
    with c.mutex("pn/lock"):
        total = _get(c.segment("pn/state", 16), 1)
    want = sum(1 for n in range(PN_LIMIT) if is_prime(n))
    assert total == want == by_tasks, (total, by_tasks, want)
    return f"{want} primes below {PN_LIMIT}, by {workers} tasks"


# ---- PC: words 0 = count, 1 = in, 2 = out, 3.. = slots.
PC_SLOTS = 8
PC_ITEMS = 200


def _pc_objects(c: cluster.Cluster) -> tuple[cluster.Mutex, cluster.Condition, cluster.Condition, cluster.Segment]:
    return (
        c.mutex("pc/lock"),
        c.condition("pc/not-full"),
        c.condition("pc/not-empty"),
        c.segment("pc/buffer", (3 + PC_SLOTS) * 8),
    )


def pc_producer(ctx: cluster.TaskContext, args: bytes) -> None:
    m, not_full, not_empty, seg = _pc_objects(ctx.cluster)
    for v in range(1, PC_ITEMS + 1):
        with m:
            while _get(seg, 0) == PC_SLOTS:
                not_full.wait(m)
            at = _get(seg, 1)
            _put(seg, 3 + at, v)
            _put(seg, 1, (at + 1) % PC_SLOTS)
            _put(seg, 0, _get(seg, 0) + 1)
        not_empty.signal()


def pc_consumer(ctx: cluster.TaskContext, args: bytes) -> bytes:
    m, not_full, not_empty, seg = _pc_objects(ctx.cluster)
    total, last = 0, 0
    for _ in range(PC_ITEMS):
        with m:
            while _get(seg, 0) == 0:
                not_empty.wait(m)
            at = _get(seg, 2)
            v = _get(seg, 3 + at)
            _put(seg, 2, (at + 1) % PC_SLOTS)
            _put(seg, 0, _get(seg, 0) - 1)
        not_full.signal()
        assert v == last + 1, f"consumed {v} after {last}"
        last = v
        total += v
    return str(total).encode()


def pc(c: cluster.Cluster, other: str) -> str:
    consumer = c.spawn("cables:pc_consumer", on=other)
    producer = c.spawn("cables:pc_producer", on="here")
    producer.join(TIMEOUT)
    total = int(consumer.join(TIMEOUT))
    assert total == PC_ITEMS * (PC_ITEMS + 1) // 2, total
    return f"{PC_ITEMS} items in order through {PC_SLOTS} slots, in two spaces"


# ---- PIPE: mailbox k is words 2k (full) and 2k + 1 (value), under mutex pipe/k.
STAGES = 3
PIPE_ITEMS = 40


def _mailbox(c: cluster.Cluster, k: int) -> tuple[cluster.Mutex, cluster.Condition, cluster.Segment]:
    return c.mutex(f"pipe/{k}"), c.condition(f"pipe/{k}/changed"), c.segment("pipe/boxes", (STAGES + 1) * 16)


def _take(c: cluster.Cluster, k: int) -> int:
    m, cv, seg = _mailbox(c, k)
    with m:
        while _get(seg, 2 * k) == 0:
            cv.wait(m)
        v = _get(seg, 2 * k + 1)
        _put(seg, 2 * k, 0)
    cv.broadcast()
    return v


def _give(c: cluster.Cluster, k: int, v: int) -> None:
    m, cv, seg = _mailbox(c, k)
    with m:
        while _get(seg, 2 * k) == 1:
            cv.wait(m)
        _put(seg, 2 * k + 1, v)
        _put(seg, 2 * k, 1)
    cv.broadcast()


def stage_calc(k: int, v: int) -> int:
    return v * 3 + k


def pipe_stage(ctx: cluster.TaskContext, args: bytes) -> None:
    k = int(args)
    for _ in range(PIPE_ITEMS):
        _give(ctx.cluster, k + 1, stage_calc(k, _take(ctx.cluster, k)))


def pipe(c: cluster.Cluster) -> str:
    stages = [c.spawn("cables:pipe_stage", str(k).encode(), on="round_robin") for k in range(STAGES)]
    def feed() -> None:
        for i in range(PIPE_ITEMS):
            _give(c, 0, i)

    feeder = threading.Thread(target=feed)
    feeder.start()
    for i in range(PIPE_ITEMS):
        want = i
        for k in range(STAGES):
            want = stage_calc(k, want)
        got = _take(c, STAGES)
        assert got == want, (i, got, want)
    feeder.join(TIMEOUT)
    where = {h.space for h in stages}
    for h in stages:
        h.join(TIMEOUT)
    return f"{PIPE_ITEMS} items through {STAGES} stages in {len(where)} spaces"


# ---- SPMD: a rod's relaxation in segment spmd/rod; each member updates its own part of
# the cells between barriers and returns cell 1, which must match sequential code.
ROD, STEPS = 64, 30


def spmd_member(ctx: cluster.TaskContext, args: bytes) -> bytes:
    r, p = (int(x) for x in args.decode().split())
    c = ctx.cluster
    seg, b = c.segment("spmd-py/rod", ROD * 8), c.barrier("spmd-py/step", p)
    if r == 0:
        seg.write(0, struct.pack("<d", 100.0))
    b.wait()
    lo, hi = r * ROD // p, (r + 1) * ROD // p
    for _ in range(STEPS):
        old = cluster.segment_array(seg, np.float64)
        b.wait()
        # A typed view: only the cells this member changed are written.
        with cluster.segment_view(seg, np.float64) as rod:
            for i in range(max(lo, 1), min(hi, ROD - 1)):
                rod[i] = (old[i - 1] + old[i + 1]) / 2
        b.wait()
    return seg.read(8, 8)


def spmd(c: cluster.Cluster, members: int) -> str:
    hs = [c.spawn("cables:spmd_member", f"{r} {members}".encode(), on="round_robin") for r in range(members)]
    x = [100.0] + [0.0] * (ROD - 1)
    for _ in range(STEPS):
        old = list(x)
        for i in range(1, ROD - 1):
            x[i] = (old[i - 1] + old[i + 1]) / 2
    for h in hs:
        got = struct.unpack("<d", h.join())[0]
        assert got == x[1], f"cell 1 is {got}, {x[1]} expected"
    return f"a rod of {ROD} cells, {STEPS} steps, {members} members"


PROGRAMS: dict[str, Callable[[cluster.Cluster, list[str]], str]] = {
    "pn": lambda c, others: pn(c, 2 * (len(others) + 1)),
    "pc": lambda c, others: pc(c, others[0]),
    "pipe": lambda c, others: pipe(c),
    "spmd": lambda c, others: spmd(c, len(others) + 1),
}
COLUMNS = ["create", "join", "lock", "unlock", "wait", "signal", "broadcast", "barrier"]


def _totals(space: sp.Space) -> dict[str, tuple[int, float]]:
    out = {k: (0, 0.0) for k in COLUMNS}
    for stats in cluster.cluster_stats(space).values():
        assert stats is not None, "a member did not answer"
        for k in COLUMNS:
            n, s = stats[k]
            out[k] = (out[k][0] + n, out[k][1] + s)
    return out


def run(spaces: int = 3, programs: list[str] | None = None) -> dict[str, str]:
    """Runs the programs across ``spaces`` address spaces (this one and the rest attached
    through a node agent); returns each program's result line, having printed the table."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        ep = f"tcp/127.0.0.1:{s.getsockname()[1]}"
    app = f"cables-py-{os.getpid()}"
    here = str(Path(__file__).resolve().parent)
    os.environ["PYTHONPATH"] = os.pathsep.join([here, *[p for p in sys.path if p]])
    if here not in sys.path:
        sys.path.insert(0, here)
    results: dict[str, str] = {}
    with sp.Space.join(app, mode="router", listen=[ep]) as space:
        with cluster.Cluster.start(space, timeout=TIMEOUT) as c:
            agent = cluster.NodeAgent.start(space, "localhost", [ep])
            try:
                others = [c.attach([sys.executable, "-m", "stampede.cluster"], TIMEOUT) for _ in range(spaces - 1)]
                print(f"{len(c.spaces())} address spaces: this one and {len(others)} attached")
                print(f"{'PROG':<6}" + "".join(f"{k[:9]:>12}" for k in COLUMNS) + "   (calls/mean ms)")
                for name in programs or list(PROGRAMS):
                    before = _totals(space)
                    t0 = time.monotonic()
                    results[name] = PROGRAMS[name](c, others)
                    took = time.monotonic() - t0
                    after = _totals(space)
                    cells = []
                    for k in COLUMNS:
                        n = after[k][0] - before[k][0]
                        secs = after[k][1] - before[k][1]
                        cells.append(f"{n}/{1e3 * secs / n:.2f}" if n else "-")
                    print(f"{name.upper():<6}" + "".join(f"{x:>12}" for x in cells) + f"   ok in {took:.2f} s: {results[name]}")
                for o in others:
                    c.detach(o)
            finally:
                agent.stop()
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--spaces", type=int, default=3)
    ap.add_argument("programs", nargs="*", choices=[*PROGRAMS, []], default=[])
    a = ap.parse_args()
    run(a.spaces, a.programs or None)


if __name__ == "__main__":
    main()
