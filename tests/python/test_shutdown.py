"""Bounded shutdown: a blocked call and leaving an application both finish within their
documented bounds when the peer they wait on is stopped (SIGSTOP: alive, but silent)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

import stampede as sp
from _support import Background, free_endpoint
from stampede.errors import UnreachableError

LEASE = 1.0
# Space.leave waits at most this long for the transport's own tasks (docs/distribution.md).
CLOSE_BOUND = 2.0
# What a test run may add to it on a loaded machine.
SLACK = 1.5

# The owner: the application's router, owning a channel with one item.
OWNER = """
import sys, time, stampede as sp
space = sp.Space.join(sys.argv[1], mode="router", listen=[sys.argv[2]], lease=float(sys.argv[3]))
frames = space.channel("frames", capacity=4)
with space.task(0) as t:
    t.attach_output(frames).put(0, "zero")
print("READY", flush=True)
time.sleep(600)
"""


@pytest.fixture
def stoppable_owner() -> Iterator[tuple[subprocess.Popen[str], str, str]]:
    endpoint = free_endpoint()
    app = f"shutdown{os.getpid()}"
    proc = subprocess.Popen([sys.executable, "-c", OWNER, app, endpoint, str(LEASE)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().startswith("READY")
    try:
        yield proc, app, endpoint
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait()


def test_a_stopped_owner_releases_blocked_calls_and_leaving_is_bounded(
    stoppable_owner: tuple[subprocess.Popen[str], str, str],
) -> None:
    proc, app, endpoint = stoppable_owner
    space = sp.Space.join(app, mode="peer", connect=[endpoint], lease=LEASE, op_timeout=2.0)
    frames = space.lookup_channel("frames", timeout=10)
    t = space.task(0)
    inp = t.attach_input(frames)
    assert inp.get(sp.OLDEST, timeout=10) == (0, "zero")
    # Waits without a timeout for an item that will never come.
    waiting = Background(lambda: inp.get(sp.NEXT_UNSEEN), name="waiting get")
    time.sleep(0.3)
    os.kill(proc.pid, signal.SIGSTOP)
    stopped = time.monotonic()
    with pytest.raises(UnreachableError):
        waiting.result(timeout=10)
    # The lease, then the notice; the operation timeout bounds a get that was mid-request.
    assert waiting.finished_at is not None
    assert waiting.finished_at - stopped < LEASE + 2.0 + SLACK
    start = time.monotonic()
    space.leave()
    assert time.monotonic() - start < CLOSE_BOUND + SLACK


def test_an_owner_leaves_in_bounded_time_while_its_reader_is_stopped() -> None:
    endpoint = free_endpoint()
    app = f"shutdown-r{os.getpid()}"
    owner = sp.Space.join(app, mode="router", listen=[endpoint], lease=LEASE)
    owner.channel("frames", capacity=4)
    reader = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time, stampede as sp\n"
         "s = sp.Space.join(sys.argv[1], mode='peer', connect=[sys.argv[2]], lease=1.0)\n"
         "t = s.task(0); i = t.attach_input(s.lookup_channel('frames', timeout=10))\n"
         "print('READY', flush=True)\n"
         "i.get(sp.NEXT_UNSEEN)\n", app, endpoint],
        stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout is not None and reader.stdout.readline().startswith("READY")
        os.kill(reader.pid, signal.SIGSTOP)
        time.sleep(0.2)
        start = time.monotonic()
        owner.leave()
        assert time.monotonic() - start < CLOSE_BOUND + SLACK
    finally:
        os.kill(reader.pid, signal.SIGCONT)
        reader.kill()
        reader.wait()
