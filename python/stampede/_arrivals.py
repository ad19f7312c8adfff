"""Arrival notification as an async iterator (and a blocking form for threads)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._stampede import _RawArrivals


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class Arrivals:
    """Timestamps of items as they arrive in a container.

    ``async for ts in arrivals`` yields them in arrival order and ends when the container is
    closed; ``next_timeout`` is the blocking form for threads. The buffer holds ``capacity``
    notifications; when the reader falls behind, the oldest are dropped and counted in
    ``dropped``.
    """

    def __init__(self, raw: _RawArrivals) -> None:
        self._raw = raw

    @property
    def dropped(self) -> int:
        """Notifications dropped because the buffer was full."""
        return self._raw.dropped

    def next_timeout(self, timeout: float | None = None) -> int | None:
        """The next timestamp, waiting at most ``timeout`` seconds (``None``: until one
        arrives). Returns ``None`` on timeout; raises ``StopIteration`` once closed."""
        return self._raw.next_timeout(timeout)

    def close(self) -> None:
        """Stops the notifications; a waiting reader ends."""
        self._raw.close()

    def __aiter__(self) -> Arrivals:
        return self

    async def __anext__(self) -> int:
        loop = asyncio.get_running_loop()
        while True:
            fut: asyncio.Future[None] = loop.create_future()
            ts = self._raw.poll(lambda: loop.call_soon_threadsafe(_wake, fut))
            if ts is not None:
                return ts
            await fut
