"""The producer's send window: at most ``max_in_flight_sends`` outstanding, FIFO, cancel-safe.

A broker that holds answers back cannot be made on demand, so the connection is a stand-in that
resolves sends when the test says so; everything above it is the real producer.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tubemq_aio import Producer, SendResult
from tubemq_aio._io.rpc_client import RpcClient
from tubemq_aio.producer._session import ProducerSession
from tubemq_aio.protocol.pb import BrokerService_pb2 as broker_pb
from tubemq_aio.protocol.producer_meta import HeartbeatResponse, RegisterResponse
from tubemq_aio.protocol.producer_rpc import SendRequestEncoder

ANSWER = broker_pb.SendMessageResponseB2P(
    success=True, errCode=200, errMsg="OK", messageId=7, appendTime=1, appendOffset=0
).SerializeToString()


class HeldConnection:
    """Answers a send only when the test releases it."""

    def __init__(self) -> None:
        self.waiting: list[asyncio.Future[bytes]] = []

    async def call(self, payload: bytes, timeout: float) -> bytes:
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.waiting.append(fut)
        return await fut

    is_closed = False

    def start_parts(
        self, parts: object, size: int, timeout: float
    ) -> tuple[HeldConnection, int, asyncio.Future[bytes]]:
        """The producer's hot path (``Connection.start_parts``): the request is sent at once."""
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.waiting.append(fut)
        return self, len(self.waiting), fut

    def abandon(self, serial: int) -> None:
        """The caller stopped waiting; its future stays in ``waiting`` (released harmlessly)."""

    def release(self, n: int) -> None:
        for fut in self.waiting[:n]:
            if not fut.done():
                fut.set_result(ANSWER)
        self.waiting = self.waiting[n:]


class OnePool:
    def __init__(self, conn: HeldConnection) -> None:
        self.conn = conn

    def ready(self, address: object) -> HeldConnection:
        return self.conn


def started_producer(window: int, conn: HeldConnection, **options: Any) -> Producer:
    producer = Producer("127.0.0.1:1", max_in_flight_sends=window, **options)
    session = ProducerSession(producer.config, None)  # type: ignore[arg-type]
    session.metadata.apply_register(RegisterResponse(True, 200, "OK", 5, ("1:127.0.0.1:8123",)), 0)
    session.metadata.apply_heartbeat(
        HeartbeatResponse(True, 200, "OK", 5, topic_infos=("t#1:3:1#",)), 0
    )
    session._published["t"] = None
    producer._session = session
    producer._rpc = RpcClient(OnePool(conn))  # type: ignore[arg-type]
    producer._encoder = SendRequestEncoder(session.client_id, 0)
    producer._started = True
    return producer


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_window_bounds_outstanding_sends_and_is_fifo() -> None:
    conn = HeldConnection()
    producer = started_producer(3, conn)
    order: list[int] = []

    async def send(i: int) -> None:
        await producer.send("t", b"x")
        order.append(i)

    tasks = [asyncio.ensure_future(send(i)) for i in range(10)]
    await settle()
    assert len(conn.waiting) == 3
    assert producer.in_flight == 3
    conn.release(2)
    await settle()
    assert len(conn.waiting) == 3
    assert order == [0, 1]
    while conn.waiting:
        conn.release(3)
        await settle()
    await asyncio.gather(*tasks)
    assert sorted(order) == list(range(10))
    assert producer.in_flight == 0


async def test_cancelled_waiters_do_not_leak_slots() -> None:
    conn = HeldConnection()
    producer = started_producer(1, conn)
    first = asyncio.ensure_future(producer.send("t", b"a"))
    waiters = [asyncio.ensure_future(producer.send("t", b"b")) for _ in range(5)]
    await settle()
    for task in waiters[:4]:
        task.cancel()
    await settle()
    conn.release(1)
    await settle()
    assert len(conn.waiting) == 1  # the surviving waiter got the slot
    conn.release(1)
    await asyncio.gather(first, waiters[4])
    for task in waiters[:4]:
        with pytest.raises(asyncio.CancelledError):
            await task
    assert producer.in_flight == 0
    again = await asyncio.wait_for(asyncio.ensure_future(_send_released(producer, conn)), 5)
    assert again.message_id == 7


async def _send_released(producer: Producer, conn: HeldConnection) -> SendResult:
    task = asyncio.ensure_future(producer.send("t", b"c"))
    await settle()
    conn.release(1)
    return await task
