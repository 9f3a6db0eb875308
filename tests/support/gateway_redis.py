"""Shared pieces of the gateway tests against a real redis-server.

The module-scoped ``redis_server`` fixture they run on lives in ``tests/io/conftest.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import redis.asyncio as aioredis

from tubemq_aio.gateway.store import LeaseStore
from tubemq_aio.testing import RedisServer


@contextlib.asynccontextmanager
async def flushed_store(server: RedisServer) -> AsyncIterator[tuple[aioredis.Redis, LeaseStore]]:
    """A client of ``server`` on an emptied database and a :class:`LeaseStore` over it."""
    client = aioredis.Redis.from_url(server.url)
    await client.flushall()
    try:
        yield client, LeaseStore(client, timeout=5.0)
    finally:
        await client.aclose()
