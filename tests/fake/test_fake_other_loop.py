"""A client used from an event loop other than the one that started it (a client made at module
level, started in one ``asyncio.run`` and used in the next) says so with a
:class:`ClientClosedError`, instead of a raw ``RuntimeError: Event loop is closed`` and "Future
exception was never retrieved" noise; ``close()`` from the next loop marks it closed (what it
held went with its loop), and ``close()`` from another thread's loop while the first one runs
is refused (its tasks and connections live there)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator

import pytest

from tubemq_aio import ClientBalancedConsumer, ClientClosedError, Consumer, Producer
from tubemq_aio.testing import FakeCluster

pytestmark = pytest.mark.timeout(60)
OTHER_LOOP = "started in another event loop"


@pytest.fixture
def master() -> Iterator[str]:
    """A FakeCluster serving from a thread of its own, so that loops may come and go here."""
    ready, stop, box = threading.Event(), threading.Event(), {}

    async def serve() -> None:
        async with FakeCluster(topics={"demo": 1}) as cluster:
            box["addr"] = cluster.master_addr
            ready.set()
            await asyncio.to_thread(stop.wait)

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(30)
    yield box["addr"]
    stop.set()
    thread.join(30)


def test_calls_from_the_next_loop_say_so_and_close_just_marks_closed(master: str) -> None:
    producer = Producer(master, topics=["demo"])
    consumer = Consumer(master, group="g1", topics=["demo"])
    balanced = ClientBalancedConsumer(master, group="g2", topics=["demo"])

    async def start() -> None:
        await producer.start()
        await producer.send("demo", b"first")
        await consumer.start()
        await balanced.start()

    asyncio.run(start())
    calls: dict[str, Callable[[], Awaitable[object]]] = {
        "send": lambda: producer.send("demo", b"x"),
        "send with attributes": lambda: producer.send("demo", b"x", attributes={"k": "v"}),
        "send_many": lambda: producer.send_many("demo", [b"x"]),
        "publish": lambda: producer.publish("demo"),
        "getmany": lambda: consumer.getmany(timeout=0.1),
        "commit": consumer.commit,
        "partitions": balanced.partitions,
        "start": producer.start,
    }

    async def use() -> None:
        for name, call in calls.items():
            with pytest.raises(ClientClosedError, match=OTHER_LOOP):
                await asyncio.wait_for(call(), 5)
            assert not producer.closed, name
        with pytest.raises(ClientClosedError, match=OTHER_LOOP):
            producer.send_nowait("demo", b"x")
        for client in (producer, consumer, balanced):
            await asyncio.wait_for(client.close(), 5)  # no error: its loop is gone
            assert client.closed
        with pytest.raises(ClientClosedError, match="is closed"):
            await producer.send("demo", b"x")

    asyncio.run(use())


def test_close_from_another_thread_while_the_first_loop_runs_is_refused(master: str) -> None:
    producer = Producer(master, topics=["demo"])
    started, done = threading.Event(), threading.Event()

    async def own() -> None:
        await producer.start()
        started.set()
        await asyncio.to_thread(done.wait)
        await producer.close()

    thread = threading.Thread(target=asyncio.run, args=(own(),), daemon=True)
    thread.start()
    assert started.wait(30)
    try:

        async def other() -> None:
            with pytest.raises(ClientClosedError, match=OTHER_LOOP):
                await producer.close()
            assert not producer.closed

        asyncio.run(other())
    finally:
        done.set()
        thread.join(30)
    assert producer.closed
