"""Clients listing masters that stop answering (FaultProxies that accept and blackhole the
requests, in front of the fake cluster's master): a master call ends within ``rpc_timeout``
in all, and a healthy address after silent ones answers the same call.

Found by reading the failover code: the first round gave every address a whole ``rpc_timeout``,
so three silent masters made ``partitions()`` (and every heartbeat) take ``3 × rpc_timeout``
(9 s here), and two silent masters listed first made a start take ``2 × rpc_timeout``.
The loop-time bounds leave generous slack; they separate one ``rpc_timeout`` from several.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import pytest

from tubemq_aio import ClientBalancedConsumer, Producer, RequestTimeoutError
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, FaultProxy

pytestmark = [pytest.mark.timeout(60), pytest.mark.also_on_uvloop]
RPC_TIMEOUT = 3.0  # the smallest allowed
SLACK = 1.5


@asynccontextmanager
async def masters(count: int) -> AsyncIterator[tuple[FakeCluster, list[FaultProxy]]]:
    """The fake cluster and ``count`` healthy proxies to its master."""
    async with AsyncExitStack() as stack:
        cluster = await stack.enter_async_context(FakeCluster(topics={"demo": 2}))
        proxies = [
            await stack.enter_async_context(FaultProxy(cluster.master_addr)) for _ in range(count)
        ]
        yield cluster, proxies


def loop_time() -> float:
    return asyncio.get_running_loop().time()


async def test_partitions_with_every_master_silent_end_by_rpc_timeout() -> None:
    async with masters(3) as (cluster, proxies):
        addresses = ",".join(p.addr for p in proxies)
        consumer = ClientBalancedConsumer(
            addresses, group="g1", topics=["demo"], rpc_timeout=RPC_TIMEOUT
        )
        async with consumer:
            assert len(await consumer.partitions()) == 2
            asked = cluster.requests(Method.MASTER_CONSUMER_GET_PART_META)
            for proxy in proxies:
                proxy.set("up", blackhole=True)
            began = loop_time()
            with pytest.raises(RequestTimeoutError) as caught:
                await consumer.partitions()
            assert loop_time() - began < RPC_TIMEOUT + SLACK  # before: 3 × rpc_timeout
            assert cluster.requests(Method.MASTER_CONSUMER_GET_PART_META) == asked
            assert all(p.addr in str(caught.value) for p in proxies)  # every address asked
            for proxy in proxies:
                proxy.clear()


async def test_a_healthy_master_after_silent_ones_answers_the_same_call() -> None:
    async with masters(2) as (cluster, silent):
        for proxy in silent:
            proxy.set("up", blackhole=True)
        addresses = ",".join([*(p.addr for p in silent), cluster.master_addr])
        producer = Producer(
            addresses, topics=["demo"], rpc_timeout=RPC_TIMEOUT, register_attempts=1
        )
        began = loop_time()
        async with producer:
            assert loop_time() - began < RPC_TIMEOUT  # before: 2 × rpc_timeout, then the answer
            assert cluster.requests(Method.MASTER_PRODUCER_REGISTER) == 1
            await producer.send("demo", b"x")
        assert cluster.bodies("demo") == [b"x"]
