"""The gateway on Redis Sentinel (a primary, a replica, three sentinels; FakeCluster for
TubeMQ): a SIGKILL of the primary answers 503 ``store_unavailable`` (retriable) until a
sentinel promoted the replica, then two replicas of the gateway serve again with no message
skipped; an answered ack the failover lost comes back as a redelivery, and its token cannot
commit the batch's next lease."""

from __future__ import annotations

import pytest

from tests.support.gateway_engine_support import drained_lag, running_service
from tests.support.gateway_failover_support import (
    Tally,
    assert_retriable_503,
    consume_through_crash,
    consume_until,
    produce_numbered,
)
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.engine.data import FetchQuery
from tubemq_aio.gateway.errors import LeaseStaleError, StoreUnavailableError
from tubemq_aio.testing import FakeCluster, RedisSentinelSet

#: Kills Redis primaries or replicas: run by `make test`, left out of `make unit` (see Makefile).
pytestmark = pytest.mark.failover

LEASE_MS = 2000
#: Leases of the runs killed mid-read: long enough that most reads cut by the failover end
#: in the store's own answer (a read whose budget runs out on Redis is reported as Redis's
#: fault too: see test_fake_gateway_store_stall.py).
RUN_LEASE_MS = 9000


async def test_an_answered_ack_the_failover_lost_is_redelivered_never_skipped() -> None:
    spec = GroupSpec(name="ga", topics=("t",), lease_ms_min=500, lease_ms=LEASE_MS)
    async with (
        FakeCluster(topics={"t": 1}, max_batch=5) as cluster,
        RedisSentinelSet(replication_proxy=True) as redis_set,
    ):
        bodies = await produce_numbered(cluster.master_addr, "t", 20)
        settings = {"redis_ack_replicas": 1, "redis_ack_wait_ms": 300, "rpc_timeout": 3.0}
        async with (
            running_service(cluster.master_addr, redis_set.url, spec, **settings) as a,
            running_service(cluster.master_addr, redis_set.url, spec, **settings) as b,
        ):
            first = await a.fetch(
                FetchQuery("ga", client_id=None, max_messages=5, lease_ms=LEASE_MS)
            )
            assert first.lease is not None
            assert [m.body.decode() for m in first.messages] == bodies[:5]
            assert await b.settle(first.lease.key, "ack") == "acked"
            assert b.stats().ack_wait_short == 0  # the replica confirmed it

            second = await a.fetch(
                FetchQuery("ga", client_id=None, max_messages=5, lease_ms=LEASE_MS)
            )
            assert second.lease is not None
            assert [m.body.decode() for m in second.messages] == bodies[5:10]
            link = redis_set.replication_link
            assert link is not None
            link.set("down", blackhole=True)  # the replica stops hearing the primary
            assert await a.settle(second.lease.key, "ack") == "acked"
            assert a.stats().ack_wait_short == 1  # answered, but no replica holds it

            old = await redis_set.kill_primary()
            with pytest.raises(StoreUnavailableError) as caught:
                await b.fetch(FetchQuery("ga", client_id=None, max_messages=5, lease_ms=LEASE_MS))
            assert_retriable_503(caught.value)
            await redis_set.wait_failover(old)
            link.clear()

            tally = Tally()
            await consume_until([b, a], "ga", bodies[5:], tally, max_messages=5)
            assert tally.skipped(bodies[5:]) == []
            # the lost ack's batch came back first, counted as a redelivery
            assert tally.redelivered_batches >= 1
            assert tally.deliveries["m5"] == 1
            assert tally.duplicates == 0
            # the lost ack's token cannot commit the batch's next lease
            with pytest.raises(LeaseStaleError):
                await b.settle(second.lease.key, "ack")
            for service in (a, b):
                assert service.stats().state_lost == 0  # the markers were replicated
            assert (await drained_lag(b, "ga")).total_lag_bytes == 0


async def test_two_replicas_consume_through_a_primary_crash() -> None:
    spec = GroupSpec(name="g2", topics=("t",), lease_ms_min=500, lease_ms=RUN_LEASE_MS)
    async with FakeCluster(topics={"t": 4}, max_batch=10) as cluster, RedisSentinelSet() as rset:
        bodies = await produce_numbered(cluster.master_addr, "t", 400)
        async with (
            running_service(cluster.master_addr, rset.url, spec, rpc_timeout=3.0) as a,
            running_service(cluster.master_addr, rset.url, spec, rpc_timeout=3.0) as b,
        ):

            async def crash() -> None:
                await rset.wait_failover(await rset.kill_primary())

            tally = await consume_through_crash([a, b], "g2", bodies, crash, lease_ms=RUN_LEASE_MS)
            assert tally.skipped(bodies) == []
            assert tally.at_crash is not None
            assert tally.at_crash < len(bodies)  # the primary died mid-run
            assert tally.unavailable >= 1  # and the failover was seen as 503s
            # at most the batches in flight when the primary died come back
            assert tally.duplicates <= 3 * 10 * 2
            assert a.stats().state_lost + b.stats().state_lost == 0
