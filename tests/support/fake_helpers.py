"""Helpers shared by the tests that run our clients against :class:`FakeCluster`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from tubemq_aio import ClientBalancedConsumer, Consumer, Producer
from tubemq_aio.testing import FakeCluster

__all__ = [
    "HEARTBEAT",
    "AnyConsumer",
    "Opener",
    "cb_consumer",
    "consumer_openers",
    "drain",
    "group_consumer",
    "produce",
]

AnyConsumer = Consumer | ClientBalancedConsumer
#: Opens a started consumer of group ``g1`` over a cluster (an ``async with`` context).
Opener = Callable[[FakeCluster], AbstractAsyncContextManager[AnyConsumer]]

#: The shortest heartbeat our clients accept; rebalances then take about two seconds.
HEARTBEAT = 1.0


def group_consumer(cluster: FakeCluster, group: str, **options: object) -> Consumer:
    """A server-balanced consumer of topic ``demo`` from the earliest offset, fast heartbeats."""
    return Consumer(
        cluster.master_addr,
        group=group,
        topics=["demo"],
        consume_from="earliest",
        heartbeat_interval=HEARTBEAT,
        **options,  # type: ignore[arg-type]
    )


def cb_consumer(cluster: FakeCluster, group: str, **options: object) -> ClientBalancedConsumer:
    """A client-balanced consumer of topic ``demo`` from the earliest offset, fast heartbeats
    (it connects nothing by itself)."""
    return ClientBalancedConsumer(
        cluster.master_addr,
        group=group,
        topics=["demo"],
        consume_from="earliest",
        heartbeat_interval=HEARTBEAT,
        **options,  # type: ignore[arg-type]
    )


async def produce(master: str, topic: str, count: int, prefix: str = "m") -> list[bytes]:
    """Send ``count`` messages ``{prefix}-{i}`` and return their bodies."""
    bodies = [f"{prefix}-{i}".encode() for i in range(count)]
    async with Producer(master, topics=[topic]) as producer:
        await asyncio.gather(*(producer.send(topic, b, attributes={"i": "1"}) for b in bodies))
    return bodies


async def drain(
    consumer: Consumer | ClientBalancedConsumer, count: int, timeout: float
) -> list[bytes]:
    """Read batches (acking each) until ``count`` messages arrived; fail after ``timeout`` s."""
    got: list[bytes] = []

    async def run() -> None:
        while len(got) < count:
            batch = await consumer.getmany(timeout=0.5)
            async with batch:
                got.extend(m.body for m in batch)

    await asyncio.wait_for(run(), timeout)
    return got


def consumer_openers(rpc_timeout: float, **cb_options: object) -> dict[str, Opener]:
    """Both consumers of group ``g1`` with ``rpc_timeout``, by name, for a test run with each:
    the server-balanced one, and the client-balanced one (``cb_options`` added) with partition
    ``1:demo:0`` connected."""

    @asynccontextmanager
    async def server_balanced(cluster: FakeCluster) -> AsyncIterator[AnyConsumer]:
        async with group_consumer(cluster, "g1", rpc_timeout=rpc_timeout) as consumer:
            yield consumer

    @asynccontextmanager
    async def client_balanced(cluster: FakeCluster) -> AsyncIterator[AnyConsumer]:
        options = {"rpc_timeout": rpc_timeout, **cb_options}
        async with cb_consumer(cluster, "g1", **options) as consumer:
            await consumer.connect("1:demo:0")
            yield consumer

    return {"server-balanced": server_balanced, "client-balanced": client_balanced}
