"""One partition of numbered messages on the FakeCluster, read by a consume engine on a real
redis-server, and the fetch-and-ack step the engine tests of requests that go astray share
(``tests/fake/test_fake_gateway_fetch_astray.py``, ``tests/fake/test_fake_gateway_fetch_late.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator

from tests.support.gateway_engine_support import running_service
from tests.support.gateway_failover_support import produce_numbered
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.engine.data import FetchOutcome, FetchQuery
from tubemq_aio.gateway.engine.service import ConsumeService
from tubemq_aio.testing import FakeCluster, RedisServer

__all__ = ["PartitionWorld", "one_partition"]


@dataclasses.dataclass
class PartitionWorld:
    """The cluster, the engine, the group's spec, the bodies produced (in order) and the bodies
    fetched and acked so far (in the order they came)."""

    cluster: FakeCluster
    service: ConsumeService
    spec: GroupSpec
    bodies: list[str]
    got: list[str]

    def query(self, lease_ms: int = 60_000, wait_ms: int = 0) -> FetchQuery:
        """A fetch of the group for at most one batch of 10 (the cluster's ``max_batch``)."""
        return FetchQuery(
            self.spec.name, client_id=None, wait_ms=wait_ms, lease_ms=lease_ms, max_messages=10
        )

    async def take(self, wait_ms: int = 0) -> FetchOutcome:
        """Fetch a batch (it must be ``ok``), note its bodies and ack it."""
        out = await self.service.fetch(self.query(wait_ms=wait_ms))
        assert out.status == "ok", out
        assert out.lease is not None
        self.got += [m.body.decode() for m in out.messages]
        assert await self.service.settle(out.lease.key, "ack") == "acked"
        return out


@contextlib.asynccontextmanager
async def one_partition(
    spec: GroupSpec, count: int, rpc_timeout: float
) -> AsyncIterator[PartitionWorld]:
    """Topic ``t`` with one partition holding ``count`` numbered messages (batches of 10) and
    an engine serving ``spec`` with ``rpc_timeout`` seconds per broker call."""
    async with FakeCluster(topics={"t": 1}, max_batch=10) as cluster, RedisServer() as redis:
        bodies = await produce_numbered(cluster.master_addr, "t", count)
        async with running_service(
            cluster.master_addr, redis.url, spec, rpc_timeout=rpc_timeout
        ) as service:
            yield PartitionWorld(cluster, service, spec, bodies, [])
