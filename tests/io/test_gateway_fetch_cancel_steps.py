"""A consume-engine fetch cancelled at every step of its way (on a real redis-server and the
FakeCluster) ends cancelled, never with a batch for nobody: on Python 3.11 redis-py's command
write awaits ``asyncio.wait_for``, which drops a cancel that meets the write's completion; the
store's round trip raises it again. A stream whose client had left kept fetching for up to its
``max_seconds`` when that happened (a CI run caught it).

A fetch cancelled while its broker call is out keeps its lease until an engine task saw the
call answered (``fetch_attempt``): a check of the leases waits for those tasks first."""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest

from tests.support.gateway_engine_support import answer_tasks, answers_settled, running_service
from tests.support.gateway_failover_support import produce_numbered
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.engine.data import FetchQuery
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault, RedisServer, wait_until

#: Loop turns after which the fetch is cancelled: 0 (before its first await) to past its end.
STEPS = 160


@pytest.mark.parametrize("mode", ["clustering", "broadcast"])
async def test_a_fetch_cancelled_at_any_step_ends_cancelled(
    redis_server: RedisServer, mode: Literal["clustering", "broadcast"]
) -> None:
    group = f"c-{mode}"
    client_id = "client-1" if mode == "broadcast" else None
    spec = GroupSpec(name=group, topics=("t",), mode=mode, lease_ms_min=100, lease_ms=60_000)
    async with FakeCluster(topics={"t": 2}, max_batch=5) as cluster:
        await produce_numbered(cluster.master_addr, "t", 10)
        async with running_service(cluster.master_addr, redis_server.url, spec) as service:
            returned_after_cancel: list[int] = []
            cancelled = 0
            for step in range(STEPS):
                task = asyncio.ensure_future(
                    service.fetch(
                        FetchQuery(group, client_id=client_id, wait_ms=2000, lease_ms=60_000)
                    )
                )
                for _ in range(step):
                    await asyncio.sleep(0)
                asked = not task.done()
                task.cancel()
                done, _ = await asyncio.wait({task}, timeout=10)
                assert done, f"a fetch cancelled after {step} loop turns did not end in 10 s"
                if task.cancelled():
                    cancelled += 1
                    continue
                if asked:  # it was cancelled while it ran, and returned anyway
                    returned_after_cancel.append(step)
                lease = task.result().lease
                if lease is not None:  # give the batch back for the next round
                    key = lease.key
                    await service.settle(key, "release")
            assert not returned_after_cancel, returned_after_cancel
            assert cancelled > STEPS // 2, cancelled
            await answers_settled(service)  # a late step's cancel may have met a broker call
            lag = await service.lag(group, client_id=client_id)
            assert all(p.lease_holder is None for p in lag.partitions), lag


async def test_a_fetch_cancelled_in_its_broker_call_holds_its_lease_until_answered(
    redis_server: RedisServer,
) -> None:
    """The order the step test met under load: a fetch is cancelled while its GetMessage is
    out. Its lease stays held, holder and expiry shown together, as long as the engine task
    waits for the call; once the call is answered and that task ended, it is given back (not
    left to lapse)."""
    get = Method.BROKER_CONSUMER_GET_MESSAGE
    spec = GroupSpec(name="c-answer", topics=("t",), lease_ms_min=100, lease_ms=60_000)
    async with FakeCluster(topics={"t": 1}, max_batch=5) as cluster:
        await produce_numbered(cluster.master_addr, "t", 5)
        async with running_service(cluster.master_addr, redis_server.url, spec) as service:
            cluster.inject(get, Fault.late())
            task = asyncio.ensure_future(
                service.fetch(FetchQuery(spec.name, client_id=None, lease_ms=60_000, holder="h"))
            )
            await wait_until(lambda: cluster.held_late(get) == 1, 5, "the GetMessage arrived")
            task.cancel()
            await asyncio.wait({task}, timeout=10)
            assert task.cancelled()
            assert len(answer_tasks(service)) == 1
            (entry,) = (await service.lag(spec.name)).partitions
            assert entry.lease_holder == "h", entry
            assert entry.lease_expires_at is not None, entry
            assert cluster.release_late(get) == 1
            await answers_settled(service)
            (entry,) = (await service.lag(spec.name)).partitions
            assert (entry.lease_holder, entry.lease_expires_at) == (None, None), entry
            assert service.stats().leases_left_to_lapse == 0
