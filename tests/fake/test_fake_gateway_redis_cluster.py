"""The gateway on a Redis Cluster of three primaries (FakeCluster for TubeMQ): every key of a
group shares one slot, so every script runs; produce, consume, reset and lag work through it,
and a SIGKILL of the group's primary mid-run costs at most 503 ``store_unavailable``
(retriable; redis-py's cluster client often rides a failover out within one round trip's
timeout) until its replica took the slot over, then consumption goes on with no message
skipped."""

from __future__ import annotations

import pytest

from tests.support.gateway_engine_support import drained_lag, running_service
from tests.support.gateway_failover_support import (
    Tally,
    consume_through_crash,
    consume_until,
    produce_numbered,
)
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.leases.housekeeping_store import HousekeeperStore
from tubemq_aio.gateway.leases.redis_keys import scope_keys
from tubemq_aio.testing import FakeCluster, RedisClusterSet, wait_until

#: Kills Redis primaries or replicas: run by `make test`, left out of `make unit` (see Makefile).
pytestmark = pytest.mark.failover

#: Leases of a run killed mid-read: a read's budget (the lease less 2 s) must outlast the
#: store's two round-trip attempts (2 x rpc_timeout), or a read cut short by the failover
#: would be reported as the broker's fault (503 tube_unavailable) rather than the store's.
RUN_LEASE_MS = 9000


async def test_a_cluster_serves_the_gateway_through_a_primary_failover() -> None:
    groups = [
        GroupSpec(name=f"grp{i}", topics=("t",), lease_ms_min=500, lease_ms=RUN_LEASE_MS)
        for i in range(3)
    ]
    async with FakeCluster(topics={"t": 3}, max_batch=10) as cluster, RedisClusterSet() as rc:
        slots = {await rc.slot_of(k) for k in scope_keys("grp0", "c")}
        assert len(slots) == 1  # the hash tag puts a group's keys in one slot
        bodies = await produce_numbered(cluster.master_addr, "t", 600)
        async with (
            running_service(cluster.master_addr, rc.url, *groups, rpc_timeout=3.0) as a,
            running_service(cluster.master_addr, rc.url, *groups, rpc_timeout=3.0) as b,
        ):
            # the groups land on different primaries; each serves its own copy of the stream
            warm = Tally()
            await consume_until([a, b], "grp1", bodies, warm)
            assert warm.skipped(bodies) == []
            assert (await drained_lag(b, "grp1")).total_lag_bytes == 0
            entries = await a.reset("grp1", "earliest")
            assert entries
            after = await b.lag("grp1")
            assert [e.committed for e in after.partitions] == [None] * 3  # back to earliest
            again = Tally()
            await consume_until([b, a], "grp1", bodies, again)
            assert again.skipped(bodies) == []

            key = scope_keys("grp0", "c")[0]

            async def crash() -> None:
                await rc.wait_failover(key, await rc.kill_primary_of(key))

            tally = await consume_through_crash(
                [a, b], "grp0", bodies, crash, lease_ms=RUN_LEASE_MS
            )
            assert tally.skipped(bodies) == []
            # the primary died mid-run; calls met 503s or rode through redis-py's own retries
            assert tally.at_crash is not None
            assert tally.at_crash < len(bodies)
            assert tally.duplicates <= 3 * 10 * 2
            assert (await drained_lag(a, "grp0")).total_lag_bytes == 0
            assert a.stats().state_lost + b.stats().state_lost == 0
            # the housekeeper's scripts run on the cluster too (one slot each)
            hk = HousekeeperStore(a.store)
            assert (await hk.lead("grp2", "me", 5000)).held
            assert await hk.holder("grp2") == "me"

            async def all_idle() -> bool:
                # a partition read to its end rests (not_found_wait_ms) before it is eligible
                return len(await hk.idle_partitions("grp0", "c", 0)) == 3

            await wait_until(all_idle, 10, "every partition of grp0 idle")
            assert await hk.idle_partitions("grp0", "c", 600_000) == []  # all read just now
            assert (await hk.clients("grp0"))[1] == {}
            assert await hk.collect("grp0", "c", 1000) == "refused"  # never a clustering scope
            await hk.resign("grp2", "me")
            assert await hk.holder("grp2") is None
            # a group on another primary was never disturbed
            tail = Tally()
            await consume_until([a, b], "grp2", bodies, tail)
            assert tail.skipped(bodies) == []
