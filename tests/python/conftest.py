from __future__ import annotations

from collections.abc import Iterator

import pytest

import stampede as sp


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
