from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

import stampede as sp

# A run started in the background has SIGINT ignored, and subprocesses would inherit that:
# the Ctrl-C tests' children would never see their KeyboardInterrupt. Restore Python's own
# handler, which a child resets to the default when it starts.
signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def rt() -> Iterator[sp.Runtime]:
    """A runtime without the background collector: passes run only on demand."""
    runtime = sp.Runtime(gc_interval=None)
    yield runtime
    runtime.close()


@pytest.fixture
def auto_rt() -> Iterator[sp.Runtime]:
    """A runtime with the background collector."""
    with sp.Runtime() as runtime:
        yield runtime
