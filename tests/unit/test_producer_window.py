"""The producer's send window: at most ``max_in_flight_sends`` outstanding, FIFO, cancel-safe.

A broker that holds answers back cannot be made on demand, so the connection is a stand-in that
resolves sends when the test says so; everything above it is the real producer.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.support.held_producer import HeldConnection, settle, started_producer
from tubemq_aio import Producer, SendResult


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
