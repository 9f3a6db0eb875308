"""``GET /v1/groups/{g}/stream`` against clients that misbehave, on a real uvicorn, a real
redis-server and the FakeCluster: a client that stops reading (its socket full), one that
resets the connection in the middle of an event, and an offsets reset while the stream holds a
lease. Each time the stream's batches must come back at once (released, ``redelivery`` 0),
never skipped."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections import Counter
from typing import Any

import httpx

from tests.support.gateway_failover_support import produce_numbered
from tests.support.gateway_stream_support import (
    ADMIN,
    READER,
    READER_KEY,
    EventReader,
    serving,
    stream_config,
    values,
)
from tubemq_aio import Producer
from tubemq_aio.testing import FakeCluster, RedisServer, wait_until

LONG_LEASE = 60_000


def _groups() -> list[dict[str, Any]]:
    return [{"name": "gs", "topics": ["t"], "lease_ms": LONG_LEASE}]


async def _raw_stream(
    url: str, rcvbuf: int | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection that asked for the stream of ``gs`` and has read nothing yet (the server
    runs on this event loop: the test's socket must not block it)."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:  # before connect: the window the client advertises stays small
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
    reader, writer = await asyncio.open_connection(sock=sock)
    writer.write(
        f"GET /v1/groups/gs/stream HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {READER_KEY}\r\n\r\n".encode()
    )
    await writer.drain()
    return reader, writer


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close the connection with a TCP reset (SO_LINGER 0), as a crashed client does."""
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def _released(client: httpx.AsyncClient, expected: list[str]) -> bool:
    """Whether a fetch now gets ``expected`` again, released (``redelivery`` 0)."""
    r = await client.post("/v1/groups/gs/fetch", json={"max_messages": 10_000}, headers=READER)
    got = r.json()
    if got["status"] != "ok":
        return False
    assert [m["value"] for m in got["messages"]] == expected, got
    assert got["lease"]["redelivery"] == 0, got
    return True


async def test_a_client_that_stops_reading_has_its_batches_released(
    redis_server: RedisServer,
) -> None:
    big = "x" * 400_000
    async with FakeCluster(topics={"t": 4}, max_batch=10) as cluster:
        async with Producer(cluster.master_addr, topics=["t"]) as producer:
            for i in range(60):  # 24 MB: more than the socket buffers on both sides hold
                await producer.send("t", f"{i:02d}{big}".encode())
        config = stream_config(
            cluster.master_addr,
            redis_server.url,
            _groups(),
            stream={"window": 4, "heartbeat_seconds": 0.3},
        )
        nacked: Counter[str] = Counter()  # the probes' own nacks, by partition
        async with serving(config) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
            _, writer = await _raw_stream(url, rcvbuf=4096)
            try:
                # the stream leases every partition, then its writes stop moving
                await wait_until(lambda: _fetch_status(client, "busy", nacked), 20, "all leased")
                started = time.monotonic()
                # its unacked batches come back once it gave up on the client (four
                # heartbeats without a byte taken), long before their 60 s lease
                await wait_until(
                    lambda: _fetch_status(client, "ok", nacked),
                    20,
                    "the stalled stream's batches",
                )
                assert time.monotonic() - started < 20
            finally:
                writer.transport.abort()


async def _fetch_status(client: httpx.AsyncClient, status: str, nacked: Counter[str]) -> bool:
    """Whether a fetch answers ``status``; a batch it gets is nacked at once (counted in
    ``nacked``): a probe that beat the stream to a partition raised that batch's redelivery
    count itself, which the stream's release then keeps."""
    r = await client.post("/v1/groups/gs/fetch", json={"max_messages": 1}, headers=READER)
    got = r.json()
    if got["status"] == "ok":
        lease = got["lease"]
        # released, not expired: only the probes' own nacks count
        assert lease["redelivery"] == nacked[lease["partition_key"]], (got, nacked)
        await client.post(f"/v1/leases/{lease['token']}/nack", headers=READER)
        nacked[lease["partition_key"]] += 1
    return bool(got["status"] == status)


async def test_a_connection_reset_in_the_middle_of_an_event_releases_the_batch(
    redis_server: RedisServer,
) -> None:
    async with FakeCluster(topics={"t": 1}, max_batch=5) as cluster:
        bodies = await produce_numbered(cluster.master_addr, "t", 5)
        config = stream_config(cluster.master_addr, redis_server.url, _groups())
        async with serving(config) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
            reader, writer = await _raw_stream(url)
            seen = b""
            async with asyncio.timeout(20):
                while b"event: batch\ndata: {" not in seen:
                    chunk = await reader.read(64)  # a few bytes at a time: cut the event
                    assert chunk, seen
                    seen += chunk
            _reset(writer)
            started = time.monotonic()
            await wait_until(lambda: _released(client, bodies), 15, "the batch is released")
            assert time.monotonic() - started < 15  # not after its 60 s lease


async def test_an_offsets_reset_under_a_stream_delivers_from_the_new_offset(
    redis_server: RedisServer,
) -> None:
    async with FakeCluster(topics={"t": 1}, max_batch=3) as cluster:
        bodies = await produce_numbered(cluster.master_addr, "t", 3)
        config = stream_config(
            cluster.master_addr,
            redis_server.url,
            _groups(),
            stream={"window": 1, "probe_interval_ms": 200},
        )
        async with (
            serving(config) as url,
            httpx.AsyncClient(base_url=url, timeout=30) as client,
            client.stream("GET", "/v1/groups/gs/stream", headers=READER) as response,
        ):
            events = EventReader(response)
            kind, first = await events.next(20)
            assert (kind, values(first)) == ("batch", bodies)
            r = await client.post(
                "/v1/groups/gs/offsets/reset", json={"to": "earliest"}, headers=ADMIN
            )
            assert r.status_code == 200, r.text
            # the window (1) is full with a lease the reset ended: the stream sees it gone
            # and reads again from the new offset, without an ack
            kind, again = await events.next(20)
            assert (kind, values(again)) == ("batch", bodies), again
            assert again["lease"]["redelivery"] == 0
            # the old token is stale; the new one commits
            r = await client.post(f"/v1/leases/{first['lease']['token']}/ack", headers=READER)
            assert r.status_code == 409, r.text
            assert r.json()["error"]["code"] == "lease_stale"
            r = await client.post(f"/v1/leases/{again['lease']['token']}/ack", headers=READER)
            assert r.json() == {"result": "acked"}, r.text
            await events.aclose()


async def test_two_streams_on_one_group_share_it_without_duplicates(
    redis_server: RedisServer,
) -> None:
    async with FakeCluster(topics={"t": 3}, max_batch=4) as cluster:
        bodies = await produce_numbered(cluster.master_addr, "t", 48)
        config = stream_config(
            cluster.master_addr, redis_server.url, _groups(), stream={"window": 1}
        )
        async with serving(config) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
            seen: list[str] = []

            async def consume(headers: dict[str, str]) -> None:
                async with client.stream("GET", "/v1/groups/gs/stream", headers=headers) as r:
                    events = EventReader(r)
                    try:
                        while len(seen) < len(bodies):
                            try:
                                kind, data = await events.next(0.5)
                            except TimeoutError:
                                continue  # the other stream holds what is left
                            assert kind == "batch", data
                            seen.extend(values(data))
                            token = data["lease"]["token"]
                            ack = await client.post(f"/v1/leases/{token}/ack", headers=headers)
                            assert ack.json() == {"result": "acked"}, ack.text
                    finally:
                        await events.aclose()

            async with asyncio.timeout(60):
                done, pending = await asyncio.wait(
                    [asyncio.create_task(consume(h)) for h in (READER, ADMIN)],
                    return_when=asyncio.FIRST_EXCEPTION,
                )
                for task in pending:
                    task.cancel()
                for task in done:
                    task.result()
            assert sorted(seen) == sorted(bodies)  # every message once: none twice


async def test_a_stream_refuses_the_client_ids_a_fetch_refuses(redis_server: RedisServer) -> None:
    # the stream took any 1-200 characters, so a broadcast client could read (and keep state
    # in Redis) under an id whose lag and fetch routes answer 422
    async with FakeCluster(topics={"t": 1}) as cluster:
        groups = [{"name": "gb", "topics": ["t"], "mode": "broadcast"}]
        config = stream_config(cluster.master_addr, redis_server.url, groups)
        async with serving(config) as url, httpx.AsyncClient(base_url=url, timeout=30) as c:
            for client_id in ("a b", "c" * 129, "\u00e9", "a|b", "a/b"):
                fetched = await c.post(
                    "/v1/groups/gb/fetch", json={"client_id": client_id}, headers=READER
                )
                assert fetched.status_code == 422, (client_id, fetched.text)
                query = {"client_id": client_id}
                async with c.stream(
                    "GET", "/v1/groups/gb/stream", params=query, headers=READER
                ) as r:
                    assert r.status_code == 422, client_id  # not a stream that never ends
                    assert r.headers["content-type"] == "application/json", client_id
            ok = "ui-1.a:b_C-9" + "c" * 116  # 128 characters of the allowed alphabet
            async with c.stream(
                "GET", "/v1/groups/gb/stream", params={"client_id": ok}, headers=READER
            ) as response:
                assert response.status_code == 200


async def test_a_stream_whose_client_reads_nothing_does_not_dead_letter_its_batch(
    redis_server: RedisServer,
) -> None:
    async with FakeCluster(topics={"t": 1, "dead": 1}, max_batch=3) as cluster:
        await produce_numbered(cluster.master_addr, "t", 3)
        groups: list[dict[str, Any]] = [
            {
                "name": "gs",
                "topics": ["t"],
                "lease_ms": 300,
                "lease_ms_min": 100,
                "max_redeliveries": 2,
                "dlq_topic": "dead",
            },
            {"name": "gd", "topics": ["dead"]},
        ]
        config = stream_config(cluster.master_addr, redis_server.url, groups)
        async with serving(config) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
            _, writer = await _raw_stream(url)  # a small batch: the socket never fills
            try:
                await asyncio.sleep(4)  # about a dozen of its leases
                r = await client.post("/v1/groups/gd/fetch", json={"wait_ms": 500}, headers=ADMIN)
                assert r.json()["status"] != "ok", r.text  # nothing was dead-lettered
                # the stream ended at its batch's first lease: the redelivery count says once
                lag = (await client.get("/v1/groups/gs/lag", headers=ADMIN)).json()
                assert lag["partitions"][0]["redelivery"] <= 1, lag
            finally:
                writer.transport.abort()
