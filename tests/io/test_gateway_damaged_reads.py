"""The gateway's consume engine on a real redis-server and the FakeCluster delivers every
message exactly once while the link damages broker answers on the way (issue 30 leftover):
``TubeGroup.read`` reads a damaged batch again instead of dropping its damaged message. Damage
at rest (the same damage on two reads) is dropped and the group goes on past it."""

from __future__ import annotations

import dataclasses

import pytest

from tests.support.gateway_engine_support import running_service
from tests.support.gateway_failover_support import produce_numbered
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.engine.data import FetchQuery
from tubemq_aio.gateway.engine.service import ConsumeService
from tubemq_aio.protocol.message import decode_payload
from tubemq_aio.testing import FakeCluster, RedisServer

pytestmark = pytest.mark.timeout(90)

SENT = 30


async def _consume_all(service: ConsumeService, group: str, max_messages: int) -> list[str]:
    """Fetch and ack until a fetch finds nothing; the bodies in delivery order."""
    got: list[str] = []
    empty = 0
    while empty < 2:
        outcome = await service.fetch(
            FetchQuery(
                group, client_id=None, wait_ms=300, lease_ms=60_000, max_messages=max_messages
            )
        )
        if outcome.status != "ok" or not outcome.messages:
            empty += 1
            continue
        empty = 0
        lease = outcome.lease
        assert lease is not None
        got.extend(m.body.decode() for m in outcome.messages)
        assert await service.settle(lease.key, "ack") == "acked"
    return got


@pytest.mark.parametrize("max_messages", [None, 100], ids=["one-batch", "gathering"])
async def test_every_message_once_under_damage_on_the_way(
    redis_server: RedisServer, max_messages: int | None
) -> None:
    group = f"dmg-{max_messages}"
    spec = GroupSpec(name=group, topics=("t",), lease_ms_min=100, lease_ms=60_000)
    async with FakeCluster(topics={"t": 1}, max_batch=4) as cluster:
        sent = await produce_numbered(cluster.master_addr, "t", SENT)
        async with running_service(cluster.master_addr, redis_server.url, spec) as service:
            cluster.corrupt_next_fetches(3)
            first = await _consume_all(service, group, max_messages or 1)
            assert first == sent  # each exactly once, in order
            more = await produce_numbered(cluster.master_addr, "t", 12, start=SENT)
            cluster.corrupt_next_fetches(1, after=1)  # a later batch of a gathered read
            assert await _consume_all(service, group, max_messages or 1) == more
            assert (await service.sessions.get(spec)).stats.crc_refetches >= 2


async def test_damage_at_rest_is_dropped_and_the_group_goes_on(redis_server: RedisServer) -> None:
    spec = GroupSpec(name="rest", topics=("t",), lease_ms_min=100, lease_ms=60_000)
    async with FakeCluster(topics={"t": 1}, max_batch=4) as cluster:
        sent = await produce_numbered(cluster.master_addr, "t", SENT)
        log = cluster.brokers[0].log("t", 0)
        bad = log.messages[6]
        log.messages[6] = dataclasses.replace(bad, checksum=bad.checksum ^ 1)
        async with running_service(cluster.master_addr, redis_server.url, spec) as service:
            got = await _consume_all(service, "rest", 100)
            tube = await service.sessions.get(spec)
            assert tube.stats.crc_refetches == 1  # the second read showed the same damage
        bad_body = decode_payload(bad.payload, bad.flag, 0).body.decode()
        assert got == [b for b in sent if b != bad_body]
