"""``Producer.send_many`` on a connection that other callers filled: the call waits for room on
the connection itself (``Connection.start_when_room``), never a task per message; timeouts,
cancellation and close while it waits (FakeCluster, a real connection)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support.held_producer import count_spawns
from tubemq_aio import (
    ClientClosedError,
    Producer,
    SendOutcomeUnknownError,
    SendResult,
    WriteTimeoutError,
)
from tubemq_aio._io.connection import Connection
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault, wait_until

SEND = Method.BROKER_PRODUCER_SEND_MESSAGE
#: In-flight requests the broker connection takes (the other callers fill them all).
ROOM = 4


@pytest.fixture
async def cluster() -> AsyncIterator[FakeCluster]:
    async with FakeCluster(topics={"demo": 2}, brokers=1) as cluster:
        yield cluster


@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The messages a send_many handed to a task of their own (the single-send code)."""
    return count_spawns(monkeypatch)


async def started(cluster: FakeCluster, **options: Any) -> tuple[Producer, Connection]:
    """A started producer whose broker connection is open and takes ``ROOM`` requests."""
    producer = Producer(
        cluster.master_addr, topics=["demo"], telemetry=False, max_in_flight=ROOM, **options
    )
    await producer.start()
    await producer.send("demo", b"opens the connection")
    assert producer._rpc is not None
    port = cluster.brokers[0].address[1]
    conns = producer._rpc.pool.connections
    return producer, next(c for a, c in conns.items() if a.port == port)


async def fill(producer: Producer, conn: Connection, **send: Any) -> list[asyncio.Task[Any]]:
    """``ROOM`` other sends on the wire, unanswered (the cluster must hold their answers)."""
    others = [asyncio.ensure_future(producer.send("demo", b"other", **send)) for _ in range(ROOM)]
    await wait_until(lambda: conn.in_flight == ROOM, 10, "the other sends fill the connection")
    return others


async def blocked(cluster: FakeCluster) -> tuple[Producer, Connection, list[asyncio.Task[Any]]]:
    """A producer whose broker connection is full of sends that get no answer (for a minute)."""
    producer, conn = await started(cluster, close_grace=0.2)
    cluster.inject(SEND, Fault.no_answer(), times=ROOM)
    return producer, conn, await fill(producer, conn, timeout=60)


async def waiting_call(producer: Producer, conn: Connection) -> asyncio.Task[Any]:
    """A send_many of three messages, once its first waits for room on ``conn``."""
    call = asyncio.ensure_future(producer.send_many("demo", [b"a", b"b", b"c"]))
    await wait_until(lambda: conn.waiting == 1, 10, "the call waits for room")
    return call


async def test_the_call_waits_for_room_other_callers_free(
    cluster: FakeCluster, spawned: list[int]
) -> None:
    producer, conn = await started(cluster)
    cluster.inject(SEND, Fault.delay(0.3), times=ROOM)
    try:
        others = await fill(producer, conn)
        bodies = [f"m{i}".encode() for i in range(50)]
        results = await asyncio.wait_for(producer.send_many("demo", bodies), 30)
        assert all(isinstance(r, SendResult) for r in await asyncio.gather(*others))
        stored = {m.message_id: m.payload for m in cluster.messages("demo")}
        assert [stored[r.message_id] for r in results if isinstance(r, SendResult)] == bodies
        assert spawned == []
        assert (producer.sent, producer.failed, producer.in_flight) == (1 + ROOM + 50, 0, 0)
    finally:
        await producer.close()


async def test_no_room_within_the_timeout_is_a_write_timeout_per_message(
    cluster: FakeCluster, spawned: list[int]
) -> None:
    producer, conn, others = await blocked(cluster)
    try:
        results = await asyncio.wait_for(producer.send_many("demo", [b"a", b"b"], timeout=0.2), 30)
        assert [type(r) for r in results] == [WriteTimeoutError] * 2
        assert "was not sent" in str(results[0])
        assert spawned == []
        assert (producer.failed, producer.in_flight, conn.waiting) == (2, ROOM, 0)
        assert cluster.requests(SEND) == 1 + ROOM  # neither message was written
    finally:
        await producer.close()
    await asyncio.gather(*others, return_exceptions=True)


async def test_cancelled_while_waiting_for_room(cluster: FakeCluster, spawned: list[int]) -> None:
    producer, conn, others = await blocked(cluster)
    try:
        call = await waiting_call(producer, conn)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert spawned == []
        assert (producer.cancelled, producer.in_flight, conn.waiting) == (3, ROOM, 0)
        assert cluster.requests(SEND) == 1 + ROOM
    finally:
        await producer.close()
    await asyncio.gather(*others, return_exceptions=True)


async def test_close_while_waiting_for_room(cluster: FakeCluster, spawned: list[int]) -> None:
    producer, conn, others = await blocked(cluster)
    call = await waiting_call(producer, conn)
    await asyncio.wait_for(producer.close(), 30)
    results = await asyncio.wait_for(call, 30)
    assert [type(r) for r in results] == [ClientClosedError] * 3
    ended = await asyncio.gather(*others, return_exceptions=True)
    assert all(isinstance(r, ClientClosedError) for r in ended)
    assert spawned == []
    assert (producer.sent, producer.failed, producer.in_flight) == (1, ROOM + 3, 0)
    assert cluster.requests(SEND) == 1 + ROOM


async def test_the_timeout_bounds_the_whole_call_not_each_message(cluster: FakeCluster) -> None:
    """``timeout=`` is the call's deadline: before, each message had ``timeout`` of its own
    from when a window slot freed, so six messages behind a window of two took 3 x timeout
    (every one written, and each an unknown outcome)."""
    producer = Producer(
        cluster.master_addr, topics=["demo"], telemetry=False, max_in_flight_sends=2
    )
    async with producer:
        await producer.send("demo", b"publishes the topic")
        cluster.inject(SEND, Fault.no_answer(), times=None)
        async with asyncio.timeout(30):  # a hang guard only
            results = await producer.send_many("demo", [b"m"] * 6, timeout=0.3)
        # The two written by the deadline may be stored; the rest never left.
        assert [type(r) for r in results] == [SendOutcomeUnknownError] * 2 + [WriteTimeoutError] * 4
        assert "send_many" in str(results[2])
        assert cluster.requests(SEND) == 1 + 2
        assert (producer.sent, producer.failed, producer.in_flight) == (1, 6, 0)
