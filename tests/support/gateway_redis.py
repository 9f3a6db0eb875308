"""Shared pieces of the gateway tests against a real redis-server.

The module-scoped ``redis_server`` fixture they run on lives in ``tests/io/conftest.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import redis.asyncio as aioredis

from tubemq_aio.gateway.leases.lease_store import LeaseStore
from tubemq_aio.gateway.leases.model import GroupState
from tubemq_aio.gateway.leases.partition_state import PartState
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


def model_view(state: GroupState, scope: str) -> dict[str, Any]:
    """The group's and one scope's state as plain data (partitions with only default fields
    left out), to compare the scripts' state with the model's."""
    sc = state.scope(scope)
    names = set(sc.parts) | sc.members
    parts = {p: dataclasses.asdict(sc.parts.get(p, PartState())) for p in sorted(names)}
    parts = {p: f for p, f in parts.items() if f != dataclasses.asdict(PartState())}
    return {
        "booted": state.booted,
        "paused": state.paused,
        "rate": state.rate,
        "burst": state.burst,
        "tat_us": state.tat_us,
        "rate_hold": state.rate_hold,
        "cursor": state.cursor,
        "fence": state.fence,
        "reading": state.reading,
        "members": sorted(sc.members),
        "ready": sc.ready,
        "leased": sc.leased,
        "acq": sc.acq,
        "done": sc.done,
        "parts": parts,
    }
