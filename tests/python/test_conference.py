"""The three-language video conference: the Rust mixer with a C and a Python participant.

One participant leaves and another joins while it runs; every active display must keep
receiving composites whose tiles are exactly the active participants, each tile holding that
participant's frame for the composite's timestamp. The binaries come from ``make c`` and
``cargo build --release -p stampede-conference`` (both run by ``make test``).
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
MIXER = ROOT / "target" / "release" / "stampede-conference"
C_PARTICIPANT = ROOT / "target" / "c" / "conference_participant"
# Generous: three to five processes share two busy cores.
DEADLINE = 60.0
COMMON = ["--fps", "10", "--size-kb", "8", "--report-ms", "200"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Proc:
    """A child process whose JSON output lines are collected by a reader thread."""

    def __init__(self, name: str, argv: list[str]) -> None:
        self.name = name
        self.p = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
        )
        self.lines: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            with self.lock:
                self.lines.append(record)

    def displays(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.lines if r.get("event") == "display"]

    def stop(self) -> int:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        try:
            code = self.p.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            self.p.kill()
            code = self.p.wait()
        self.reader.join(DEADLINE)
        return code

    def stderr(self) -> str:
        assert self.p.stderr is not None
        return self.p.stderr.read() if self.p.poll() is not None else ""


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for p in started:
        if p.p.poll() is None:
            p.p.kill()
            p.p.wait()


def wait_until(what: str, cond: Callable[[], bool], procs: list[Proc]) -> None:
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        if cond():
            return
        for p in procs:
            code = p.p.poll()
            if code is not None and code != 0:
                pytest.fail(f"{p.name} exited with {code} while waiting for {what}: {p.stderr()}")
        time.sleep(0.1)
    state = {p.name: p.displays()[-1:] for p in procs}
    pytest.fail(f"timed out waiting for {what}; last reports: {state}")


def showing(p: Proc, members: list[int], after: int = 0) -> bool:
    """Whether ``p``'s display has shown composites of exactly ``members`` in two reports
    whose composite counts grew, beyond count ``after``."""
    shown = [r for r in p.displays() if r["composites"] > after and r["members"] == members]
    return len(shown) >= 2 and shown[-1]["composites"] > shown[0]["composites"]


def composites(p: Proc) -> int:
    d = p.displays()
    return int(d[-1]["composites"]) if d else 0


def test_mixer_with_c_and_python_participants_through_leave_and_join(
    procs: list[Proc],
) -> None:
    assert MIXER.exists(), f"{MIXER} is missing: cargo build --release -p stampede-conference"
    assert C_PARTICIPANT.exists(), f"{C_PARTICIPANT} is missing: make c"
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    app = f"conference-test-{os.getpid()}"

    def start(name: str, argv: list[str]) -> Proc:
        p = Proc(name, argv)
        procs.append(p)
        return p

    start("mixer", [str(MIXER), "mixer", "--listen", endpoint, "--app", app])
    c1 = start(
        "c#1", [str(C_PARTICIPANT), "--connect", endpoint, "--app", app, "--id", "1", *COMMON]
    )
    py2 = start(
        "python#2",
        [sys.executable, "-m", "stampede.conference", "--connect", endpoint, "--app", app,
         "--id", "2", *COMMON],
    )
    wait_until("both displays to show [1, 2]",
               lambda: showing(c1, [1, 2]) and showing(py2, [1, 2]), procs)

    # Participant 1 leaves: the Python display goes on, with only its own tile.
    assert c1.stop() == 0, c1.stderr()
    left_at = composites(py2)
    wait_until("python#2 to show [2]", lambda: showing(py2, [2], left_at), procs)

    # Participant 3 (C) joins while it runs.
    c3 = start(
        "c#3", [str(C_PARTICIPANT), "--connect", endpoint, "--app", app, "--id", "3", *COMMON]
    )
    joined_at = composites(py2)
    wait_until("both displays to show [2, 3]",
               lambda: showing(py2, [2, 3], joined_at) and showing(c3, [2, 3]), procs)

    # Both active displays keep receiving.
    before = {p.name: composites(p) for p in (py2, c3)}
    wait_until("more composites at every active display",
               lambda: all(composites(p) > before[p.name] + 3 for p in (py2, c3)), procs)

    for p in (c3, py2):
        assert p.stop() == 0, f"{p.name}: {p.stderr()}"
        summary = [r for r in p.lines if r.get("event") == "summary"]
        assert summary, f"{p.name} printed no summary"
        assert summary[-1]["bad"] == 0, f"{p.name} saw wrong tiles: {summary[-1]}"
        assert summary[-1]["frames_put"] > 0
    assert c1.lines[-1]["event"] == "summary" and c1.lines[-1]["bad"] == 0
