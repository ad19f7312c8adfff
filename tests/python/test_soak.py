"""The short soak (``make soak`` runs it for ten minutes per mode): a producer at full speed
against a slow consumer, locally and across address spaces, for 15 s each. Memory stays
within its bound and does not creep, the producer is paced by the channel's capacity, skips
are counted and frames keep flowing (``bench/soak.py`` says how each is judged)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import soak  # noqa: E402


@pytest.mark.parametrize("mode", ["local", "remote"])
def test_a_slow_consumer_keeps_memory_bounded(mode: str) -> None:
    r = soak.soak_local(15.0) if mode == "local" else soak.soak_remote(15.0)
    assert not r.failures, r.failures
    assert r.puts > r.gets > 0 and r.skipped > 0
