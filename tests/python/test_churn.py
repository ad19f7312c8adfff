"""Short churn (``make churn`` runs 1,000 cycles): 20 address spaces join a running
application, register a name and hold a frame open; half leave, half are killed. The
application forgets every one of them, its garbage collection goes on and its memory returns
to the baseline (``bench/churn.py`` says how each is judged)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import churn  # noqa: E402


def test_spaces_that_come_and_go_leave_nothing_behind() -> None:
    r = churn.run(20)
    assert not r.failures, r.failures
    assert (r.clean, r.killed) == (10, 10)
    assert r.visitors_seen >= 1
