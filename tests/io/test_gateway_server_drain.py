""":class:`GatewayServer` (what ``tubemq-gateway`` runs with one worker) drains the gateway as
its shutdown begins: a long poll answers at once with what it has, a stream ends with
``end`` ``{"reason": "shutdown"}`` and its batch is released, and the server stops well within
its graceful-shutdown time. In process, on a real redis-server and the FakeCluster."""

from __future__ import annotations

import asyncio
import time

import httpx
import uvicorn

from tests.support.gateway_failover_support import produce_numbered
from tests.support.gateway_stream_support import READER, EventReader, stream_config, values
from tubemq_aio.gateway import create_app
from tubemq_aio.gateway.bootstrap import initialise_store
from tubemq_aio.gateway.server import GatewayServer
from tubemq_aio.testing import FakeCluster, RedisServer, wait_until
from tubemq_aio.testing._ports import allocate_ports

GRACE = 20  # seconds uvicorn would wait for open responses without the drain


async def test_shutdown_answers_long_polls_and_ends_streams_at_once(
    redis_server: RedisServer,
) -> None:
    async with FakeCluster(topics={"t": 1}, max_batch=3) as cluster:
        bodies = await produce_numbered(cluster.master_addr, "t", 3)
        groups = [{"name": "gs", "topics": ["t"], "lease_ms": 60_000}]
        config = stream_config(cluster.master_addr, redis_server.url, groups)
        await initialise_store(config)
        port = allocate_ports(1)[0]
        server = GatewayServer(
            uvicorn.Config(
                create_app(config),
                host="127.0.0.1",
                port=port,
                log_level="warning",
                timeout_graceful_shutdown=GRACE,
            )
        )
        serving = asyncio.create_task(server.serve())
        await wait_until(lambda: server.started, 30, "the gateway serves")
        url = f"http://127.0.0.1:{port}"
        async with (
            httpx.AsyncClient(base_url=url, timeout=60) as client,
            client.stream("GET", "/v1/groups/gs/stream", headers=READER) as response,
        ):
            events = EventReader(response)
            kind, batch = await events.next(20)
            assert (kind, values(batch)) == ("batch", bodies)
            # the one partition is the stream's: a long poll waits
            poll = asyncio.create_task(
                client.post("/v1/groups/gs/fetch", json={"wait_ms": 30_000}, headers=READER)
            )
            await asyncio.sleep(0.5)
            assert not poll.done()
            started = time.monotonic()
            server.should_exit = True
            answer = await asyncio.wait_for(poll, 10)
            assert answer.status_code == 200, answer.text
            assert answer.json()["status"] == "busy", answer.text
            assert await events.next(10) == ("end", {"reason": "shutdown"})
            await asyncio.wait_for(serving, 10)
            assert time.monotonic() - started < GRACE / 2
            await events.aclose()
        # the stream's unacked batch was released, not left to its 60 s lease
        server = GatewayServer(
            uvicorn.Config(create_app(config), host="127.0.0.1", port=port, log_level="warning")
        )
        serving = asyncio.create_task(server.serve())
        try:
            await wait_until(lambda: server.started, 30, "the gateway serves again")
            async with httpx.AsyncClient(base_url=url, timeout=30) as client:
                got = (await client.post("/v1/groups/gs/fetch", json={}, headers=READER)).json()
                assert got["status"] == "ok", got
                assert [m["value"] for m in got["messages"]] == bodies
                assert got["lease"]["redelivery"] == 0
        finally:
            server.should_exit = True
            await asyncio.wait_for(serving, 30)
