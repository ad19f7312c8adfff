"""An address space in a child process for the multi-process tests (``test_space.py``).

``python _space_child.py ROLE APP ENDPOINT [N]`` joins application ``APP`` as a peer of the
router at ``ENDPOINT``, plays ``ROLE`` and reports on stdout, one line per event, so the test
can follow it without timing anything.
"""

from __future__ import annotations

import os
import sys
import time

import stampede as sp
from stampede import cnc

# Long enough never to expire in a passing run.
LONG = 30.0
# A busy test host may starve a process for a second; only a process that dies should count
# as gone (its links close at once, whatever the lease).
LEASE = 5.0


def consumer(space: sp.Space, n: int) -> None:
    """Gets ``n`` items of ``frames`` in order (``NEXT_UNSEEN``), checking each payload."""
    frames = space.lookup_channel("frames", timeout=LONG)
    with space.task(0) as t:
        inp = t.attach_input(frames)
        t.set_virtual_time(sp.INFINITY)  # it inherits timestamps from its input
        print("READY", flush=True)
        for _ in range(n):
            ts, value = inp.get(sp.NEXT_UNSEEN, timeout=LONG)
            if value != f"frame {ts}":
                raise AssertionError(f"item {ts} holds {value!r}")
            inp.consume_until(ts)
            print(f"GOT {ts}", flush=True)
    print("DONE", flush=True)


def producer(space: sp.Space, n: int) -> None:
    """Puts ``frame 0`` .. ``frame n-1`` into ``frames``, its virtual time following."""
    frames = space.lookup_channel("frames", timeout=LONG)
    with space.task(0) as t:
        out = t.attach_output(frames)
        print("READY", flush=True)
        for ts in range(n):
            out.put(ts, f"frame {ts}", timeout=LONG)
            t.set_virtual_time(ts + 1)
        t.set_virtual_time(sp.INFINITY)
    print("DONE", flush=True)


def holder(space: sp.Space, n: int) -> None:
    """Gets the oldest item of ``frames`` and holds it open until killed."""
    del n
    frames = space.lookup_channel("frames", timeout=LONG)
    t = space.task(0)  # at visibility 0, the items already there are visible (rule 3)
    inp = t.attach_input(frames)
    ts, _ = inp.get(sp.OLDEST, timeout=LONG)
    # From now on the open item alone holds the owner's watermark.
    t.set_virtual_time(sp.INFINITY)
    print(f"HELD {ts}", flush=True)
    while True:
        time.sleep(60)


def owner(space: sp.Space, n: int) -> None:
    """Owns ``frames`` with items 0 .. n-1 in it, until killed."""
    frames = space.channel("frames")
    with space.task(0) as t:
        out = t.attach_output(frames)
        for ts in range(n):
            out.put(ts, f"frame {ts}")
    print("READY", flush=True)
    while True:
        time.sleep(60)


def containers(space: sp.Space, n: int) -> None:
    """Owns the bounded ``p/frames`` and ``p/jobs`` and the register ``p/mode``, until
    killed."""
    del n
    space.channel("p/frames", capacity=4)
    space.queue("p/jobs", capacity=4)
    space.register("p/mode")
    print("READY", flush=True)
    while True:
        time.sleep(60)


def relay(space: sp.Space, n: int) -> None:
    """Passes every newest frame of ``frames`` on into its own ``features``, until killed."""
    del n
    frames = space.lookup_channel("frames", timeout=LONG)
    features = space.channel("features", capacity=16)
    with space.task(0, name="relay") as t:
        inp, out = t.attach_input(frames), t.attach_output(features)
        t.set_virtual_time(sp.INFINITY)
        print("READY", flush=True)
        while True:
            ts, value = inp.get(sp.NEWEST_UNSEEN, timeout=LONG)
            out.put(ts, value, timeout=LONG)
            inp.consume_until(ts)


def sink(space: sp.Space, n: int) -> None:
    """Reads and consumes ``features`` as they come, until killed."""
    del n
    features = space.lookup_channel("features", timeout=LONG)
    with space.task(0, name="sink") as t:
        inp = t.attach_input(features)
        t.set_virtual_time(sp.INFINITY)
        print("READY", flush=True)
        while True:
            ts, _ = inp.get(sp.NEXT_UNSEEN, timeout=LONG)
            inp.consume_until(ts)


def chain_graph(
    n: int, fail_at: int | None = None
) -> tuple[cnc.Graph, cnc.ItemCollection, cnc.ItemCollection, cnc.TagCollection]:
    """x[i] = x[i-1] + i for i < n, each step in the space of rank i % 2 and each x[i]
    living there; ``ran`` records the process that ran step i; step ``fail_at`` raises.
    Both ranks build it alike."""
    g = cnc.Graph(cnc.Executor(2))
    x, ran, ids = g.items("x"), g.items("ran"), g.tags("ids")

    def add(ctx: cnc.StepContext, tag: tuple[int]) -> None:
        (i,) = tag
        if i == fail_at:
            raise ValueError(f"step {i} fails on purpose")
        ctx.put(x, i, ctx.get(x, i - 1) + i)
        ctx.put(ran, i, os.getpid())

    ids.prescribes(g.steps("add", add).compute_on(lambda tag: tag[0] % 2))
    x.home(lambda tag: tag[0] % 2)
    return g, x, ran, ids


def cnc_rank(space: sp.Space, n: int) -> None:
    """Rank 1 of the chain graph: serves it until the environment releases it. A negative
    ``n`` builds the graph of ``-n`` steps whose last (odd) step raises, here."""
    g, *_ = chain_graph(-n, fail_at=-n - 1) if n < 0 else chain_graph(n)
    g.distribute(space, "chain", 1, 2)
    print("SERVING", flush=True)
    slices = 0
    while True:  # in slices, as a program that also heeds a shutdown of its own serves
        try:
            g.serve(timeout=0.001)
            break
        except sp.Timeout:
            slices += 1
    print("SLICES", slices, flush=True)
    print("DONE", flush=True)


ROLES = {
    "consumer": consumer,
    "producer": producer,
    "holder": holder,
    "owner": owner,
    "containers": containers,
    "cnc": cnc_rank,
    "relay": relay,
    "sink": sink,
}


def main() -> None:
    """Runs the role the command line names."""
    role, app, endpoint = sys.argv[1:4]
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    # Peers reach each other directly: on loopback, like the router.
    with sp.Space.join(app, connect=[endpoint], listen=["tcp/127.0.0.1:0"], lease=LEASE) as space:
        ROLES[role](space, n)


if __name__ == "__main__":
    main()
