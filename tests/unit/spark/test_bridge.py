"""The Spark bridge on anyio blocking portals: results, timeouts, and nothing left running."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

import pytest

from tubemq_aio.errors import ClientClosedError, RequestTimeoutError
from tubemq_aio.spark._bridge import PortalThread, iterate_async, run_async


def portal_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("tubemq-spark")]


async def slow() -> None:
    await asyncio.sleep(30)


def test_run_async_returns_and_times_out() -> None:
    async def answer() -> int:
        return 42

    assert run_async(answer, 5) == 42
    with pytest.raises(RequestTimeoutError):
        run_async(slow, 0.05)
    assert portal_threads() == []


def test_iterate_async_closes_the_iterator_when_the_reader_stops_early() -> None:
    closed: list[bool] = []

    async def numbers() -> AsyncIterator[int]:
        try:
            for i in range(10):
                await asyncio.sleep(0)
                yield i
        finally:
            closed.append(True)

    assert list(iterate_async(numbers, 5)) == list(range(10))
    reader = iterate_async(numbers, 5)
    assert [next(reader), next(reader)] == [0, 1]
    reader.close()  # what Spark does with a partition it stops reading
    assert closed == [True, True]
    assert portal_threads() == []


def test_iterate_async_times_out_per_item() -> None:
    async def stuck() -> AsyncIterator[int]:
        yield 1
        await asyncio.sleep(30)
        yield 2

    reader = iterate_async(stuck, 0.1)
    assert next(reader) == 1
    with pytest.raises(RequestTimeoutError):
        next(reader)
    assert portal_threads() == []


def test_background_tasks_run_between_items() -> None:
    """Unlike a loop driven only while an item is pulled, the portal's loop keeps running."""
    ticks: list[int] = []

    async def with_heartbeat() -> AsyncIterator[int]:
        async def beat() -> None:
            while True:
                ticks.append(1)
                await asyncio.sleep(0.01)

        task = asyncio.ensure_future(beat())
        try:
            yield 1
            yield 2
        finally:
            task.cancel()

    reader = iterate_async(with_heartbeat, 5)
    assert next(reader) == 1
    before = len(ticks)
    # The driver thread does something else for a while (until the loop ticked, 10 s at most).
    idle = threading.Event()
    for _ in range(1000):
        if len(ticks) > before:
            break
        idle.wait(0.01)
    assert len(ticks) > before
    assert list(reader) == [2]


def test_portal_thread_calls_stops_and_refuses_afterwards() -> None:
    portal = PortalThread("tubemq-spark-test")
    cleaned: list[bool] = []

    async def answer() -> str:
        return "ok"

    async def cleanup() -> None:
        cleaned.append(True)

    assert portal.call(answer, 5) == "ok"
    with pytest.raises(RequestTimeoutError):
        portal.call(slow, 0.05)
    portal.stop(cleanup, 5)
    portal.stop(cleanup, 5)  # idempotent
    assert cleaned == [True]
    assert portal.closed
    with pytest.raises(ClientClosedError):
        portal.call(answer, 5)
    assert portal_threads() == []
