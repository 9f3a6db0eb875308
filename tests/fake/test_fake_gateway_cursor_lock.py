"""Broadcast: the group's shared broker cursor mutex must outlive a slow read.

With the mutex living 0.3 s and every broker RPC taking 0.2 s, a read (register, GetMessage,
commit) outlasts it: unless the mutex is renewed while the read runs, and the booking fenced by
its token, the other client takes the lapsed mutex, moves the cursor, and the first client
books the other's end offset: its batch silently skips messages.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.support.gateway_engine_support import running_service, two_clients
from tubemq_aio import Producer
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.engine import fetch_attempt
from tubemq_aio.gateway.engine.data import FetchQuery
from tubemq_aio.gateway.leases.lease_store import LeaseStore
from tubemq_aio.testing import FakeCluster, FaultProxy, RedisServer


async def test_every_client_gets_every_message_through_a_slow_broker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fetch_attempt, "_CURSOR_LOCK_MS", 300)
    async with (
        FakeCluster(topics={"t": 1}, max_batch=10) as cluster,
        RedisServer() as redis,
        FaultProxy(cluster.broker_addr(1)) as proxy,
    ):
        cluster.advertise_broker(1, proxy.addr)
        values = [f"m{i:03d}" for i in range(60)]
        async with Producer(cluster.master_addr, topics=["t"]) as producer:
            for value in values:
                await producer.send("t", value.encode())
        spec = GroupSpec(name="gbc", topics=("t",), mode="broadcast", lease_ms=60_000)
        async with running_service(cluster.master_addr, redis.url, spec) as service:
            proxy.set("both", latency=0.1)  # every broker RPC now takes about 0.2 s
            await two_clients(service, "gbc", values)


async def test_a_read_that_loses_the_mutex_is_cut_short_and_books_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fetch_attempt, "_CURSOR_LOCK_MS", 300)

    async def lapsed(*_args: object) -> bool:
        return False  # the mutex is gone at the first renewal

    async with (
        FakeCluster(topics={"t": 1}) as cluster,
        RedisServer() as redis,
        FaultProxy(cluster.broker_addr(1)) as proxy,
    ):
        cluster.advertise_broker(1, proxy.addr)
        async with Producer(cluster.master_addr, topics=["t"]) as producer:
            await producer.send("t", b"only")
        spec = GroupSpec(name="glap", topics=("t",), mode="broadcast", lease_ms=60_000)
        async with running_service(cluster.master_addr, redis.url, spec) as service:
            proxy.set("both", latency=0.1)
            with monkeypatch.context() as patch:
                patch.setattr(LeaseStore, "renew_lock", lapsed)
                cut = await service.fetch(FetchQuery("glap", client_id="A"))
            assert cut.status == "busy"
            assert service.stats().cursor_lock_lapses == 1
            # the cut read's broker call is answered off the fetch's path: the lease is
            # released then (not while the call may still reach the broker)
            deadline = time.monotonic() + 3.0
            lag = await service.lag("glap", client_id="A")
            while [e.lease_holder for e in lag.partitions] != [None]:
                assert time.monotonic() < deadline, "the lease was not released"
                await asyncio.sleep(0.05)
                lag = await service.lag("glap", client_id="A")
            assert service.stats().leases_left_to_lapse == 0
            assert [e.committed for e in lag.partitions] in ([None], [0])  # nothing booked
            again = await service.fetch(FetchQuery("glap", client_id="A", wait_ms=5000))
            assert [m.body for m in again.messages] == [b"only"]
