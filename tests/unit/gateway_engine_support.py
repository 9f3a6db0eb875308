"""Shared pieces of the consume-engine tests on a fake or real cluster: a started service,
and two broadcast clients reading at once (each must get every message)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from tubemq_aio.gateway.engine.service import ConsumeService, ConsumeSettings, GroupSpec


@contextlib.asynccontextmanager
async def running_service(
    masters: str, redis_url: str, *groups: GroupSpec, **settings: Any
) -> AsyncIterator[ConsumeService]:
    """A started :class:`ConsumeService` on an initialised store, closed after."""
    service = ConsumeService(
        ConsumeSettings(
            masters=masters, redis_url=redis_url, groups=groups, allow_init=True, **settings
        )
    )
    await service.start()
    try:
        yield service
    finally:
        await service.close()


async def drain(
    service: ConsumeService, group: str, client_id: str, want: set[str], got: set[str]
) -> set[str]:
    """Fetch and ack as ``client_id`` into ``got`` until every value of ``want`` came (or 200
    fetches); a body is its value, optionally padded with dots."""
    for _ in range(200):
        if want <= got:
            break
        outcome = await service.fetch(
            group, client_id=client_id, wait_ms=500, lease_ms=60_000, max_messages=10
        )
        if outcome.status != "ok":
            continue
        assert outcome.lease is not None
        got |= {m.body.decode().split(".")[0] for m in outcome.messages}  # padding cut off
        assert await service.settle(outcome.lease.ref(), "ack") == "acked"
    return got


async def two_clients(service: ConsumeService, group: str, values: list[str]) -> None:
    """Client B reads the first two thirds alone, then A and B read at once (B ahead, so a
    commit answer of B's read would move A's booking past messages A never got); each must
    have seen every value."""
    b: set[str] = set()
    await drain(service, group, "B", set(values[: 2 * len(values) // 3]), b)
    want = set(values)
    a, _ = await asyncio.gather(
        drain(service, group, "A", want, set()), drain(service, group, "B", want, b)
    )
    assert sorted(want - a) == [], "client A lost messages"
    assert sorted(want - b) == [], "client B lost messages"
