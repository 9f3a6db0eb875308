"""A Redis stall in the middle of a leased read, on a lease shorter than the store's two
round-trip attempts (2 x ``rpc_timeout``): the read's budget runs out on Redis, and the fetch
answers 503 ``store_unavailable`` (Redis's fault), not ``tube_unavailable`` (the broker's)."""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest

from tests.support.gateway_engine_support import running_service
from tests.support.gateway_failover_support import assert_retriable_503, produce_numbered
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.engine.data import FetchQuery
from tubemq_aio.gateway.errors import StoreUnavailableError
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault, FaultProxy, RedisServer, wait_until

#: The read's budget is the lease less a quarter of it (at most 2 s): 1.5 s, far below the
#: 2 x 3 s the store's round trip takes to give up on its own.
LEASE_MS = 2000


@pytest.mark.parametrize(("mode", "client_id"), [("clustering", None), ("broadcast", "c1")])
async def test_a_redis_stall_cut_by_a_short_lease_is_the_stores_fault(
    mode: Literal["clustering", "broadcast"], client_id: str | None
) -> None:
    spec = GroupSpec(name="gs", topics=("t",), mode=mode, lease_ms_min=500, lease_ms=LEASE_MS)
    async with (
        FakeCluster(topics={"t": 1}) as cluster,
        RedisServer() as redis,
        FaultProxy(f"127.0.0.1:{redis.port}") as proxy,
    ):
        await produce_numbered(cluster.master_addr, "t", 3)
        async with running_service(
            cluster.master_addr, f"redis://{proxy.addr}/0", spec, rpc_timeout=3.0
        ) as service:
            # the broker's answer is held back; Redis goes silent while the read waits on it,
            # so the booking after the read stalls until the budget ends
            slow = cluster.inject(Method.BROKER_CONSUMER_GET_MESSAGE, Fault.delay(0.5))
            fetch = asyncio.create_task(
                service.fetch(
                    FetchQuery("gs", client_id=client_id, max_messages=3, lease_ms=LEASE_MS)
                )
            )
            await wait_until(lambda: slow.hits >= 1, 30, "the read at the broker")
            proxy.set(blackhole=True)
            try:
                async with asyncio.timeout(30):
                    outcome = await asyncio.gather(fetch, return_exceptions=True)
            finally:
                proxy.clear()
            error = outcome[0]
            assert isinstance(error, StoreUnavailableError), repr(error)
            assert_retriable_503(error)
            assert service.stats().broker_errors == 0  # the broker was never at fault
