"""A partition the broker refuses (410, then the SDK's 5 s hold, 421) does not fail the whole
fetch with 503: it rests and the fetch reads another partition."""

from __future__ import annotations

from tests.support.gateway_engine_support import running_service
from tubemq_aio import Producer
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.engine.data import FetchQuery
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault, RedisServer


async def test_a_refused_partition_rests_and_the_fetch_reads_another() -> None:
    async with FakeCluster(topics={"t": 2}) as cluster, RedisServer() as redis:
        async with Producer(cluster.master_addr, topics=["t"]) as producer:
            for i in range(20):
                await producer.send("t", f"m{i}".encode())
        spec = GroupSpec(name="gref", topics=("t",), lease_ms=30_000)
        async with running_service(cluster.master_addr, redis.url, spec) as service:
            # every register is refused with 410 (held by another consumer) for the first
            # partition tried: the SDK tries twice, then holds the partition back for 5 s
            rule = cluster.inject(
                Method.BROKER_CONSUMER_REGISTER, Fault.error(410, "held by x"), times=2
            )
            got = await service.fetch(FetchQuery("gref", client_id=None, wait_ms=0))
            assert rule.hits == 2
            assert got.status == "ok"
            assert got.messages
            stats = service.stats()
            assert stats.partition_refusals == 1
            assert stats.broker_errors == 0
            refused = {p.partition_key for p in (await service.lag("gref")).partitions}
            assert got.lease is not None
            refused.discard(got.lease.partition_key)
            assert len(refused) == 1
            await service.settle(got.lease.key, "ack")
            # within the hold the refused partition is not tried again: nothing to read yet
            again = await service.fetch(FetchQuery("gref", client_id=None, wait_ms=0))
            assert again.status == "empty"
            assert service.stats().partition_refusals == 1
