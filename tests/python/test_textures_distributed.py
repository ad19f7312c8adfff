"""Video texture analysis across three address spaces: both work distributions give the
direct matrix, chaining sends each frame from the source once, and a space killed mid-run
fails the run with a clear error instead of hanging it."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import stampede as sp
from stampede import textures as vt
from stampede.textures import distributed


@pytest.fixture(scope="module")
def frames() -> np.ndarray:
    return vt.synthetic(30, 24, 32, period=6, seed=4)


@pytest.mark.parametrize("distribution", ["single", "chain"])
def test_both_distributions_give_the_direct_matrix(frames: np.ndarray, distribution: str) -> None:
    r = distributed.analyze_distributed(
        frames, spaces=3, distribution=distribution, tile=4, timeout=60
    )
    assert np.allclose(r.distances, vt.direct(frames))
    assert r.spaces == 3 and len(r.frames_received) == 2
    if distribution == "chain":
        assert r.source_frames_sent == 30
    else:
        assert r.source_frames_sent == sum(r.frames_received.values()) > 30


def test_runs_split_the_triangle_in_order() -> None:
    runs = distributed.split_rows(100, 10, 3)
    flat = [t for r in runs for t in r]
    assert flat == sorted(vt.tiles(100, 10)) and all(runs)
    with pytest.raises(ValueError):
        distributed.analyze_distributed(np.zeros((4, 8, 8, 3), np.uint8), distribution="ring")


def _children() -> list[int]:
    me = str(os.getpid())
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            stat = (p / "stat").read_text()
            cmd = (p / "cmdline").read_bytes()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[1] == me and b"stampede.cluster" in cmd:
            out.append(int(p.name))
    return out


def test_a_space_killed_mid_run_fails_the_run_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    big = vt.synthetic(60, 96, 128, period=10, seed=1)
    killed: list[int] = []
    source_work = distributed._run_workers

    def kill_then_work(*args: Any, **kw: Any) -> Any:
        # The source starts its own tiles once every space runs its part, and the run
        # cannot end before they are done: the kill lands mid-run whatever the timing.
        kids = _children()
        assert len(kids) == 2, kids
        os.kill(kids[-1], signal.SIGKILL)
        killed.append(kids[-1])
        return source_work(*args, **kw)

    monkeypatch.setattr(distributed, "_run_workers", kill_then_work)
    t0 = time.monotonic()
    with pytest.raises(sp.StampedeError) as err:
        distributed.analyze_distributed(big, spaces=3, distribution="chain", tile=2, timeout=60)
    assert killed, "no attached space was found to kill"
    assert time.monotonic() - t0 < 60
    assert "left or died" in str(err.value) or "unreachable" in str(err.value).lower(), err.value
    # No worker of this space is left waiting for a frame that will never come (it would
    # keep the interpreter from exiting).
    deadline = time.monotonic() + 10
    while (stuck := [t.name for t in threading.enumerate()
                     if t.name.startswith(("worker", "source-workers")) and t.is_alive()]):
        assert time.monotonic() < deadline, f"threads left waiting: {stuck}"
        time.sleep(0.05)
