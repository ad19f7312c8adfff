"""Emulated hosts with a faulty relay between them, for the fault harness (``bench/chaos.py``).

Two network namespaces: ``a`` holds the application's router and the containers' owner, ``b``
the clients. Each is joined to the root namespace by a veth pair and no route joins ``a`` to
``b``, so every byte between them passes a Toxiproxy relay in the root namespace. The relay
injects latency and jitter, bandwidth limits, stalls, resets and half-open connections
through its HTTP API. Partitions set the root end of ``b``'s link down and up again; rate
limits are ``tc tbf`` qdiscs on both ends of ``a``'s link (this kernel has no netem: packet
loss and reordering show above TCP as the relay's stalls and resets).

Without namespaces (not root, or no ``ip``) everything runs on loopback through the relay;
the link faults are then left out of the schedule, and the run says so.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROUTER_PORT = 7447
RELAY_PORT = 17447


def relay_binary() -> str | None:
    """Toxiproxy's server: ``STAMPEDE_TOXIPROXY``, the one ``make toxiproxy`` installs, or PATH."""
    for candidate in (
        os.environ.get("STAMPEDE_TOXIPROXY"),
        str(ROOT / "target" / "tools" / "toxiproxy-server"),
        shutil.which("toxiproxy-server"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(args, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")
    return r


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class Hosts:
    """The two namespaces and their links, or loopback; removed by ``close``."""

    def __init__(self) -> None:
        tag = os.getpid() % 10_000
        net = 100 + os.getpid() % 100
        self.ns = {"a": f"stc{tag}a", "b": f"stc{tag}b"}
        self.root_dev = {"a": f"stc{tag}ra", "b": f"stc{tag}rb"}
        self.dev = {"a": f"stc{tag}xa", "b": f"stc{tag}xb"}
        self.root_addr = {"a": f"10.{net}.1.1", "b": f"10.{net}.2.1"}
        self.addr = {"a": f"10.{net}.1.2", "b": f"10.{net}.2.2"}
        self.namespaces = False
        self.why_not = ""
        if os.geteuid() != 0 or shutil.which("ip") is None:
            self.why_not = "not root, or no ip command"
        else:
            try:
                self._create()
                self.namespaces = True
            except RuntimeError as e:
                self.why_not = str(e)
                self.close()
        # Where the router listens (host a) and where the relay listens for host b.
        if self.namespaces:
            self.router = (self.addr["a"], ROUTER_PORT)
            self.relay = f"{self.root_addr['b']}:{RELAY_PORT}"
        else:
            self.router = ("127.0.0.1", free_port())
            self.relay = f"127.0.0.1:{free_port()}"

    def _create(self) -> None:
        for host in ("a", "b"):
            ns, rdev, dev = self.ns[host], self.root_dev[host], self.dev[host]
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", rdev, "type", "veth", "peer", "name", dev, "netns", ns)
            sh("ip", "addr", "add", f"{self.root_addr[host]}/24", "dev", rdev)
            sh("ip", "link", "set", rdev, "up")
            sh("ip", "-n", ns, "addr", "add", f"{self.addr[host]}/24", "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")

    def wrap(self, host: str) -> list[str]:
        """The command prefix that runs a program on ``host``. It enters only the network
        namespace: ``ip netns exec`` also gives each process a mount namespace, whose release
        at exit waits for an expedited RCU grace period, which on a busy VM held a killed
        process unreaped for up to a minute."""
        return ["nsenter", f"--net=/var/run/netns/{self.ns[host]}"] if self.namespaces else []

    def partition(self, on: bool) -> None:
        """Cuts (or heals) host ``b``'s link."""
        sh("ip", "link", "set", self.root_dev["b"], "down" if on else "up")

    def rate_limit(self, kbit: int | None) -> None:
        """A token bucket of ``kbit`` per second each way on host ``a``'s link, or none."""
        for prefix, dev in (([], self.root_dev["a"]), (self.wrap("a"), self.dev["a"])):
            if kbit is None:
                sh(*prefix, "tc", "qdisc", "del", "dev", dev, "root", check=False)
            else:
                sh(*prefix, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate",
                   f"{kbit}kbit", "burst", "32kbit", "latency", "400ms")

    def close(self) -> None:
        for host in ("a", "b"):
            sh("ip", "link", "del", self.root_dev[host], check=False)
            sh("ip", "netns", "del", self.ns[host], check=False)


class Relay:
    """A Toxiproxy server with one proxy from host ``b`` to the router, driven over HTTP."""

    NAME = "router"

    def __init__(self, binary: str, listen: str, upstream: str, seed: int) -> None:
        self.binary, self.listen, self.upstream, self.seed = binary, listen, upstream, seed
        self.restarts = 0
        self._start()

    def _start(self) -> None:
        self.api_port = free_port()
        self.api = f"http://127.0.0.1:{self.api_port}"
        self.proc = subprocess.Popen(
            [self.binary, "-host", "127.0.0.1", "-port", str(self.api_port),
             "-seed", str(self.seed)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                self._call("GET", "/version")
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("the relay did not start") from None
                time.sleep(0.05)
        self._call("POST", "/proxies", {"name": self.NAME, "listen": self.listen,
                                        "upstream": self.upstream, "enabled": True})

    def _call(self, method: str, path: str, body: object | None = None,
              timeout: float = 10) -> object:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.api + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
        return json.loads(raw) if raw else None

    def add(self, name: str, kind: str, stream: str, **attributes: int) -> None:
        """Adds a toxic (``latency``, ``bandwidth``, ``timeout``, ``reset_peer``, ...)."""
        self._call("POST", f"/proxies/{self.NAME}/toxics",
                   {"name": name, "type": kind, "stream": stream, "toxicity": 1.0,
                    "attributes": attributes})

    def remove(self, name: str) -> None:
        """Lifts a toxic. Toxiproxy can hang lifting one from a busy link (its issue 558);
        then the relay restarts, which resets its connections, and the restart is counted."""
        try:
            self._call("DELETE", f"/proxies/{self.NAME}/toxics/{name}", timeout=5)
        except OSError:
            self.restart()

    def restart(self) -> None:
        self.close()
        self.restarts += 1
        self._start()

    def pause(self, on: bool) -> None:
        """Stalls every byte through the relay (SIGSTOP), or lets them go again: nothing is
        lost or closed, the peers just hear nothing."""
        self.proc.send_signal(signal.SIGSTOP if on else signal.SIGCONT)

    def enabled(self, on: bool) -> None:
        """Disabling closes every connection through the relay and refuses new ones."""
        self._call("POST", f"/proxies/{self.NAME}", {"enabled": on})

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
