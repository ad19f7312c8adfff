"""Ctrl-C: SIGINT stops every blocking call of the Python face with ``KeyboardInterrupt``,
and leaves the container consistent and usable.

Each case runs in a subprocess whose main thread blocks in one call; the test sends SIGINT
once the call is blocked and measures how long the child takes to report the interrupt.
The design goal is 0.5 s; the bound asserted is generous so a loaded machine cannot fail it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

# Liveness bound for the interrupt to arrive (the goal is 0.5 s).
BOUND = 2.0

# Every case sets up a blocked call in `block()`, prints READY just before making it, and
# after the interrupt runs `check()`, which proves the container still works.
PRELUDE = """
import sys, time
import stampede as sp

rt = sp.Runtime()
"""

CASES = {
    "put on a full channel": """
ch = rt.channel(capacity=1)
producer = rt.task(0)
out = producer.attach_output(ch)
reader = rt.task(sp.INFINITY).attach_input(ch)
out.put(0, "a")
def block():
    out.put(1, "b")
def check():
    # The interrupted put stored nothing and left no pending term; the channel works.
    assert ch.timestamps() == [0], ch.timestamps()
    assert not [h for h in rt.explain(0).holds if h.cause == "pending_put"]
    reader.get(0)
    reader.consume(0)
    producer.set_virtual_time(1)
    rt.collect()
    out.put(1, "b", timeout=5)
    assert ch.timestamps() == [1], ch.timestamps()
""",
    "put with a timeout on a full channel": """
ch = rt.channel(capacity=1)
producer = rt.task(0)
out = producer.attach_output(ch)
reader = rt.task(sp.INFINITY).attach_input(ch)
out.put(0, "a")
def block():
    out.put(1, "b", timeout=60)
def check():
    assert ch.timestamps() == [0], ch.timestamps()
    reader.consume(0)
    producer.set_virtual_time(1)
    out.put(1, "b", timeout=5)
    assert ch.timestamps() == [1], ch.timestamps()
""",
    "put on a full queue": """
q = rt.queue(capacity=1)
out = rt.task(0).attach_output(q)
inp = rt.task(0).attach_input(q)
out.put(0, "a")
def block():
    out.put(1, "b")
def check():
    assert len(q) == 1, len(q)
    assert not [h for h in rt.explain(0).holds if h.cause == "pending_put"]
    got = inp.get(timeout=5)
    assert got.value == "a"
    inp.consume(got.ticket)
    out.put(1, "b", timeout=5)
    assert inp.get(timeout=5).value == "b"
""",
    "put with a timeout on a full queue": """
q = rt.queue(capacity=1)
out = rt.task(0).attach_output(q)
inp = rt.task(0).attach_input(q)
out.put(0, "a")
def block():
    out.put(1, "b", timeout=60)
def check():
    assert len(q) == 1, len(q)
    inp.consume(inp.get(timeout=5).ticket)
    out.put(1, "b", timeout=5)
""",
    "pacer sync": """
task = rt.task(0)
pacer = task.pacer(period=3600.0, tolerance=1e6)
pacer.sync(0)
def block():
    pacer.sync(1)
def check():
    stats = pacer.stats()
    assert stats.on_time == 1, stats  # the interrupted sync counted no tick
    assert pacer.sync(0).kind == "on_time"
""",
    "pacer sync, with a handler that uses the pacer": """
import signal
task = rt.task(0)
pacer = task.pacer(period=3600.0, tolerance=1e6)
pacer.sync(0)
seen = []
def handler(signum, frame):
    # Runs while sync sleeps holding the pacer: refused at once, never a hang.
    try:
        pacer.stats()
    except RuntimeError as e:
        seen.append(e)
    raise KeyboardInterrupt
signal.signal(signal.SIGINT, handler)
def block():
    pacer.sync(1)
def check():
    assert len(seen) == 1 and "signal handler" in str(seen[0]), seen
    assert pacer.stats().on_time == 1
""",
    "get on a channel": """
ch = rt.channel()
inp = rt.task(sp.INFINITY).attach_input(ch)
out = rt.task(0).attach_output(ch)
def block():
    inp.get(sp.NEXT_UNSEEN)
def check():
    out.put(0, "a")
    assert inp.get(sp.NEXT_UNSEEN, timeout=5) == (0, "a")
""",
    "get on a queue": """
q = rt.queue()
inp = rt.task(sp.INFINITY).attach_input(q)
out = rt.task(0).attach_output(q)
def block():
    inp.get()
def check():
    out.put(0, "a")
    assert inp.get(timeout=5).value == "a"
""",
    "read of a register": """
reg = rt.register()
inp = rt.task(sp.INFINITY).attach_input(reg)
out = rt.task(0).attach_output(reg)
def block():
    inp.read()
def check():
    out.write("v")
    assert inp.read(timeout=5)[1] == "v"
""",
}

MAIN = """
print("READY", flush=True)
start = time.monotonic()
try:
    block()
except KeyboardInterrupt:
    print("INTERRUPTED", flush=True)
    check()
    print("CONSISTENT", flush=True)
    sys.exit(0)
print("RETURNED without an interrupt", flush=True)
sys.exit(3)
"""


@pytest.mark.parametrize("case", sorted(CASES))
def test_sigint_interrupts_a_blocked_call(case: str) -> None:
    script = PRELUDE + textwrap.dedent(CASES[case]) + MAIN
    child = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # A child that never answers is killed, so the reads below end instead of hanging.
    watchdog = threading.Timer(60, child.kill)
    watchdog.start()
    try:
        assert child.stdout is not None and child.stderr is not None
        assert child.stdout.readline().strip() == "READY", child.stderr.read()
        # Let the call block: it prints READY just before making it.
        time.sleep(0.3)
        sent = time.monotonic()
        os.kill(child.pid, signal.SIGINT)
        line = child.stdout.readline().strip()
        took = time.monotonic() - sent
        assert line == "INTERRUPTED", f"{case}: {line!r}; stderr: {child.stderr.read()}"
        assert took < BOUND, f"{case}: KeyboardInterrupt came {took:.2f} s after SIGINT"
        rest, err = child.stdout.read(), child.stderr.read()
        assert "CONSISTENT" in rest, f"{case}: the container was left unusable: {err}"
        assert child.wait() == 0, err
    finally:
        watchdog.cancel()
        if child.poll() is None:
            child.kill()
            child.wait()
