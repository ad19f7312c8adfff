"""Emulated hosts for the application benchmarks: network namespaces on one switch.

Host 0 is this process's own namespace; hosts 1..n-1 are new namespaces. Every host has
one link to a switch (a bridge in a namespace of its own), rate-limited in both directions
with ``tc tbf`` (this kernel has no netem), so what a host sends and receives is bounded
by its link while hosts talk to each other directly, as on a switched cluster. Each
link's byte counters tell what crossed it. Needs root; everything is removed on exit,
and namespaces a killed run left behind are removed by the next.
"""

from __future__ import annotations

import json
import os
import subprocess
from types import TracebackType

_PREFIX = "stvt"


def _sh(*args: str) -> str:
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def available() -> str | None:
    """Why emulated hosts cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "emulated hosts need root (network namespaces)"
    try:
        _sh("ip", "netns", "list")
        _sh("tc", "-V")
    except (OSError, RuntimeError) as e:
        return f"emulated hosts need iproute2's ip and tc: {e}"
    return None


def _remove_stale() -> None:
    for line in _sh("ip", "netns", "list").splitlines():
        name = line.split()[0] if line.split() else ""
        if not name.startswith(_PREFIX):
            continue
        pid = name[len(_PREFIX):].split("h")[0].split("s")[0]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)


class Hosts:
    """``n`` hosts on a switch, each link ``mbit`` Mbit/s each way."""

    def __init__(self, n: int, mbit: int, subnet: str = "10.231.7") -> None:
        if n < 1 or mbit < 1:
            raise ValueError("at least one host and 1 Mbit/s")
        self.n, self.mbit, self.subnet = n, mbit, subnet
        tag = f"{_PREFIX}{os.getpid()}"
        self._switch = f"{tag}s"
        self._hosts = [""] + [f"{tag}h{k}" for k in range(1, n)]
        self._links = [(f"{tag}a{k}", f"{tag}b{k}") for k in range(n)]
        self._made: list[str] = []

    def __enter__(self) -> Hosts:
        _remove_stale()
        try:
            self._make()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, t: type[BaseException] | None, v: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _make(self) -> None:
        sw = self._switch
        _sh("ip", "netns", "add", sw)
        self._made.append(sw)
        _sh("ip", "-n", sw, "link", "add", "br0", "type", "bridge")
        _sh("ip", "-n", sw, "link", "set", "br0", "up")
        # A token bucket at least one 4 ms tick of traffic deep, so the rate holds.
        burst = f"{max(64, self.mbit * 1000 // 8 // 250)}kb"
        tbf = ["root", "tbf", "rate", f"{self.mbit}mbit", "burst", burst, "latency", "50ms"]
        for k, (host_if, switch_if) in enumerate(self._links):
            ns = self._hosts[k]
            if ns:
                _sh("ip", "netns", "add", ns)
                self._made.append(ns)
                _sh("ip", "-n", ns, "link", "set", "lo", "up")
            _sh("ip", "link", "add", host_if, "type", "veth", "peer", "name", switch_if,
                "netns", sw)
            if ns:
                _sh("ip", "link", "set", host_if, "netns", ns)
            else:
                self._made.append(host_if)
            on = ["-n", ns] if ns else []
            _sh("ip", *on, "addr", "add", f"{self.addr(k)}/24", "dev", host_if)
            _sh("ip", *on, "link", "set", host_if, "up")
            _sh("ip", "-n", sw, "link", "set", switch_if, "master", "br0")
            _sh("ip", "-n", sw, "link", "set", switch_if, "up")
            _sh("tc", *on, "qdisc", "add", "dev", host_if, *tbf)
            _sh("tc", "-n", sw, "qdisc", "add", "dev", switch_if, *tbf)

    def close(self) -> None:
        for name in reversed(self._made):
            if name.startswith(f"{_PREFIX}{os.getpid()}a"):
                subprocess.run(["ip", "link", "del", name], capture_output=True)
            else:
                subprocess.run(["ip", "netns", "del", name], capture_output=True)
        self._made.clear()

    def addr(self, k: int) -> str:
        """Host ``k``'s address."""
        return f"{self.subnet}.{k + 1}"

    def run_prefix(self, k: int) -> list[str]:
        """The command prefix that runs a program on host ``k``."""
        return ["ip", "netns", "exec", self._hosts[k]] if self._hosts[k] else []

    def counters(self) -> list[tuple[int, int]]:
        """Bytes each host has sent and received over its link so far."""
        out = []
        for k, (host_if, _) in enumerate(self._links):
            on = ["-n", self._hosts[k]] if self._hosts[k] else []
            st = json.loads(_sh("ip", *on, "-s", "-j", "link", "show", "dev", host_if))[0]
            out.append((int(st["stats64"]["tx"]["bytes"]), int(st["stats64"]["rx"]["bytes"])))
        return out
