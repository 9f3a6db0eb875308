"""Two resets of one group to ``latest`` at once, on two replicas (a real redis-server,
FakeCluster), while a producer sends: each answers every partition with the offset it resolved,
the group ends at one of the two answers per partition, a lease held before both is stale after,
and a fetch delivers every message sent after both answered and nothing sent before either began
(docs/gateway.md, "Reset").

Each reset resolves ``latest`` with a planning consumer of the group ``{group}_planner`` (one
broker register and unregister per partition); the broker is slowed so that the two planners'
registers overlap, and the broker refuses the second one (410, the partition is occupied by the
other consumer of the group) until the first one unregistered."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.gateway_engine_support import running_service
from tests.support.gateway_failover_support import produce_numbered
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.engine.data import FetchQuery, ResetEntry
from tubemq_aio.gateway.engine.service import ConsumeService
from tubemq_aio.gateway.errors import LeaseConflictError, LeaseStaleError
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault, RedisServer

GROUP = "race"
PARTITIONS = 3
#: The broker's answers to registers and unregisters come this many seconds late.
SLOW_BROKER = 0.1
REGISTER = Method.BROKER_CONSUMER_REGISTER


async def _fetch_until(service: ConsumeService, want: set[str], timeout: float) -> set[str]:
    """Fetch and ack until every body of ``want`` came; every body delivered meanwhile."""
    got: set[str] = set()
    async with asyncio.timeout(timeout):
        while not want <= got:
            out = await service.fetch(
                FetchQuery(GROUP, client_id=None, wait_ms=300, lease_ms=60_000)
            )
            if out.status != "ok":
                continue
            assert out.lease is not None
            got |= {m.body.decode() for m in out.messages}
            assert await service.settle(out.lease.key, "ack") == "acked"
    return got


def _resolved(out: list[ResetEntry]) -> dict[str, int]:
    """A reset answer as partition → the offset it resolved (each partition once, a number)."""
    new = {e.partition_key: e.new for e in out}
    assert len(new) == len(out) == PARTITIONS, out
    assert all(isinstance(v, int) and v >= 0 for v in new.values()), out
    return {k: int(v) for k, v in new.items()}


async def test_two_resets_to_latest_at_once_each_hold_their_promise(
    redis_server: RedisServer,
) -> None:
    spec = GroupSpec(name=GROUP, topics=("t",), lease_ms_min=100, lease_ms=60_000)
    async with FakeCluster(topics={"t": PARTITIONS}, max_batch=5) as cluster:
        masters = cluster.master_addr
        before = await produce_numbered(masters, "t", 30)
        async with (
            running_service(masters, redis_server.url, spec) as service,
            running_service(masters, redis_server.url, spec) as other,
        ):
            held = await service.fetch(
                FetchQuery(GROUP, client_id=None, wait_ms=2000, lease_ms=60_000)
            )
            assert held.status == "ok"
            assert held.lease is not None

            registers = cluster.requests(REGISTER)
            cluster.inject(REGISTER, Fault.delay(SLOW_BROKER), times=None)
            first, second, during = await asyncio.gather(
                service.reset(GROUP, "latest"),
                other.reset(GROUP, "latest"),
                produce_numbered(masters, "t", 6, start=30),
            )
            cluster.clear_faults()
            # Each reset resolved every partition itself (a register and an unregister each).
            assert cluster.requests(REGISTER) - registers >= 2 * 2 * PARTITIONS
            a, b = _resolved(first), _resolved(second)
            assert a.keys() == b.keys()
            # Where the group stands now is one of the two answers, per partition.
            lag = await service.lag(GROUP)
            assert {e.partition_key for e in lag.partitions} == set(a)
            for entry in lag.partitions:
                key = entry.partition_key
                assert entry.committed in (a[key], b[key]), (entry, a[key], b[key])
                assert entry.lease_holder is None, entry
            # The lease out before the resets is stale; settling it moves nothing.
            with pytest.raises((LeaseStaleError, LeaseConflictError)):
                await service.settle(held.lease.key, "ack")
            assert [e.committed for e in (await service.lag(GROUP)).partitions] == [
                e.committed for e in lag.partitions
            ]

            after = await produce_numbered(masters, "t", 12, start=36)
            got = await _fetch_until(service, set(after), timeout=30)
            assert not got & set(before), sorted(got & set(before))
            assert got <= set(during) | set(after), sorted(got - set(during) - set(after))
            lag = await service.lag(GROUP)
            assert all(e.lease_holder is None for e in lag.partitions), lag
