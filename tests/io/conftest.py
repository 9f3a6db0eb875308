"""Fixtures of the ``tests/io`` folder, and the event loops its async tests run on.

Fixtures:

* ``server`` (function): a started echo :class:`~tests.support.echo_server.FakeServer` on
  loopback, stopped after the test.
* ``settings`` (function): transport settings with short intervals, so timing tests stay fast,
  and a connect timeout long enough for a loopback connect on a loaded two-core machine (CI
  once saw 1 s run out there while ten test workers shared the cores).
* ``redis_server`` (module): one real redis-server for all the tests of a module (the gateway
  store tests; each empties it with :func:`~tests.support.gateway_redis.flushed_store`).

Event loops: every async test runs on asyncio's own loop; a test marked ``also_on_uvloop`` runs
a second time on uvloop, whose transports are not ``asyncio.Transport`` (the test ids end in
``[asyncio]`` and ``[uvloop]``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.support.echo_server import FakeServer
from tests.support.loops import pytest_asyncio_loop_factories
from tubemq_aio._io.settings import TransportSettings
from tubemq_aio.testing import RedisServer

__all__ = ["pytest_asyncio_loop_factories"]


@pytest_asyncio.fixture
async def server() -> AsyncIterator[FakeServer]:
    """A started echo server, stopped after the test."""
    srv = FakeServer()
    await srv.start()
    yield srv
    await srv.stop()


@pytest.fixture
def settings() -> TransportSettings:
    """Transport settings with short intervals so timing tests stay fast."""
    return TransportSettings(sweep_interval=0.01, connect_timeout=10.0, backoff_initial=0.2)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def redis_server() -> AsyncIterator[RedisServer]:
    """One real redis-server for all the tests of a module."""
    async with RedisServer() as srv:
        yield srv
