"""Shared pieces of the streaming-consume tests: a gateway app served by an in-process uvicorn
on the FakeCluster and a real redis-server, a reader of Server-Sent Events, and streams kept
reading through a crash."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

import httpx
import uvicorn

from tests.support.gateway_failover_support import (
    Tally,
    assert_retriable_503,
    crash_mid_run,
    drain_backlog,
)
from tubemq_aio.gateway import GatewayConfig, create_app
from tubemq_aio.gateway.bootstrap import initialise_store
from tubemq_aio.gateway.engine.data import LeaseRef
from tubemq_aio.gateway.engine.port import ConsumeEngine, FetchOutcomeLike
from tubemq_aio.gateway.engine.service import ConsumeService
from tubemq_aio.gateway.engine.streams import BatchStream, StreamEvent
from tubemq_aio.gateway.errors import GatewayError, LeaseStaleError, StoreUnavailableError
from tubemq_aio.gateway.stream_config import StreamConfig
from tubemq_aio.testing import wait_until
from tubemq_aio.testing._ports import allocate_ports

ADMIN_KEY = "k-stream-admin-1"
READER_KEY = "k-stream-reader-1"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
READER = {"Authorization": f"Bearer {READER_KEY}"}


def stream_config(
    masters: str, redis_url: str, groups: list[dict[str, Any]], **extra: Any
) -> GatewayConfig:
    """A gateway config for ``groups`` with an admin key and a reader key (consume:*)."""
    return GatewayConfig.from_mapping(
        {
            "masters": masters,
            "redis": redis_url,
            "secret": "stream-secret-0123456789",
            "produce_topics": sorted({t for g in groups for t in g["topics"]}),
            "groups": groups,
            "keys": [
                {
                    "key": ADMIN_KEY,
                    "name": "admin",
                    "scopes": ["produce:*", "consume:*", "admin:*"],
                },
                {"key": READER_KEY, "name": "reader", "scopes": ["consume:*"]},
            ],
            **extra,
        }
    )


@contextlib.asynccontextmanager
async def serving(config: GatewayConfig) -> AsyncIterator[str]:
    """The gateway app of ``config`` served on a loopback port by an in-process uvicorn (the
    store initialised first); yields its base URL and stops it after."""
    await initialise_store(config)
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(config), host="127.0.0.1", port=allocate_ports(1)[0],
            log_level="warning", lifespan="on", timeout_graceful_shutdown=5,
        )
    )  # fmt: skip
    task = asyncio.create_task(server.serve())
    try:
        await wait_until(lambda: server.started, 30, "the gateway serves")
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 30)


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, Any]]:
    """The ``(event, parsed data)`` pairs of a ``text/event-stream`` response, in order
    (comment lines and ``retry:`` skipped)."""
    event = "message"
    data: list[str] = []
    async for line in response.aiter_lines():
        if line == "":
            if data:
                yield event, json.loads("\n".join(data))
            event, data = "message", []
        elif line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            data.append(line[6:])


class EventReader:
    """Reads a stream's events in a task of its own into a queue, so that a test can wait for
    the next one with a deadline without cutting the read (and so the connection) short."""

    def __init__(self, response: httpx.Response) -> None:
        self.queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.task = asyncio.create_task(self._read(response))

    async def _read(self, response: httpx.Response) -> None:
        with contextlib.suppress(httpx.HTTPError):  # the server went away: no more events
            async for item in sse_events(response):
                await self.queue.put(item)

    async def next(self, timeout: float) -> tuple[str, Any]:
        """The next event, within ``timeout`` seconds (TimeoutError otherwise)."""
        async with asyncio.timeout(timeout):
            return await self.queue.get()

    async def aclose(self) -> None:
        """Stop reading."""
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


def values(batch: Mapping[str, Any]) -> list[str]:
    """The message values of a ``batch`` event."""
    return [m["value"] for m in batch["messages"]]


async def stream_through_crash(
    replicas: Sequence[ConsumeService],
    group: str,
    bodies: Sequence[str],
    crash: Callable[[], Awaitable[object]],
    *,
    lease_ms: int,
    window: int = 2,
) -> Tally:
    """One stream per replica (the engine's :class:`BatchStream`, as the route runs it), each
    batch acked through the next replica after 50 ms of work; once a third of ``bodies`` was
    delivered, ``crash()`` runs. Returns the tally once every body was delivered and the
    group's backlog is zero again."""
    tally = Tally()
    settings = StreamConfig(window=window, probe_interval_ms=100, wait_ms=200)

    def retriable(exc: Exception) -> bool | None:
        # as the route classifies: a retriable gateway error is told and the stream goes on
        if isinstance(exc, StoreUnavailableError):
            assert_retriable_503(exc)
            tally.unavailable += 1
        if isinstance(exc, GatewayError) and exc.retriable:
            return True
        return None

    async def read(i: int, service: ConsumeService) -> None:
        stream = BatchStream(
            cast(ConsumeEngine, service),
            functools.partial(_fetch, service, group, lease_ms, f"stream-{i}"),
            group, None, f"stream-{i}", window, lease_ms, settings,
        )  # fmt: skip
        runner = asyncio.create_task(stream.run(retriable))
        acker = replicas[(i + 1) % len(replicas)]
        try:
            async with asyncio.timeout(180):  # the failover (seconds to a minute) included
                await take(stream, runner, acker)
        except TimeoutError:
            missing = sorted(set(bodies) - set(tally.deliveries))
            raise AssertionError(
                f"stream {i}: {len(missing)} bodies never came (e.g. {missing[:5]}); held "
                f"{sorted(stream.held)}, queued {stream.events.qsize()}, tally {tally}"
            ) from None
        finally:
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)

    async def take(stream: BatchStream, runner: asyncio.Task[None], acker: ConsumeService) -> None:
        """Count and ack the stream's batches until every body came (through either stream:
        the condition is checked every half second, not only when this stream has news)."""
        get: asyncio.Future[StreamEvent] | None = None
        try:
            while not set(bodies) <= set(tally.deliveries):
                get = get or asyncio.ensure_future(stream.events.get())
                waiting: set[asyncio.Future[Any]] = {get, runner}
                await asyncio.wait(waiting, timeout=0.5, return_when=asyncio.FIRST_COMPLETED)
                if not get.done():
                    if runner.done():
                        runner.result()  # the stream ended: its error, if any, fails the test
                        raise AssertionError("the stream ended before every body came")
                    continue
                event, get = get.result(), None
                await handle(event, acker)
        finally:
            if get is not None:
                get.cancel()

    async def handle(event: StreamEvent, acker: ConsumeService) -> None:
        """Count a batch event and ack its lease after 50 ms of work."""
        if event.kind != "batch":
            return
        assert event.outcome is not None
        lease = event.outcome.lease
        assert lease is not None
        tally.deliveries.update(m.body.decode() for m in event.outcome.messages)
        tally.redelivered_batches += bool(lease.redelivery)
        await asyncio.sleep(0.05)
        try:
            await acker.settle(cast(LeaseRef, lease), "ack")
            tally.acked += 1
        except StoreUnavailableError as exc:
            assert_retriable_503(exc)
            tally.unavailable += 1
        except LeaseStaleError:
            tally.stale += 1

    tasks = [asyncio.create_task(read(i, s)) for i, s in enumerate(replicas)]
    await crash_mid_run(tasks, tally, bodies, crash)
    await drain_backlog(replicas[0], group, tally, lease_ms=lease_ms)
    return tally


async def _fetch(
    service: ConsumeService, group: str, lease_ms: int, holder: str, wait_ms: int
) -> FetchOutcomeLike:
    return await service.fetch(
        group, client_id=None, wait_ms=wait_ms, lease_ms=lease_ms, holder=holder, max_messages=10
    )
