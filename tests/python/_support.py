"""Helpers shared by the test modules (imported as ``_support``; fixtures live in conftest)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import stampede as sp

T = TypeVar("T")

# Long enough never to expire in a passing test; a bug makes a test fail instead of hang.
LONG = 10.0
# Half of LONG: a released operation that is still blocked after this was not woken.
PROMPT = LONG / 2

# Values of Hold.cause.
VIRTUAL_TIME = "virtual_time"
PENDING_PUT = "pending_put"
UNCONSUMED = "unconsumed"
QUEUE_ITEM = "queue_item"
HORIZON = "horizon"
NO_LIVE_TASK = "no_live_task"

MIN_TS = -(2**63)


def free_endpoint() -> str:
    """A loopback TCP endpoint on a port nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp/127.0.0.1:{s.getsockname()[1]}"


def wait_until(what: str, done: Callable[[], bool], timeout: float = LONG) -> None:
    """Polls ``done`` until it holds; fails the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.001)


def pending_puts(rt: sp.Runtime, zone: int = 0) -> list[sp.Hold]:
    return [h for h in rt.explain(zone).holds if h.cause == PENDING_PUT]


def wait_pending_put(rt: sp.Runtime, zone: int = 0, count: int = 1) -> sp.Hold:
    """Waits until ``count`` puts are blocked in ``zone`` and returns the lowest term."""
    wait_until(f"{count} put(s) are pending", lambda: len(pending_puts(rt, zone)) >= count)
    return pending_puts(rt, zone)[0]


class Background(Generic[T]):
    """Runs ``fn`` on a daemon thread and keeps its result or exception.

    ``result()`` fails the test when the thread is still running after ``timeout``, so a
    lost wake-up shows as a failure, not as a hung test run.
    """

    def __init__(self, fn: Callable[[], T], name: str = "helper") -> None:
        self._fn = fn
        self._value: T | None = None
        self._error: BaseException | None = None
        self.started = threading.Event()
        self.finished_at: float | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self.started.set()
        try:
            self._value = self._fn()
        except BaseException as e:  # handed to result()
            self._error = e
        finally:
            self.finished_at = time.monotonic()

    def alive(self) -> bool:
        return self._thread.is_alive()

    def finished_within(self, timeout: float) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def result(self, timeout: float = PROMPT) -> T:
        """The value ``fn`` returned; raises what it raised."""
        assert self.finished_within(timeout), "the blocked operation was not woken"
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]

    def error(self, timeout: float = PROMPT) -> BaseException:
        """The exception ``fn`` raised (fails if it returned)."""
        assert self.finished_within(timeout), "the blocked operation was not woken"
        assert self._error is not None, f"expected an exception, got {self._value!r}"
        return self._error


def lift_horizon(rt: sp.Runtime, task: sp.Task) -> sp.Channel:
    """Puts an item far in the future into an unconnected channel, so that the zone's
    horizon (one above the newest timestamp ever put) does not cap the watermark. Keep the
    channel: the horizon counts the containers that still exist."""
    ch = rt.channel(zone=task.zone)
    with task.attach_output(ch) as out:
        out.put(1_000_000, "far")
    return ch


def stamps(items: list[tuple[int, Any]]) -> list[int]:
    return [ts for ts, _ in items]
