"""The event loops async tests run on: every one on asyncio's own loop, and a test marked
``also_on_uvloop`` a second time on uvloop, whose transports are not ``asyncio.Transport`` (the
test ids end in ``[asyncio]`` and ``[uvloop]``). A folder's ``conftest.py`` imports the hook to
opt in (``tests/io``, ``tests/faults``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import pytest
import uvloop

__all__ = ["ASYNCIO_ONLY", "BOTH_LOOPS", "pytest_asyncio_loop_factories"]

#: The loops of a test marked ``also_on_uvloop``, by the name that ends its test id.
BOTH_LOOPS: Mapping[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}
#: The loop of every other async test.
ASYNCIO_ONLY: Mapping[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
}


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    """pytest-asyncio's hook: the loops ``item`` runs on (one run per loop)."""
    return BOTH_LOOPS if item.get_closest_marker("also_on_uvloop") else ASYNCIO_ONLY
