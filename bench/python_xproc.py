"""Python across processes: numpy arrays through a remote channel between two address
spaces, as in the Rust network benchmark (``stampede-net-bench``), whose Zenoh pub/sub
figures of the same ``make bench`` run are the baseline.

* **Ping-pong**: each side owns a channel and puts into the other's; one-way latency is half
  the round trip, which includes the consume and the virtual-time advance.
* **Bandwidth**: the parent owns a bounded channel that a child fills with arrays for a few
  seconds; MB/s between the first and the last arrival.

The child is this file run with ``--child``.
"""

from __future__ import annotations

import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import stampede as sp

TIMEOUT = 30.0
#: Bytes the bandwidth channel may hold, as in the Rust benchmark.
WINDOW = 32 << 20


def _endpoint() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp/127.0.0.1:{s.getsockname()[1]}"


def _made(out: sp.ChannelOutput, src: np.ndarray) -> np.ndarray:
    """``src`` made afresh, as a producer of new frames would: a large one in memory the
    connection lends (the put then copies nothing), a small one as an ordinary array."""
    if src.nbytes < 4096:
        return src
    frame: np.ndarray = out.loan_array(src.shape, src.dtype)
    frame[:] = src
    return frame


def _array(size: int) -> np.ndarray:
    return np.arange(size, dtype=np.uint64).astype(np.uint8)


class _Child:
    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__)), "--child", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def expect(self, prefix: str) -> str:
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"child exited ({self.proc.wait()}) before {prefix!r}")
            if line.startswith(prefix):
                return line[len(prefix) :].strip()

    def finish(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        if self.proc.wait(TIMEOUT) != 0:
            raise RuntimeError(f"child failed with {self.proc.returncode}")


def pingpong(size: int, n: int) -> float:
    """Median one-way latency in µs of ``n`` round trips of ``size``-byte arrays."""
    app, ep = f"pyxp-{time.monotonic_ns()}", _endpoint()
    child = _Child("echo", app, ep, str(size), str(n))
    with sp.Space.join(app, mode="peer", listen=[ep]) as space:
        own = space.channel("pingpong/parent")
        child.expect("READY")
        other = space.lookup_channel("pingpong/child", timeout=TIMEOUT)
        with space.task(0) as t:
            inp, out = t.attach_input(own), t.attach_output(other)
            ping = _array(size)
            one_way = []
            for ts in range(n):
                start = time.perf_counter()
                out.put(ts, _made(out, ping))
                got, pong = inp.get(sp.NEXT_UNSEEN, timeout=TIMEOUT)
                assert got == ts and len(pong) == size
                inp.consume(ts)
                t.set_virtual_time(ts + 1)
                one_way.append((time.perf_counter() - start) * 1e6 / 2)
        child.finish()
    warm = max(1, n // 10)
    return statistics.median(one_way[warm:])


def bandwidth(size: int, seconds: float) -> float:
    """MB/s of ``size``-byte arrays a child puts into a channel owned here."""
    app, ep = f"pyxb-{time.monotonic_ns()}", _endpoint()
    with sp.Space.join(app, mode="peer", listen=[ep]) as space:
        data = space.channel("bandwidth/data", capacity=max(2, WINDOW // size))
        child = _Child("produce", app, ep, str(size), str(seconds))
        with space.task(0) as t:
            inp = t.attach_input(data)
            t.set_virtual_time(sp.INFINITY)
            received, first, last = 0, 0.0, 0.0
            while True:
                try:
                    ts, arr = inp.get(sp.NEXT_UNSEEN, timeout=TIMEOUT)
                except sp.Closed:
                    break
                last = time.perf_counter()
                first = first or last
                assert ts == received and len(arr) == size
                received += 1
                inp.consume(ts)
        sent = int(child.expect("SENT"))
        child.finish()
    if sent != received:
        raise RuntimeError(f"sent {sent}, received {received}")
    return received * size / max(last - first, 1e-9) / 1e6


def _child(role: str, app: str, ep: str, size: int, arg: str) -> None:
    with sp.Space.join(app, mode="peer", connect=[ep]) as space:
        if role == "echo":
            own = space.channel("pingpong/child")
            print("READY", flush=True)
            other = space.lookup_channel("pingpong/parent", timeout=TIMEOUT)
            with space.task(0) as t:
                inp, out = t.attach_input(own), t.attach_output(other)
                for ts in range(int(arg)):
                    got, ping = inp.get(sp.NEXT_UNSEEN, timeout=TIMEOUT)
                    out.put(got, ping)
                    inp.consume(got)
                    t.set_virtual_time(got + 1)
                out.flush()
        else:
            data = space.lookup_channel("bandwidth/data", timeout=TIMEOUT)
            arr = _array(size)
            with space.task(0) as t:
                out = t.attach_output(data)
                ts, end = 0, time.perf_counter() + float(arg)
                while time.perf_counter() < end:
                    out.put(ts, _made(out, arr))
                    ts += 1
                    t.set_virtual_time(ts)
                out.flush()
                data.close()
            print(f"SENT {ts}", flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        role, app, ep, size, arg = sys.argv[2:7]
        _child(role, app, ep, int(size), arg)
