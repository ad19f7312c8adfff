"""The record that ``make soak``, ``make chaos`` and ``make churn`` keep together:
``bench-results/reliability.json``, one part per run kind."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RECORD = Path(__file__).resolve().parents[1] / "bench-results" / "reliability.json"


def read() -> dict[str, Any]:
    return json.loads(RECORD.read_text()) if RECORD.exists() else {}


def keep(part: str, value: object) -> None:
    """Replaces ``part`` of the record, leaving the others."""
    RECORD.parent.mkdir(exist_ok=True)
    data = read()
    data[part] = value
    RECORD.write_text(json.dumps(data, indent=1) + "\n")
