"""Kept batches under cancellation (a real redis-server and the FakeCluster): fetches of one
replica cancelled at every step, the final read that commits a batch and brings the next one
included, alternate with fetches that finish and ack; afterwards every message has been acked
exactly once, in order per partition, and batches were served from what reads kept.

The FakeCluster cuts its batches at ``max_batch`` messages, far below the least a real broker read
scans, so the read-ahead's floors (``batch_end``) are lowered to the fake's: a read then reads
ahead whenever the partition's max lies past its batch."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.gateway_engine_support import cancelled_fetch, running_service
from tests.support.gateway_failover_support import produce_numbered
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.engine.data import FetchQuery
from tubemq_aio.gateway.tubemq import batch_end
from tubemq_aio.testing import FakeCluster, RedisServer

#: Loop turns after which a fetch is cancelled: 0 (before its first await) to past its end.
STEPS = 120


async def test_fetches_cancelled_at_every_step_skip_nothing(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(batch_end, "MIN_SCAN_RECORDS", 0)
    monkeypatch.setattr(batch_end, "MIN_TRANSFER_BYTES", 0)
    spec = GroupSpec(name="kept-cancel", topics=("t",), lease_ms_min=100, lease_ms=60_000)
    async with FakeCluster(topics={"t": 2}, max_batch=3) as cluster:
        bodies = await produce_numbered(cluster.master_addr, "t", 3 * STEPS)
        async with running_service(
            cluster.master_addr, redis_server.url, spec, kept_batch_bytes=1 << 25
        ) as service:
            got: dict[str, list[int]] = {}

            async def fetch_and_ack() -> bool:
                outcome = await service.fetch(
                    FetchQuery(
                        spec.name, client_id=None, wait_ms=200, lease_ms=60_000, max_messages=1
                    )
                )
                if outcome.lease is None:
                    return False
                numbers = [int(m.body.decode()[1:]) for m in outcome.messages]
                got.setdefault(outcome.lease.key.partition_key, []).extend(numbers)
                assert await service.settle(outcome.lease.key, "ack") == "acked"
                return True

            query = FetchQuery(spec.name, client_id=None, wait_ms=200, lease_ms=60_000)
            for step in range(STEPS):
                await cancelled_fetch(service, query, step)
                await fetch_and_ack()
            deadline = asyncio.get_running_loop().time() + 30
            while sum(map(len, got.values())) < len(bodies):
                assert asyncio.get_running_loop().time() < deadline, got
                await fetch_and_ack()
            stats = service.stats()
    numbers = sorted(n for batch in got.values() for n in batch)
    assert numbers == list(range(len(bodies)))  # each message once
    for batch in got.values():
        assert batch == sorted(batch)  # in order per partition
    assert stats.kept_served > 0
    assert stats.kept_dropped > 0  # cancels and releases left kept batches behind
