"""A fetch whose GetMessage may still reach the broker does not give its lease back (the
FakeCluster and a real redis-server): the broker keeps one batch in flight per group and
partition, whoever read it, so a request the holder stopped waiting for could land inside the
next holder's read and skip messages (``docs/gateway.md``, "Read-ahead off the critical path").

A GetMessage not answered within ``rpc_timeout`` leaves the lease to lapse at its expiry; a
fetch cancelled with its GetMessage out hands the call to an engine task, which releases the
lease once the answer came (or lets it lapse when none comes within the read's budget); a
GetMessage the broker refused was answered, and the lease is given back at once. Every message
arrives once, in order (the batch of an abandoned read comes again)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest

from tests.support.gateway_engine_support import answer_tasks
from tests.support.gateway_one_partition import PartitionWorld, one_partition
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.errors import TubeUnavailableError
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault

GET = Method.BROKER_CONSUMER_GET_MESSAGE
SPEC = GroupSpec(name="gas", topics=("t",), lease_ms_min=100, lease_ms=60_000)
RPC_S = 3.0  # the least rpc_timeout


@contextlib.asynccontextmanager
async def _one_partition(count: int = 30) -> AsyncIterator[PartitionWorld]:
    """One partition of ``count`` messages (batches of 10), its first batch fetched and acked
    (the broker cursor is known to be at the committed offset)."""
    async with one_partition(SPEC, count, RPC_S) as world:
        await world.take()
        yield world


async def _rest(world: PartitionWorld) -> None:
    while len(world.got) < len(world.bodies):
        await world.take(wait_ms=1000)
    assert world.got == world.bodies  # every message once, in order


async def _sent(cluster: FakeCluster, before: int) -> None:
    deadline = time.monotonic() + 5
    while cluster.requests(GET) == before:
        assert time.monotonic() < deadline, "the GetMessage was not sent"
        await asyncio.sleep(0.005)


async def test_a_get_message_not_answered_in_time_leaves_the_lease_to_lapse() -> None:
    lease_ms = 6000
    async with _one_partition() as world:
        world.cluster.inject(GET, Fault.delay(RPC_S + 1.0))  # answered after the read gave up
        started = time.monotonic()
        with pytest.raises(TubeUnavailableError):
            await world.service.fetch(world.query(lease_ms))
        expiry = started + lease_ms / 1000
        # not handed to another fetch before the lease's expiry, which the fetch is told
        out = await world.service.fetch(world.query())
        assert out.status == "busy", out
        assert out.retry_after_ms is not None
        assert out.retry_after_ms > 1000  # not the 1 s rest of a refused call
        stats = world.service.stats()
        assert (stats.leases_left_to_lapse, stats.broker_errors) == (1, 1)
        await asyncio.sleep(RPC_S + 1.5 - (time.monotonic() - started))  # the answer came
        assert (await world.service.fetch(world.query())).status == "busy"
        await world.take(wait_ms=lease_ms)
        assert time.monotonic() >= expiry - 0.2
        await _rest(world)


async def test_a_cancelled_fetch_releases_once_its_get_message_is_answered() -> None:
    hold_s = 1.0
    async with _one_partition() as world:
        cluster, service = world.cluster, world.service
        cluster.inject(GET, Fault.delay(hold_s))
        before = cluster.requests(GET)
        fetch = asyncio.ensure_future(service.fetch(world.query()))
        await _sent(cluster, before)
        sent = time.monotonic()
        fetch.cancel()
        with pytest.raises(asyncio.CancelledError):
            await fetch
        assert len(answer_tasks(service)) == 1  # the GetMessage's answer is waited for
        assert (await service.fetch(world.query())).status == "busy"  # not released yet
        await world.take(wait_ms=10_000)
        took = time.monotonic() - sent
        assert hold_s - 0.2 < took < hold_s + 2.0, took  # released on the answer, not at expiry
        assert answer_tasks(service) == []
        assert service.stats().leases_left_to_lapse == 0
        await _rest(world)  # the abandoned batch comes again: nothing skipped


async def test_a_cancelled_fetch_whose_get_message_is_not_answered_lets_the_lease_lapse() -> None:
    lease_ms = 4000  # the read's budget: 3 s
    async with _one_partition() as world:
        cluster, service = world.cluster, world.service
        cluster.inject(GET, Fault.no_answer())
        before = cluster.requests(GET)
        started = time.monotonic()
        fetch = asyncio.ensure_future(service.fetch(world.query(lease_ms)))
        await _sent(cluster, before)
        fetch.cancel()
        with pytest.raises(asyncio.CancelledError):
            await fetch
        async with asyncio.timeout(lease_ms / 1000 + 1):
            while answer_tasks(service):
                assert (await service.fetch(world.query())).status == "busy"
                await asyncio.sleep(0.1)
        assert service.stats().leases_left_to_lapse == 1
        await world.take(wait_ms=lease_ms)
        assert time.monotonic() >= started + lease_ms / 1000 - 0.2
        await _rest(world)


async def test_a_get_message_the_broker_refused_gives_the_lease_back() -> None:
    async with _one_partition() as world:
        world.cluster.inject(GET, Fault.error(500, "refused"))
        with pytest.raises(TubeUnavailableError):
            await world.service.fetch(world.query())
        assert world.service.stats().leases_left_to_lapse == 0
        started = time.monotonic()
        await world.take(wait_ms=5000)
        assert time.monotonic() - started < 10.0  # the 1 s rest, not the 60 s lease
        await _rest(world)


async def test_a_replica_closing_with_a_cancelled_fetch_answer_pending_leaves_no_task() -> None:
    async with _one_partition() as world:
        cluster, service = world.cluster, world.service
        cluster.inject(GET, Fault.no_answer())
        before = cluster.requests(GET)
        fetch = asyncio.ensure_future(service.fetch(world.query()))
        await _sent(cluster, before)
        fetch.cancel()
        with pytest.raises(asyncio.CancelledError):
            await fetch
        assert len(answer_tasks(service)) == 1
        started = time.monotonic()
        await service.close()
        assert time.monotonic() - started < 2.5  # not at RPC_S
        assert service.tasks.tasks == []
        assert service.stats().leases_left_to_lapse == 1  # not released: it lapses
