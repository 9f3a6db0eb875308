"""The read-ahead after a fetch's answer (``kept_batch_bytes`` > 0), on the FakeCluster and a real
redis-server: the fetch books its batch and the read-in-flight mark in one round trip, answers,
and only then an engine task reads the partition's next batch (GetMessage, CommitOffset behind
it) and keeps it; the partition's next fetch serves it with no broker call. A read-ahead whose
answers do not come is aborted at its deadline, one whose mark a reset voided is dropped, a
replica closing with one in flight leaves no task behind, and cancelled fetches leave no place
taken. Every message arrives once, in order.

The FakeCluster cuts its batches at ``max_batch`` messages, far below the least a real broker read
scans, so the floors of ``batch_end`` are lowered to the fake's (a read then reads ahead whenever
the partition's max lies past its batch), as in ``tests/io/test_gateway_kept_cancel.py``."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support.gateway_engine_support import cancelled_fetch, running_service
from tests.support.gateway_failover_support import produce_numbered
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.engine.data import FetchOutcome, FetchQuery
from tubemq_aio.gateway.engine.service import ConsumeService
from tubemq_aio.gateway.leases.lease_store import LeaseStore
from tubemq_aio.gateway.leases.replies import Reply
from tubemq_aio.gateway.tubemq import batch_end
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault, RedisServer

GET = Method.BROKER_CONSUMER_GET_MESSAGE
SPEC = GroupSpec(name="gra", topics=("t",), lease_ms=60_000)
#: The engine's rpc_timeout here, and so the read-ahead's allowance (its least value).
RPC_S = 3.0
ON = {"kept_batch_bytes": 1 << 25, "rpc_timeout": RPC_S}


@pytest.fixture(autouse=True)
def _fake_floors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch_end, "MIN_SCAN_RECORDS", 0)
    monkeypatch.setattr(batch_end, "MIN_TRANSFER_BYTES", 0)


async def _fetch(service: ConsumeService, wait_ms: int = 0) -> FetchOutcome:
    return await service.fetch(
        FetchQuery(SPEC.name, client_id=None, wait_ms=wait_ms, lease_ms=60_000, max_messages=1)
    )


async def _take(service: ConsumeService, got: list[str], wait_ms: int = 3000) -> FetchOutcome:
    """Fetch a batch, note its bodies in ``got`` and ack it."""
    out = await _fetch(service, wait_ms)
    assert out.status == "ok", out
    assert out.lease is not None
    got += [m.body.decode() for m in out.messages]
    assert await service.settle(out.lease.key, "ack") == "acked"
    return out


async def _settled(service: ConsumeService, timeout: float = 10.0) -> None:
    """Wait until no read-ahead runs or is about to."""
    deadline = time.monotonic() + timeout
    while service._reader.ahead.running:
        assert time.monotonic() < deadline, "a read-ahead did not end"
        await asyncio.sleep(0.01)


@dataclasses.dataclass
class _World:
    cluster: FakeCluster
    redis_url: str
    service: ConsumeService
    bodies: list[str]  # what was produced
    got: list[str]  # what was fetched and acked so far


@contextlib.asynccontextmanager
async def _after_a_read_ahead(count: int) -> AsyncIterator[_World]:
    """One partition of ``count`` messages (batches of 10) and a replica whose first fetch was
    acked and whose read-ahead after it kept the next batch."""
    async with FakeCluster(topics={"t": 1}, max_batch=10) as cluster, RedisServer() as redis:
        bodies = await produce_numbered(cluster.master_addr, "t", count)
        async with running_service(cluster.master_addr, redis.url, SPEC, **ON) as service:
            got: list[str] = []
            await _take(service, got)
            assert len(got) == 10
            await _settled(service)
            stats = service.stats()
            assert (stats.read_aheads_sent, stats.read_aheads_kept) == (1, 1)
            yield _World(cluster, redis.url, service, bodies, got)


def _read_aheads(service: ConsumeService) -> list[asyncio.Task[object]]:
    return [t for t in service.tasks.tasks if "read-ahead" in t.get_name()]


async def test_the_next_fetch_is_served_from_what_was_read_after_the_answer() -> None:
    async with _after_a_read_ahead(50) as world:
        cluster, service, bodies, got = world.cluster, world.service, world.bodies, world.got
        stats = service.stats()
        # served from memory: the fetch's path has no broker call
        rpcs = stats.ok_broker_rpcs
        await _take(service, got)
        stats = service.stats()
        assert (stats.kept_served, stats.ok_broker_rpcs) == (1, rpcs)
        await _settled(service)
        # the fetch does not wait for its read-ahead: hold the GetMessage's answer back
        cluster.inject(GET, Fault.delay(1.5))
        started = time.monotonic()
        out = await _fetch(service)
        assert time.monotonic() - started < 1.0
        assert out.status == "ok"
        assert out.lease is not None
        got += [m.body.decode() for m in out.messages]
        assert service._reader.ahead.running == 1
        assert await service.settle(out.lease.key, "ack") == "acked"
        # while it is in flight the partition is not handed out; its end wakes a long poll
        blocked = await _fetch(service)
        assert blocked.status != "ok"
        await _take(service, got, wait_ms=5000)
        assert service.stats().kept_served == 3
        while len(got) < len(bodies):
            await _take(service, got)
        await _settled(service)
        stats = service.stats()
        assert _read_aheads(service) == []
    assert got == bodies  # every message once, in order
    assert stats.kept_served >= 4
    assert stats.read_aheads_stale == stats.read_aheads_aborted == 0


async def test_a_read_ahead_whose_answers_do_not_come_is_aborted_at_its_deadline() -> None:
    async with _after_a_read_ahead(40) as world:
        cluster, service, bodies, got = world.cluster, world.service, world.bodies, world.got
        cluster.inject(GET, Fault.delay(30.0))  # the next read-ahead's GetMessage
        started = time.monotonic()
        await _take(service, got)  # served from the kept batch
        await _settled(service, timeout=RPC_S + 5)
        took = time.monotonic() - started
        assert RPC_S - 0.5 < took < RPC_S + 2, took
        stats = service.stats()
        assert (stats.read_aheads_aborted, stats.read_aheads_kept) == (1, 1)
        assert len(service._reader.kept) == 0
        # its end in Redis forgot the broker cursor: the next fetch registers where the
        # committed offset stands, at once (the mark is gone), and skips nothing
        registers = stats.broker_registers
        await _take(service, got, wait_ms=0)
        assert service.stats().broker_registers == registers + 1
        while len(got) < len(bodies):
            await _take(service, got)
    assert got == bodies


async def test_a_read_ahead_whose_mark_a_reset_voided_is_dropped() -> None:
    async with _after_a_read_ahead(40) as world:
        cluster, service, bodies, got = world.cluster, world.service, world.bodies, world.got
        cluster.inject(GET, Fault.delay(1.0))
        await _take(service, got)  # its read-ahead waits for its answer
        assert service._reader.ahead.running == 1
        await service.reset(SPEC.name, "earliest")
        await _settled(service)
        stats = service.stats()
        assert (stats.read_aheads_stale, stats.read_aheads_kept) == (1, 1)
        assert len(service._reader.kept) == 0  # the batch is dropped
        # the voided mark holds the partition until its deadline, then the group reads
        # from the start again
        again: list[str] = []
        await _take(service, again, wait_ms=int(RPC_S * 1000) + 3000)
        assert again[0] == bodies[0]
        while len(again) < len(bodies):
            await _take(service, again)
    assert got == bodies[:20]
    assert again == bodies


async def test_a_replica_closing_with_a_read_ahead_in_flight_leaves_no_task() -> None:
    async with _after_a_read_ahead(40) as world:
        cluster, service, bodies, got = world.cluster, world.service, world.bodies, world.got
        cluster.inject(GET, Fault.no_answer())
        await _take(service, got)
        await asyncio.sleep(0.1)
        assert len(_read_aheads(service)) == 1
        started = time.monotonic()
        await service.close()
        assert time.monotonic() - started < 2.5  # ended with the replica, not at RPC_S
        assert service.tasks.tasks == []
        assert service._reader.ahead.running == 0
        # another replica waits out the mark's deadline, then reads on from the committed
        # offset (the cursor the dead read left is unknown): nothing skipped
        async with running_service(cluster.master_addr, world.redis_url, SPEC, **ON) as other:
            await _take(other, got, wait_ms=int(RPC_S * 1000) + 3000)
            assert other.stats().broker_registers >= 1
            while len(got) < len(bodies):
                await _take(other, got)
    assert got == bodies


async def test_cancelled_fetches_leave_no_read_ahead_place_taken() -> None:
    async with FakeCluster(topics={"t": 2}, max_batch=3) as cluster, RedisServer() as redis:
        bodies = await produce_numbered(cluster.master_addr, "t", 600)
        async with running_service(cluster.master_addr, redis.url, SPEC, **ON) as service:
            got: list[str] = []
            query = FetchQuery(SPEC.name, client_id=None, wait_ms=200, max_messages=1)
            for step in range(150):
                await cancelled_fetch(service, query, step)
                await _settled(service)
                assert _read_aheads(service) == []
                await _take(service, got, wait_ms=int(RPC_S * 1000) + 3000)
            while len(got) < len(bodies):
                await _take(service, got, wait_ms=int(RPC_S * 1000) + 3000)
            await _settled(service)
            stats = service.stats()
    assert sorted(got, key=lambda b: int(b[1:])) == bodies  # each message once
    assert stats.kept_served > 0
    assert stats.read_aheads_kept > 0


async def test_a_fetch_cancelled_in_its_booking_sends_no_read_ahead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    booking = asyncio.Event()
    record_and_mark = LeaseStore.record_and_mark

    async def slow(self: LeaseStore, *args: Any) -> tuple[Reply, Reply]:
        booking.set()
        await asyncio.sleep(0.2)  # the round trip on its way: the fetch is cancelled here
        return await record_and_mark(self, *args)

    monkeypatch.setattr(LeaseStore, "record_and_mark", slow)
    async with FakeCluster(topics={"t": 1}, max_batch=10) as cluster, RedisServer() as redis:
        bodies = await produce_numbered(cluster.master_addr, "t", 30)
        async with running_service(cluster.master_addr, redis.url, SPEC, **ON) as service:
            fetch = asyncio.ensure_future(_fetch(service))
            await asyncio.wait_for(booking.wait(), 5)
            assert service._reader.ahead.running == 1  # its place is taken
            fetch.cancel()
            await asyncio.wait({fetch}, timeout=5)
            assert fetch.cancelled()
            await _settled(service)
            assert service._reader.ahead.running == 0  # and given back, nothing sent
            assert _read_aheads(service) == []
            monkeypatch.setattr(LeaseStore, "record_and_mark", record_and_mark)
            got: list[str] = []
            while len(got) < len(bodies):
                await _take(service, got)
            await _settled(service)
            assert service.stats().read_aheads_sent >= 1
    assert got == bodies


async def test_a_fetch_cancelled_after_its_mark_was_written_ends_the_mark_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The round trip that books and marks has written both when the fetch is cancelled: the
    mark is ended with nothing read, so the partition does not wait for the mark's deadline
    (its batch comes again at once, to a fetch that does not wait)."""
    booked = asyncio.Event()
    record_and_mark = LeaseStore.record_and_mark

    async def answered_late(self: LeaseStore, *args: Any) -> tuple[Reply, Reply]:
        replies = await record_and_mark(self, *args)
        booked.set()
        await asyncio.sleep(1)  # the answer on its way back: the fetch is cancelled here
        return replies

    monkeypatch.setattr(LeaseStore, "record_and_mark", answered_late)
    async with FakeCluster(topics={"t": 1}, max_batch=10) as cluster, RedisServer() as redis:
        bodies = await produce_numbered(cluster.master_addr, "t", 20)
        async with running_service(cluster.master_addr, redis.url, SPEC, **ON) as service:
            fetch = asyncio.ensure_future(_fetch(service))
            await asyncio.wait_for(booked.wait(), 5)
            fetch.cancel()
            await asyncio.wait({fetch}, timeout=5)
            assert fetch.cancelled()
            await _settled(service)
            assert service.stats().read_aheads_sent == 0
            monkeypatch.setattr(LeaseStore, "record_and_mark", record_and_mark)
            again = await _fetch(service, wait_ms=0)  # no mark left to wait for
            assert again.status == "ok", again
            got = [m.body.decode() for m in again.messages]
            assert got == bodies[:10]  # the cancelled fetch's batch, again


async def test_a_read_ahead_cancelled_before_its_first_step_gives_its_place_back() -> None:
    async with FakeCluster(topics={"t": 1}, max_batch=10) as cluster, RedisServer() as redis:
        await produce_numbered(cluster.master_addr, "t", 30)
        async with running_service(cluster.master_addr, redis.url, SPEC, **ON) as service:
            out = await _fetch(service)
            assert out.status == "ok"
            (task,) = _read_aheads(service)
            assert service._reader.ahead.running == 1
            service.tasks.cancel()  # what the engine's close does first, before the task ran
            await asyncio.wait({task}, timeout=5)
            assert task.cancelled()
            assert service._reader.ahead.running == 0
            assert service.stats().read_aheads_sent == 0
