"""The client-balanced consumer's broker calls outlive a broker restart (issue 30, fault 1).

``connect`` and ``read_at`` used to fail with ``ConnectError`` in milliseconds while their broker
restarted; a register or read that certainly did not reach the broker is now tried again until
``rpc_timeout`` has passed.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.support.fake_helpers import produce
from tubemq_aio import ClientBalancedConsumer, ConnectError
from tubemq_aio.testing import FakeCluster

OUTAGE = 1.0
KEY = "1:demo:0"

pytestmark = pytest.mark.timeout(60)


def _consumer(cluster: FakeCluster, **options: object) -> ClientBalancedConsumer:
    return ClientBalancedConsumer(
        cluster.master_addr,
        group="cbd",
        topics=["demo"],
        consume_from="earliest",
        **options,  # type: ignore[arg-type]
    )


async def _restart_later(cluster: FakeCluster) -> asyncio.Task[None]:
    await cluster.stop_broker(1)
    await asyncio.sleep(0.05)

    async def restart() -> None:
        await asyncio.sleep(OUTAGE)
        await cluster.start_broker(1)

    return asyncio.create_task(restart())


@pytest.mark.parametrize("call", ["connect", "read_at", "read_next"])
async def test_a_broker_call_outlives_its_broker_restarting(call: str) -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        sent = await produce(cluster.master_addr, "demo", 5)
        async with _consumer(cluster) as consumer:
            await consumer.partitions()
            first = await consumer.read_at(KEY, 0)  # a link to the broker is open
            await consumer.disconnect(KEY)
            restart = await _restart_later(cluster)
            loop = asyncio.get_running_loop()
            began = loop.time()
            if call == "connect":
                await consumer.connect(KEY, offset=0)
                assert KEY in consumer.assignment()
            elif call == "read_at":
                got = await consumer.read_at(KEY, 0)
                assert [m.body for m in got.messages] == [m.body for m in first.messages]
            else:
                got = await consumer.read_next(KEY, first.next_offset)
                assert got.start_offset == first.next_offset
            assert loop.time() - began >= OUTAGE - 0.2
            await restart
        assert [m.body for m in first.messages] == sent[: len(first.messages)]


async def test_a_broker_away_past_rpc_timeout_fails_typed_at_it() -> None:
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        _consumer(cluster, rpc_timeout=3) as consumer,
    ):
        await consumer.partitions()
        await cluster.stop_broker(1)
        loop = asyncio.get_running_loop()
        began = loop.time()
        with pytest.raises(ConnectError):
            await asyncio.wait_for(consumer.read_at(KEY, 0), 10)
        assert 2.8 <= loop.time() - began <= 5.0
