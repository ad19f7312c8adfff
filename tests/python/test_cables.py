"""CableS' pthreads programs in Python (apps/cables.py) across three address spaces, two of
them attached through a node agent: each program checks its result against sequential code
(the SPMD relaxation's members compare cell 1 with sequential code, its barriers reused)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "apps"))

import cables  # noqa: E402  (apps/ is not a package)


def test_pn_pc_pipe_and_spmd_give_the_sequential_results_across_three_spaces() -> None:
    results = cables.run(spaces=3)
    assert set(results) == {"pn", "pc", "pipe", "spmd"}
    assert results["pn"].startswith("669 primes below 5000")
