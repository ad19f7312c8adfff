"""The short fault harness (``make chaos`` runs it for ten minutes): a channel, a queue, a
register, a cluster mutex and a barrier, an S-Net network and a distributed CnC graph across
two emulated hosts joined through a faulty relay, under every kind of fault once in a seeded
order, then the checker (``bench/chaos.py`` says what it proves)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import chaos  # noqa: E402
from chaos_net import relay_binary  # noqa: E402


def test_no_acknowledged_item_is_lost_under_faults() -> None:
    if relay_binary() is None:
        if os.environ.get("CI"):
            pytest.fail("Toxiproxy is missing: `make toxiproxy` must run before the tests")
        pytest.skip("Toxiproxy is not installed (make toxiproxy)")
    with tempfile.TemporaryDirectory(prefix="stampede-chaos-") as logs:
        run = chaos.Chaos(40.0, seed=1, logdir=Path(logs))
        try:
            report = run.run()
        finally:
            run.close()
        assert not report.violations, (report.violations, Path(logs, "faults.log").read_text())
    expected = set(chaos.RELAY_FAULTS + chaos.PROCESS_FAULTS)
    if report.namespaces:
        expected |= set(chaos.LINK_FAULTS)
    assert set(report.faults) == expected, report.faults
    assert report.lost == 0 and report.duplicated == 0
    assert report.fenced_spaces >= 1, "a writer stopped past its lease was not fenced"
    for k in ("channel acknowledged puts", "queue acknowledged puts",
              "register acknowledged writes", "mutex holds", "barrier rounds",
              "snet sizes stored"):
        assert report.operations[k] > 100, report.operations
    assert report.operations["cnc graphs completed and checked"] >= 1, report.operations
