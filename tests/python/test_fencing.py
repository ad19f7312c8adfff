"""Fencing: a writer stopped past its lease is dropped by the owner. When it comes back its
old connection is gone, so its late put is refused, typed, and never stored; a connection it
makes after it is back is new, and its puts are stored (the fault harness's checker holds
writers to exactly this)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import stampede as sp
from _support import free_endpoint, wait_until
from stampede.errors import Timeout

LEASE = 1.0
LONG = 20.0

# The writer: one put stored, then (told to) a late put on the same connection, then a put
# on a connection made afresh.
WRITER = """
import sys, time, stampede as sp
app, ep, owner = sys.argv[1:4]
space = sp.Space.join(app, connect=[ep], lease=1.0)
frames = space.lookup_channel("frames", timeout=20.0)
t = space.task(0)
out = t.attach_output(frames)
out.put(1, "before", timeout=20.0, sync=True)
print("ATTACHED", space.id, flush=True)
sys.stdin.readline()
deadline = time.monotonic() + 20.0
while owner not in space.spaces() and time.monotonic() < deadline:
    time.sleep(0.02)
try:
    out.put(2, "late", timeout=5.0, sync=True)
    print("STORED", flush=True)
except sp.StampedeError as e:
    print("REFUSED", type(e).__name__, flush=True)
t2 = space.task(3)
t2.attach_output(frames).put(3, "afresh", timeout=20.0, sync=True)
print("AFRESH", flush=True)
sys.stdin.readline()
space.leave()
"""


def test_a_writer_stopped_past_its_lease_is_fenced_and_may_attach_afresh() -> None:
    ep = free_endpoint()
    app = f"pyfence-w{os.getpid()}"
    space = sp.Space.join(app, mode="router", listen=[ep], lease=LEASE)
    frames = space.channel("frames", capacity=8)
    reader = space.task(0)
    inp = reader.attach_input(frames)
    reader.set_virtual_time(sp.INFINITY)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, app, ep, space.id],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None and writer.stdin is not None
        word, wid = writer.stdout.readline().split()
        assert word == "ATTACHED"
        assert inp.get(sp.NEXT_UNSEEN, timeout=LONG) == (1, "before")
        lost = space.stats().spaces_lost
        os.kill(writer.pid, signal.SIGSTOP)
        wait_until("the owner drops the stopped writer", lambda: wid not in space.spaces())
        assert space.stats().spaces_lost == lost + 1
        os.kill(writer.pid, signal.SIGCONT)
        wait_until("the writer is back", lambda: wid in space.spaces())
        writer.stdin.write("go\n")
        writer.stdin.flush()
        late = writer.stdout.readline().split()
        assert late[0] == "REFUSED", late
        assert late[1] in ("Detached", "UnreachableError"), late
        assert writer.stdout.readline().strip() == "AFRESH"
        # The late put is not stored, even in part: the next item is the fresh one.
        assert inp.get(sp.NEXT_UNSEEN, timeout=LONG) == (3, "afresh")
        time.sleep(0.2)
        assert 2 not in [ts for ts, _ in _items(inp)]
        writer.stdin.write("bye\n")
        writer.stdin.flush()
        assert writer.wait(timeout=LONG) == 0
    finally:
        if writer.poll() is None:
            os.kill(writer.pid, signal.SIGCONT)
            writer.kill()
            writer.wait()
        reader.exit()
        space.leave()


def _items(inp: sp.ChannelInput) -> list[tuple[int, object]]:
    """Whatever else is in the channel now, without waiting."""
    out: list[tuple[int, object]] = []
    while True:
        try:
            out.append(inp.get(sp.NEXT_UNSEEN, timeout=0.0))
        except Timeout:
            return out
