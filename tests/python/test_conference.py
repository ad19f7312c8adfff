"""The four-language video conference: the Rust mixer with C, Python and Java participants.

One participant leaves and another joins while it runs; every active display must keep
receiving composites whose tiles are exactly the active participants, each tile holding that
participant's frame for the composite's timestamp. The binaries come from ``make c``,
``make java`` and ``cargo build --release -p stampede-conference`` (all run by ``make test``).
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
MIXER = ROOT / "target" / "release" / "stampede-conference"
C_PARTICIPANT = ROOT / "target" / "c" / "conference_participant"
C_LIBRARY = ROOT / "target" / "release" / "libstampede_c.so"
JAVA_CLASSES = [ROOT / "target" / "java" / "stampede" / "classes",
                ROOT / "target" / "java" / "examples" / "classes"]
JAVA_PARTICIPANT = "dev.stampede.examples.ConferenceParticipant"
# The Java face needs Java 22 or later; as in the Makefile, JAVA_HOME is used when it is one.
JDK_FALLBACK = pathlib.Path("/usr/lib/jvm/temurin-25-jdk-amd64")
# Generous: four to six processes share two busy cores.
DEADLINE = 60.0
COMMON = ["--fps", "10", "--size-kb", "8", "--report-ms", "200"]


def java_major(home: pathlib.Path) -> int:
    """The feature version of the JDK at ``home`` (from its ``release`` file), 0 if none."""
    try:
        text = (home / "release").read_text()
    except OSError:
        return 0
    m = re.search(r'^JAVA_VERSION="(?:1\.)?(\d+)', text, re.MULTILINE)
    return int(m.group(1)) if m and (home / "bin" / "java").exists() else 0


def java_binary() -> pathlib.Path | None:
    """``java`` of ``$JAVA_HOME`` if it is Java 22 or later, else of the JDK beside the default."""
    homes = [pathlib.Path(h) for h in [os.environ.get("JAVA_HOME")] if h]
    homes += [JDK_FALLBACK, *sorted(pathlib.Path("/usr/lib/jvm").glob("*"))]
    for home in homes:
        if java_major(home) >= 22:
            return home / "bin" / "java"
    return None


def java_command() -> list[str]:
    """How to run the Java participant; fails the test if it is not built."""
    java = java_binary()
    assert java is not None, "no JDK 22 or later found for the Java participant (set JAVA_HOME)"
    built = [JAVA_CLASSES[0] / "dev" / "stampede" / "Space.class",
             JAVA_CLASSES[1] / "dev" / "stampede" / "examples" / "ConferenceParticipant.class",
             C_LIBRARY]
    missing = [str(p) for p in built if not p.exists()]
    assert not missing, f"{', '.join(missing)} missing: make java"
    return [
        str(java), "--enable-native-access=ALL-UNNAMED", f"-Dstampede.library={C_LIBRARY}",
        "-cp", os.pathsep.join(str(p) for p in JAVA_CLASSES), JAVA_PARTICIPANT,
    ]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Proc:
    """A child process whose JSON output lines are collected by a reader thread."""

    def __init__(self, name: str, argv: list[str]) -> None:
        self.name = name
        self.p = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
        )
        self.lines: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            with self.lock:
                self.lines.append(record)

    def displays(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.lines if r.get("event") == "display"]

    def stop(self) -> int:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        try:
            code = self.p.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            self.p.kill()
            code = self.p.wait()
        self.reader.join(DEADLINE)
        return code

    def stderr(self) -> str:
        assert self.p.stderr is not None
        return self.p.stderr.read() if self.p.poll() is not None else ""


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for p in started:
        if p.p.poll() is None:
            p.p.kill()
            p.p.wait()


def wait_until(what: str, cond: Callable[[], bool], procs: list[Proc]) -> None:
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        if cond():
            return
        for p in procs:
            code = p.p.poll()
            if code is not None and code != 0:
                pytest.fail(f"{p.name} exited with {code} while waiting for {what}: {p.stderr()}")
        time.sleep(0.1)
    state = {p.name: p.displays()[-1:] for p in procs}
    pytest.fail(f"timed out waiting for {what}; last reports: {state}")


def showing(p: Proc, members: list[int], after: int = 0) -> bool:
    """Whether ``p``'s display has shown composites of exactly ``members`` in two reports
    whose composite counts grew, beyond count ``after``."""
    shown = [r for r in p.displays() if r["composites"] > after and r["members"] == members]
    return len(shown) >= 2 and shown[-1]["composites"] > shown[0]["composites"]


def composites(p: Proc) -> int:
    d = p.displays()
    return int(d[-1]["composites"]) if d else 0


def test_mixer_with_c_python_and_java_participants_through_leave_and_join(
    procs: list[Proc],
) -> None:
    assert MIXER.exists(), f"{MIXER} is missing: cargo build --release -p stampede-conference"
    assert C_PARTICIPANT.exists(), f"{C_PARTICIPANT} is missing: make c"
    java = java_command()
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    app = f"conference-test-{os.getpid()}"
    join = ["--connect", endpoint, "--app", app]

    def start(name: str, argv: list[str]) -> Proc:
        p = Proc(name, argv)
        procs.append(p)
        return p

    start("mixer", [str(MIXER), "mixer", "--listen", endpoint, "--app", app])
    c1 = start("c#1", [str(C_PARTICIPANT), *join, "--id", "1", *COMMON])
    py2 = start(
        "python#2", [sys.executable, "-m", "stampede.conference", *join, "--id", "2", *COMMON]
    )
    java3 = start("java#3", [*java, *join, "--id", "3", *COMMON])
    wait_until("every display to show [1, 2, 3]",
               lambda: all(showing(p, [1, 2, 3]) for p in (c1, py2, java3)), procs)

    # Participant 1 leaves: the others go on, with only their own tiles.
    assert c1.stop() == 0, c1.stderr()
    left_at = {p.name: composites(p) for p in (py2, java3)}
    wait_until("python#2 and java#3 to show [2, 3]",
               lambda: all(showing(p, [2, 3], left_at[p.name]) for p in (py2, java3)), procs)

    # Participant 4 (C) joins while it runs.
    c4 = start("c#4", [str(C_PARTICIPANT), *join, "--id", "4", *COMMON])
    joined_at = {p.name: composites(p) for p in (py2, java3)}
    wait_until(
        "every display to show [2, 3, 4]",
        lambda: all(showing(p, [2, 3, 4], joined_at.get(p.name, 0)) for p in (py2, java3, c4)),
        procs,
    )

    # Every active display keeps receiving.
    active = (py2, java3, c4)
    before = {p.name: composites(p) for p in active}
    wait_until("more composites at every active display",
               lambda: all(composites(p) > before[p.name] + 3 for p in active), procs)

    for p in (c4, java3, py2):
        assert p.stop() == 0, f"{p.name}: {p.stderr()}"
        summary = [r for r in p.lines if r.get("event") == "summary"]
        assert summary, f"{p.name} printed no summary"
        assert summary[-1]["bad"] == 0, f"{p.name} saw wrong tiles: {summary[-1]}"
        assert summary[-1]["frames_put"] > 0
    assert c1.lines[-1]["event"] == "summary" and c1.lines[-1]["bad"] == 0
