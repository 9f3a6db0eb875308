"""Start/close of every client against FakeCluster: cancellation, close during start, failed
starts, never-started consumers, ``send_nowait`` at close, sends that were never written.

Regression tests of issue 13 defects 1, 4, 5, 15 and 16 (each failed before the fix).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support.leak_checks import open_fds, wait_released
from tests.support.lifecycle_clients import CLIENTS, FAST, consumer, producer
from tubemq_aio import (
    ClientBalancedConsumer,
    ClientClosedError,
    Consumer,
    Producer,
    SendResult,
    SendWindowFullError,
    ServerError,
)
from tubemq_aio._client import AsyncLifecycle
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault, wait_until


def own_tasks() -> list[asyncio.Task[Any]]:
    """Tasks of any tubemq client still running on this loop."""
    return [t for t in asyncio.all_tasks() if t.get_name().startswith("tubemq-") and not t.done()]


@pytest.fixture(name="cluster")
async def cluster_fixture() -> AsyncIterator[FakeCluster]:
    """A started one-broker FakeCluster with topic ``t`` (3 partitions)."""
    async with FakeCluster(topics={"t": 3}) as cluster:
        yield cluster


def silence(cluster: FakeCluster, method: Method) -> None:
    """Leave every request of ``method`` unanswered until ``cluster.clear_faults()``."""
    cluster.inject(method, Fault.no_answer(), times=None)


def open_connections(cluster: FakeCluster) -> int:
    """Connections the cluster's nodes still have open."""
    nodes = [cluster.master.node, *(b.node for b in cluster.brokers)]
    return sum(len(n.connections) for n in nodes)


async def assert_fully_closed(client: AsyncLifecycle, cluster: FakeCluster) -> None:
    """No task of the client, its pool closed, no connection left at the server."""
    assert client.closed
    assert own_tasks() == []
    pool = client._pool
    assert pool is not None
    assert pool.closed
    assert pool.connections == {}
    assert pool.background_tasks == []
    await wait_until(lambda: open_connections(cluster) == 0, 5, "open_connections(cluster) == 0")
    assert own_tasks() == []


async def cancel_teardown_then_close(
    client: AsyncLifecycle, cluster: FakeCluster, close_method: Method
) -> None:
    """Cancel the teardown task while the close at the master hangs, then close again."""
    silence(cluster, close_method)
    closing = asyncio.ensure_future(client.close())
    await wait_until(
        lambda: cluster.requests(close_method) == 1, 5, "cluster.requests(close_method) == 1"
    )
    assert client._close_task is not None
    client._close_task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    cluster.clear_faults()
    await asyncio.wait_for(client.close(), 10)


@pytest.mark.parametrize("kind", sorted(CLIENTS))
async def test_cancelled_close_is_finished_by_a_second_close(
    cluster: FakeCluster, kind: str
) -> None:
    """Defect 1: close() cut short by a timeout leaves the teardown running; a second close()
    waits for it, and nothing of the client (task, connection) survives."""
    factory, _, close_method = CLIENTS[kind]
    client = factory(cluster.master_addr)
    await client.start()
    silence(cluster, close_method)  # the close at the master hangs until rpc_timeout
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.1):
            await client.close()
    await asyncio.wait_for(client.close(), 10)
    await assert_fully_closed(client, cluster)


@pytest.mark.parametrize("kind", sorted(CLIENTS))
async def test_cancelled_teardown_still_releases_everything(
    cluster: FakeCluster, kind: str
) -> None:
    """Defect 1: even the teardown task itself cancelled (loop shutting down) leaves no task
    and no connection, and close() afterwards returns."""
    factory, _, close_method = CLIENTS[kind]
    client = factory(cluster.master_addr)
    await client.start()
    await cancel_teardown_then_close(client, cluster, close_method)
    await assert_fully_closed(client, cluster)


@pytest.mark.parametrize("kind", sorted(CLIENTS))
async def test_close_during_start_stops_the_start(cluster: FakeCluster, kind: str) -> None:
    """Defect 16: close() during start() ends the start with ClientClosedError; no worker is
    spawned afterwards and the client stays closed."""
    factory, register, _ = CLIENTS[kind]
    client = factory(cluster.master_addr)
    silence(cluster, register)
    starting = asyncio.ensure_future(client.start())
    await wait_until(lambda: cluster.requests(register) == 1, 5, "cluster.requests(register) == 1")
    await asyncio.wait_for(client.close(), 5)
    with pytest.raises(ClientClosedError):
        await asyncio.wait_for(starting, 5)
    cluster.clear_faults()
    await asyncio.sleep(0.3)  # a start that went on would register and spawn by now
    assert cluster.requests(register) == 1
    await assert_fully_closed(client, cluster)
    with pytest.raises(ClientClosedError):
        await client.start()


@pytest.mark.parametrize("kind", sorted(CLIENTS))
async def test_a_failed_start_closes_the_client_for_good(cluster: FakeCluster, kind: str) -> None:
    """Defect 16: Producer and consumers alike: a failed start() releases everything and the
    client is closed (a second start() raises ClientClosedError)."""
    factory, register, _ = CLIENTS[kind]
    client = factory(cluster.master_addr, register_attempts=1)
    cluster.inject(register, Fault.error(400, "refused by the test"), times=None)
    with pytest.raises(ServerError, match="refused by the test"):
        await asyncio.wait_for(client.start(), 10)
    await assert_fully_closed(client, cluster)
    with pytest.raises(ClientClosedError):
        await client.start()


@pytest.mark.parametrize("kind", sorted(CLIENTS))
async def test_a_cancelled_start_closes_the_client(cluster: FakeCluster, kind: str) -> None:
    """Cancelling the caller of start() cancels the start and closes the client."""
    factory, register, _ = CLIENTS[kind]
    client = factory(cluster.master_addr)
    silence(cluster, register)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):
            await client.start()
    await asyncio.wait_for(client.close(), 5)
    await assert_fully_closed(client, cluster)


@pytest.mark.parametrize("kind", ["consumer", "cb-consumer"])
async def test_a_never_started_consumer_raises_instead_of_ending(kind: str) -> None:
    """Defect 15: ``async for`` and ``run()`` on a consumer never started raise."""
    factory, _, _ = CLIENTS[kind]
    client = factory("127.0.0.1:1")
    assert isinstance(client, Consumer | ClientBalancedConsumer)
    with pytest.raises(ClientClosedError, match="not started"):
        async for _ in client:
            pass
    if isinstance(client, Consumer):

        async def handler(message: object) -> None:
            pass

        with pytest.raises(ClientClosedError, match="not started"):
            await asyncio.wait_for(client.run(handler), 5)


async def test_a_closed_consumer_ends_its_loops_quietly(cluster: FakeCluster) -> None:
    """The other side of defect 15: close() ends ``async for`` and ``run()`` normally."""
    client = consumer(cluster.master_addr)
    await client.start()
    seen: list[object] = []

    async def loop() -> None:
        async for message in client:
            seen.append(message)

    async def handler(message: object) -> None:
        seen.append(message)

    tasks = [asyncio.ensure_future(loop()), asyncio.ensure_future(client.run(handler))]
    await asyncio.sleep(0.05)
    await client.close()
    await asyncio.wait_for(asyncio.gather(*tasks), 5)
    assert seen == []


async def test_send_nowait_is_bounded_by_the_send_window(cluster: FakeCluster) -> None:
    """Defect 5: send_nowait takes a window slot at once; a full window refuses at once."""
    async with producer(cluster.master_addr, max_in_flight_sends=2, close_grace=0.2) as client:
        silence(cluster, Method.BROKER_PRODUCER_SEND_MESSAGE)
        futures = [client.send_nowait("t", b"x") for _ in range(2)]
        assert client.in_flight == 2
        with pytest.raises(SendWindowFullError):
            client.send_nowait("t", b"y")
        sends = [t for t in client._supervisor.tasks if t.get_name().endswith("-send")]
        assert len(sends) == 2  # one task per accepted send, none for the refused one
    for future in futures:
        with pytest.raises(ClientClosedError):
            await future  # failed by close after close_grace, not cancelled
    assert client.failed == 2
    assert client.sent + client.failed + client.cancelled == 2


async def test_send_nowait_just_before_close_is_flushed(cluster: FakeCluster) -> None:
    """Defect 5: a send_nowait right before close() is sent within close_grace, counted."""
    client = producer(cluster.master_addr, close_grace=5.0)
    await client.start()
    future = client.send_nowait("t", b"last words")
    await client.close()
    assert isinstance(future.result(), SendResult)
    assert client.sent == 1
    assert cluster.requests(Method.BROKER_PRODUCER_SEND_MESSAGE) == 1


async def test_a_send_cancelled_by_its_caller_is_counted_as_cancelled(
    cluster: FakeCluster,
) -> None:
    """Defect 12: Producer.failed no longer counts cancellations (they have their own count)."""
    async with producer(cluster.master_addr) as client:
        silence(cluster, Method.BROKER_PRODUCER_SEND_MESSAGE)
        task = asyncio.ensure_future(client.send("t", b"x"))
        await wait_until(
            lambda: cluster.requests(Method.BROKER_PRODUCER_SEND_MESSAGE) == 1,
            5,
            "cluster.requests(Method.BROKER_PRODUCER_SEND_MESSAGE) == 1",
        )
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert (client.sent, client.failed, client.cancelled) == (0, 0, 1)
        cluster.clear_faults()


async def test_sends_never_written_are_retried(cluster: FakeCluster) -> None:
    """Defect 4: a send waiting for an in-flight slot when the connection dies was never
    written: it is retried (and stored), not failed as 'outcome unknown'."""
    from tubemq_aio import SendOutcomeUnknownError

    async with producer(cluster.master_addr, max_in_flight=1, send_retries=2) as client:
        silence(cluster, Method.BROKER_PRODUCER_SEND_MESSAGE)
        written = asyncio.ensure_future(client.send("t", b"written"))
        await wait_until(
            lambda: cluster.requests(Method.BROKER_PRODUCER_SEND_MESSAGE) == 1,
            5,
            "cluster.requests(Method.BROKER_PRODUCER_SEND_MESSAGE) == 1",
        )
        queued = asyncio.ensure_future(client.send("t", b"queued"))
        await asyncio.sleep(0.05)  # waits for the connection's only slot
        cluster.clear_faults()
        cluster.drop_connections()
        with pytest.raises(SendOutcomeUnknownError):
            await asyncio.wait_for(written, 5)
        result = await asyncio.wait_for(queued, 5)
        assert isinstance(result, SendResult)
        assert client.retried == 1
        assert cluster.requests(Method.BROKER_PRODUCER_SEND_MESSAGE) == 2


async def _crash() -> None:
    raise ZeroDivisionError("bug in a background task")


async def test_a_crashed_background_task_is_logged_and_surfaced(
    cluster: FakeCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Structure: a non-TubeMQError in a background task is logged with its traceback and the
    next call raises ClientClosedError caused by it (the producer heartbeat used to die
    silently)."""
    async with producer(cluster.master_addr) as client:
        assert client._session is not None
        client._session.heartbeat = _crash  # type: ignore[method-assign]
        await wait_until(
            lambda: client._supervisor.crash is not None, 5, "client._supervisor.crash is not None"
        )
        assert "tubemq-producer-heartbeat crashed" in caplog.text
        assert "ZeroDivisionError" in caplog.text
        with pytest.raises(ClientClosedError, match="ZeroDivisionError") as info:
            await client.send("t", b"x")
        assert isinstance(info.value.__cause__, ZeroDivisionError)
    async with consumer(cluster.master_addr) as reader:
        waiting = asyncio.ensure_future(reader.getmany(timeout=None))
        await asyncio.sleep(0.01)
        reader._supervisor.spawn(_crash(), "fetch-x")
        with pytest.raises(ClientClosedError, match="crashed"):
            await asyncio.wait_for(waiting, 5)


async def test_a_re_run_teardown_releases_a_shared_pool_once(cluster: FakeCluster) -> None:
    """Two producers on the loop-wide shared pool: re-running one producer's interrupted
    teardown must not take the other's reference to the pool."""
    first = Producer(cluster.master_addr, topics=["t"], **FAST)
    second = Producer(cluster.master_addr, topics=["t"], **FAST)
    await first.start()
    await second.start()
    assert first._pool is second._pool
    await cancel_teardown_then_close(first, cluster, Method.MASTER_PRODUCER_CLOSE)
    assert second._pool is not None
    assert not second._pool.closed
    assert isinstance(await second.send("t", b"still here"), SendResult)
    await second.close()
    assert second._pool.closed


@pytest.mark.parametrize("kind", sorted(CLIENTS))
async def test_start_close_cycles_with_random_cancellation_leak_nothing(
    cluster: FakeCluster, kind: str
) -> None:
    """Defect 1 at scale: start/close cycles with the start or the close cancelled at a random
    moment end with the task and file-descriptor counts they began with."""
    factory, _, _ = CLIENTS[kind]
    rng = random.Random(13)
    tasks_before = {t for t in asyncio.all_tasks() if not t.done()}
    fds_before = open_fds()
    for _ in range(15):
        client = factory(cluster.master_addr)
        delay = rng.uniform(0.0, 0.02)
        if rng.random() < 0.5:
            with contextlib.suppress(TimeoutError, ClientClosedError):
                async with asyncio.timeout(delay):
                    await client.start()
        else:
            await client.start()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await client.close()
        await asyncio.wait_for(client.close(), 10)
        assert own_tasks() == []
    await wait_until(lambda: open_connections(cluster) == 0, 5, "open_connections(cluster) == 0")
    assert {t for t in asyncio.all_tasks() if not t.done()} == tasks_before
    await wait_released(fds_before)


async def test_send_nowait_is_traced_like_send(cluster: FakeCluster) -> None:
    """A send started by send_nowait gets the same PRODUCER span as an awaited send."""
    from tubemq_aio.testing.otel import InMemoryTelemetry

    otel = InMemoryTelemetry()
    try:
        async with producer(cluster.master_addr, telemetry=otel.telemetry()) as client:
            await client.send("t", b"awaited")
            await client.send_nowait("t", b"nowait")
        assert [s.name for s in otel.spans()] == ["send t", "send t"]
    finally:
        otel.shutdown()
