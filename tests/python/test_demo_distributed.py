"""``python -m stampede.demo --distributed``: the kiosk pipeline over three address spaces
runs briefly and reports like the embedded demo, and it leaves no process behind when it
ends, when a child dies, or on Ctrl-C.

Each test starts the demo as a process; nothing here asserts how long anything took, and
every wait has a generous deadline.
"""

from __future__ import annotations

import os
import pathlib
import re
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

pytest.importorskip("cv2")

# Long enough never to expire in a passing test (three processes import numpy and OpenCV).
LONG = 240.0
SMALL = ["--width", "320", "--height", "240", "--targets", "4", "--workers", "2"]
SPACES = re.compile(r"address spaces: display pid (\d+) .*analysis pid (\d+), camera pid (\d+)")


def demo(tmp_path: pathlib.Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "stampede.demo", "--distributed", *SMALL,
         "--snapshot", str(tmp_path / "kiosk.png"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    """Demo processes a test starts; killed at its end if still running."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait(LONG)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_for_line(p: subprocess.Popen[str], pattern: str, seen: list[str]) -> re.Match[str]:
    """Reads the demo's output until a line matches ``pattern``."""
    assert p.stdout is not None
    for line in p.stdout:
        seen.append(line)
        m = re.search(pattern, line)
        if m:
            return m
    raise AssertionError(f"the demo ended without {pattern!r}:\n{''.join(seen)}")


def test_distributed_demo_runs_and_reports(
    tmp_path: pathlib.Path, processes: list[subprocess.Popen[str]]
) -> None:
    p = demo(tmp_path, "--seconds", "2", "--quiet")
    processes.append(p)
    out, _ = p.communicate(timeout=LONG)
    assert p.returncode == 0, out
    spaces = SPACES.search(out)
    assert spaces, out
    pids = [int(x) for x in spaces.groups()]
    m = re.search(r"frames: (\d+) digitized, (\d+) decided", out)
    assert m, out
    digitized, decided = int(m[1]), int(m[2])
    assert 0 < decided <= digitized
    assert re.search(r"rate: [\d.]+ fps", out), out
    assert re.search(r"low-fi tracker: \d+ frames, \d+ skipped as stale", out), out
    reclaimed = re.search(r"memory: ([\d,]+) items reclaimed", out)
    assert reclaimed and int(reclaimed[1].replace(",", "")) > 0, out
    for role in ("display", "analysis", "camera"):
        assert re.search(rf"^  {role} +pid \d+ .* unreachable$", out, re.M), out
    assert "accuracy:" in out and "PASS" in out, out
    assert (tmp_path / "kiosk.png").exists()
    assert not [pid for pid in pids[1:] if alive(pid)], "children outlived the demo"


def test_ctrl_c_stops_the_children(
    tmp_path: pathlib.Path, processes: list[subprocess.Popen[str]]
) -> None:
    p = demo(tmp_path, "--seconds", "600")
    processes.append(p)
    seen: list[str] = []
    pids = [int(x) for x in wait_for_line(p, SPACES.pattern, seen).groups()]
    wait_for_line(p, r"\bfps \|", seen)  # frames are flowing
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=LONG)
    assert p.returncode == 130, "".join(seen) + out
    assert "interrupted" in out
    assert not [pid for pid in pids[1:] if alive(pid)], "children outlived the demo"


def test_a_dead_child_fails_the_run_and_stops_the_other(
    tmp_path: pathlib.Path, processes: list[subprocess.Popen[str]]
) -> None:
    p = demo(tmp_path, "--seconds", "600")
    processes.append(p)
    seen: list[str] = []
    _, analysis, camera = (int(x) for x in wait_for_line(p, SPACES.pattern, seen).groups())
    wait_for_line(p, r"\bfps \|", seen)
    os.kill(camera, signal.SIGKILL)
    out, _ = p.communicate(timeout=LONG)
    assert p.returncode == 2, "".join(seen) + out
    assert "pipeline failed" in out and "camera process failed" in out, out
    assert not alive(analysis), "the analysis process outlived the demo"
