"""Metrics from Python: a runtime's and a space's, read back by Prometheus' own parser
(OpenMetrics text), over HTTP and without it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterable

from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.parser import text_string_to_metric_families

import stampede as sp

# The parser carries no annotations: its type, as documented.
_parse: Callable[[str], Iterable[Metric]] = text_string_to_metric_families


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in _parse(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_a_runtime_counts_a_known_workload() -> None:
    with sp.Runtime() as rt:
        ch = rt.channel("frames")
        q = rt.queue("jobs")
        with rt.task(0, name="producer") as t:
            out, jobs = t.attach_output(ch), t.attach_output(q)
            for ts in range(6):
                out.put(ts, b"x" * 10)
            for ts in range(4):
                jobs.put(ts, "job")
        got = _samples(rt.metrics())
        chan = (("container", "frames"), ("kind", "channel"))
        assert got[("stampede_container_puts_total", chan)] == 6
        assert got[("stampede_container_items", chan)] == 6
        assert got[("stampede_container_puts_total", (("container", "jobs"), ("kind", "queue")))] == 4


def test_a_held_watermark_names_its_holder() -> None:
    with sp.Runtime() as rt:
        ch = rt.channel("c")
        slow = rt.task(3, name="slow")
        slow.attach_output(ch).put(10, 1)
        got = _samples(rt.metrics())
        assert got[("stampede_zone_watermark", (("zone", "0"),))] == 3
        holder = (("cause", "virtual_time"), ("name", "slow"), ("zone", "0"))
        assert got[("stampede_zone_watermark_holder", holder)] == 1
        slow.exit()


def _free() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_space_serves_its_metrics_over_http() -> None:
    ep = f"tcp/127.0.0.1:{_free()}"
    with sp.Space.join("py-metrics", mode="router", listen=[ep],
                       metrics_listen="127.0.0.1:0") as space:
        assert space.metrics_addr is not None
        ch = space.channel("frames")
        with space.task(0) as t:
            out = t.attach_output(ch)
            for ts in range(3):
                out.put(ts, ts)
        with urllib.request.urlopen(f"http://{space.metrics_addr}/metrics", timeout=10) as r:
            assert "openmetrics-text" in r.headers["Content-Type"]
            text = r.read().decode()
        got = _samples(text)
        assert got[("stampede_container_puts_total",
                    (("container", "frames"), ("kind", "channel")))] == 3
        assert got[("stampede_space_members", ())] == 1
        assert ("stampede_space_served_total", ()) in got
        assert _samples(space.metrics())[("stampede_space_members", ())] == 1


_TWO_SPACES = """
import socket, stampede as sp
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
with sp.Space.join("logs", mode="router", listen=[f"tcp/127.0.0.1:{port}"]) as a:
    with sp.Space.join("logs", connect=[f"tcp/127.0.0.1:{port}"]) as b:
        pass
"""


def _run_logged(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("RUST_LOG", "STAMPEDE_LOG")}
    r = subprocess.run([sys.executable, "-c", _TWO_SPACES], env={**clean, **env},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stderr


def test_the_log_switch_writes_json_lines_when_asked_and_nothing_otherwise() -> None:
    lines = _run_logged(STAMPEDE_LOG="stampede_net=info", STAMPEDE_LOG_FORMAT="json").splitlines()
    events = [json.loads(line) for line in lines if line.startswith("{")]
    assert events and all(e["level"] in ("INFO", "WARN", "ERROR") for e in events), lines
    assert all(e["target"].startswith("stampede_net") for e in events), lines
    assert any("left" in e["fields"].get("message", "") for e in events), lines
    assert _run_logged() == ""
