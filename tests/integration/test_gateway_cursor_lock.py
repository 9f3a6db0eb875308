"""Broadcast on the real cluster: two clients read one group through a slow broker and each
gets every message. Every broker connection of the engine goes through a
FaultProxy that holds each chunk 0.1 s, so a read (register, GetMessage, commit) takes about
0.6 s, twice the cursor mutex's unrenewed life here: the mutex is renewed while the read runs
and the booking is fenced. (The lost-messages scenario itself reproduces on the fake cluster,
``tests/fake/test_fake_gateway_cursor_lock.py``; against the real broker the old code happened
not to lose messages in this setup.)"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid

import pytest

from tests.support.gateway_engine_support import running_service, two_clients
from tubemq_aio import Producer
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.engine import fetch_attempt
from tubemq_aio.gateway.tubemq.tube_group import TubeGroup
from tubemq_aio.protocol.consumer_meta import Partition
from tubemq_aio.testing import FaultProxy, LocalCluster, RedisServer

_BODY_BYTES = 200_000


async def test_broadcast_clients_get_everything_through_a_slow_real_broker(
    cluster: LocalCluster, topic: str, redis: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fetch_attempt, "_CURSOR_LOCK_MS", 300)
    proxies: dict[str, FaultProxy] = {}
    opening = asyncio.Lock()
    resolve = TubeGroup._partition

    async def through_proxy(self: TubeGroup, key: str) -> Partition:
        real = await resolve(self, key)
        addr = f"{real.broker.host}:{real.broker.port}"
        async with opening:
            if addr not in proxies:
                proxy = FaultProxy(addr)
                await proxy.start()
                proxy.set("both", latency=0.1)
                proxies[addr] = proxy
        host, _, port = proxies[addr].addr.rpartition(":")
        return dataclasses.replace(
            real, broker=dataclasses.replace(real.broker, host=host, port=int(port))
        )

    monkeypatch.setattr(TubeGroup, "_partition", through_proxy)
    values = [f"v{i:03d}" for i in range(30)]
    async with Producer(cluster.master_addr, topics=[topic]) as producer:
        for value in values:  # big bodies: one broker read returns only a few of them
            await producer.send(topic, value.ljust(_BODY_BYTES, ".").encode())
    spec = GroupSpec(
        name=f"gwb_{uuid.uuid4().hex[:8]}", topics=(topic,), mode="broadcast", lease_ms=60_000
    )
    try:
        async with running_service(
            cluster.master_addr, redis.url, spec, deployment=f"lock-{uuid.uuid4().hex[:6]}"
        ) as service:
            await two_clients(service, spec.name, values)
            assert proxies, "no broker connection went through a proxy"
    finally:
        for proxy in proxies.values():
            await proxy.close()
