"""Shared pieces of the gateway tests against a real redis-server (one per test module)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest_asyncio
import redis.asyncio as aioredis

from tubemq_aio.gateway.leases.store import LeaseStore
from tubemq_aio.testing import RedisServer


@pytest_asyncio.fixture(scope="module", loop_scope="module", name="server")
async def server_fixture() -> AsyncIterator[RedisServer]:
    """One real redis-server for the importing test module."""
    async with RedisServer() as srv:
        yield srv


@contextlib.asynccontextmanager
async def flushed_store(server: RedisServer) -> AsyncIterator[tuple[aioredis.Redis, LeaseStore]]:
    """A client of ``server`` on an emptied database and a :class:`LeaseStore` over it."""
    client = aioredis.Redis.from_url(server.url)
    await client.flushall()
    try:
        yield client, LeaseStore(client, timeout=5.0)
    finally:
        await client.aclose()
