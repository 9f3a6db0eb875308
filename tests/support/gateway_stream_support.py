"""Shared pieces of the streaming-consume tests: a gateway app served by an in-process uvicorn
on the FakeCluster and a real redis-server, a reader of Server-Sent Events, and streams kept
reading through a crash."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal

import httpx
import uvicorn
from starlette.types import ASGIApp

from tubemq_aio.gateway import GatewayConfig, create_app
from tubemq_aio.gateway.bootstrap import initialise_store
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
    async with served(create_app(config)) as url:
        yield url


@contextlib.asynccontextmanager
async def served(
    app: ASGIApp, http: Literal["auto", "h11", "httptools"] = "auto"
) -> AsyncIterator[str]:
    """``app`` served on a loopback port by an in-process uvicorn with the HTTP implementation
    ``http`` (``auto``, ``h11`` or ``httptools``); yields its base URL and stops it after."""
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host="127.0.0.1",
            port=allocate_ports(1)[0],
            http=http,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=5,
        )
    )
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


async def drained_lag_over_http(
    client: httpx.AsyncClient, group: str, headers: Mapping[str, str], timeout: float = 30.0
) -> dict[str, Any]:
    """The lag answer of ``group`` once it is 0, fetching meanwhile (and requiring that no
    fetch delivers anything: every batch was acked before).

    The partitions of a broker store share one index, so a partition read to its last message
    still lags by the records of the store's other partitions appended after it, until a fetch
    scans them (an empty scan commits at once); the HTTP counterpart of ``drained_lag``.

    Raises:
        AssertionError: a fetch delivered messages (a batch was left unacked).
        TimeoutError: the lag stayed above 0 for ``timeout`` seconds.
    """
    async with asyncio.timeout(timeout):
        while True:
            lag: dict[str, Any] = (
                await client.get(f"/v1/groups/{group}/lag", headers=headers)
            ).json()
            if int(lag["total_lag_bytes"]) == 0:
                return lag
            got = (
                await client.post(
                    f"/v1/groups/{group}/fetch", json={"wait_ms": 200}, headers=headers
                )
            ).json()
            assert got["status"] != "ok", got
