"""``GET /v1/groups/{g}/stream`` on a real uvicorn, a real redis-server and the FakeCluster:
every message flows as Server-Sent Events, the window of unacked batches bounds the flow, acks
through this replica or another one free it, and a client that leaves gets its unacked batches
released for redelivery at once (not after the lease)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from tests.support.gateway_failover_support import produce_numbered
from tests.support.gateway_stream_support import (
    ADMIN,
    READER,
    EventReader,
    serving,
    stream_config,
    values,
)
from tubemq_aio.testing import FakeCluster, RedisServer, wait_until

LONG_LEASE = 60_000


def _groups(**extra: Any) -> list[dict[str, Any]]:
    return [{"name": "gs", "topics": ["t"], "lease_ms": LONG_LEASE, **extra}]


async def test_every_message_flows_and_the_window_waits_for_acks(
    redis_server: RedisServer,
) -> None:
    async with FakeCluster(topics={"t": 3}, max_batch=4) as cluster:
        bodies = await produce_numbered(cluster.master_addr, "t", 60)
        config = stream_config(
            cluster.master_addr,
            redis_server.url,
            _groups(),
            stream={"window": 2, "probe_interval_ms": 200},
        )
        async with (
            serving(config) as url,
            httpx.AsyncClient(base_url=url, timeout=30) as client,
            client.stream("GET", "/v1/groups/gs/stream", headers=READER) as response,
        ):
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            events = EventReader(response)
            first = [await events.next(20) for _ in range(2)]
            assert [kind for kind, _ in first] == ["batch", "batch"]
            # the window (2) is full: nothing more comes until an ack
            try:
                extra = await events.next(1.5)
                raise AssertionError(f"a third batch came with the window full: {extra}")
            except TimeoutError:
                pass
            seen: list[str] = []
            pending = [data for _kind, data in first]
            received = sum(len(values(d)) for d in pending)
            while pending:
                data = pending.pop(0)
                seen += values(data)
                r = await client.post(f"/v1/leases/{data['lease']['token']}/ack", headers=READER)
                assert r.json() == {"result": "acked"}, r.text
                if received < len(bodies):  # the ack made room for one more
                    kind, data = await events.next(20)
                    assert kind == "batch", data
                    pending.append(data)
                    received += len(values(data))
            assert sorted(seen) == sorted(bodies)
            # a message produced now flows into the open stream
            await produce_numbered(cluster.master_addr, "t", 1, start=1000)
            kind, data = await events.next(20)
            assert (kind, values(data)) == ("batch", ["m1000"])


async def test_a_client_that_leaves_has_its_batches_released_at_once(
    redis_server: RedisServer,
) -> None:
    async with FakeCluster(topics={"t": 1}, max_batch=5) as cluster:
        bodies = await produce_numbered(cluster.master_addr, "t", 10)
        config = stream_config(
            cluster.master_addr, redis_server.url, _groups(), stream={"window": 2}
        )
        async with serving(config) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
            async with client.stream("GET", "/v1/groups/gs/stream", headers=READER) as response:
                events = EventReader(response)
                kind, data = await events.next(20)
                assert kind == "batch"
                assert values(data) == bodies[:5]
                assert data["lease"]["redelivery"] == 0
            # the connection closed with the batch unacked: a fetch gets it at once, long
            # before its 60 s lease would have run out
            started = time.monotonic()

            async def released() -> bool:
                r = await client.post(
                    "/v1/groups/gs/fetch", json={"max_messages": 5}, headers=READER
                )
                got = r.json()
                if got["status"] != "ok":
                    return False
                assert [m["value"] for m in got["messages"]] == bodies[:5], got
                return True

            await wait_until(released, 15, "the stream's batch is released")
            assert time.monotonic() - started < 15
            stats = (await client.get("/metrics")).text
            counted = 'route="/v1/groups/{group}/stream",status="200"'
            assert any(counted in line for line in stats.splitlines()), stats[-2000:]


async def test_an_ack_through_another_replica_frees_the_window(
    redis_server: RedisServer,
) -> None:
    async with FakeCluster(topics={"t": 2}, max_batch=3) as cluster:
        bodies = await produce_numbered(cluster.master_addr, "t", 12)
        config = stream_config(
            cluster.master_addr,
            redis_server.url,
            _groups(),
            stream={"window": 1, "probe_interval_ms": 100},
        )
        async with (
            serving(config) as url_a,
            serving(config) as url_b,
            httpx.AsyncClient(base_url=url_a, timeout=30) as a,
            httpx.AsyncClient(base_url=url_b, timeout=30) as b,
            a.stream("GET", "/v1/groups/gs/stream", headers=READER) as response,
        ):
            events = EventReader(response)
            seen: list[str] = []
            while len(seen) < len(bodies):
                kind, data = await events.next(20)
                assert kind == "batch", data
                seen += values(data)
                r = await b.post(f"/v1/leases/{data['lease']['token']}/ack", headers=READER)
                assert r.json() == {"result": "acked"}, r.text
            assert sorted(seen) == sorted(bodies)


async def test_bad_stream_requests_are_refused_before_streaming(
    redis_server: RedisServer,
) -> None:
    async with FakeCluster(topics={"t": 1}) as cluster:
        groups = [*_groups(), {"name": "gb", "topics": ["t"], "mode": "broadcast"}]
        config = stream_config(
            cluster.master_addr, redis_server.url, groups, stream={"max_window": 8, "window": 2}
        )
        async with serving(config) as url, httpx.AsyncClient(base_url=url, timeout=30) as c:
            cases: list[tuple[str, dict[str, str], int, str | None]] = [
                ("/v1/groups/gs/stream?window=0", READER, 422, None),
                ("/v1/groups/gs/stream?window=9", READER, 422, "invalid_request"),
                ("/v1/groups/gs/stream?window=x", READER, 422, None),
                ("/v1/groups/gs/stream?window=1e3", READER, 422, None),
                ("/v1/groups/gs/stream?window=99999999999999999999", READER, 422, None),
                ("/v1/groups/gs/stream?max_messages=0", READER, 422, None),
                ("/v1/groups/gs/stream?value_encoding=hex", READER, 422, None),
                ("/v1/groups/gb/stream?client_id=" + "c" * 201, READER, 422, None),
                ("/v1/groups/gs/stream?lease_ms=5", READER, 422, "invalid_request"),
                ("/v1/groups/gs/stream?client_id=c1", READER, 422, "invalid_request"),
                # a misspelt or made-up parameter was ignored: the defaults silently applied
                ("/v1/groups/gs/stream?max_message=5", READER, 422, "invalid_request"),
                ("/v1/groups/gs/stream?wait_ms=NaN", READER, 422, "invalid_request"),
                ("/v1/groups/gb/stream", READER, 422, "invalid_request"),
                ("/v1/groups/nope/stream", ADMIN, 404, "unknown_group"),
                ("/v1/groups/gs/stream", {}, 401, None),
                ("/v1/groups/gs/stream", {"Authorization": "Bearer wrong"}, 401, None),
            ]
            for path, headers, status, code in cases:
                r = await c.get(path, headers=headers)
                assert r.status_code == status, (path, r.text)
                assert r.headers["content-type"] == "application/json", path
                if code is not None:
                    assert r.json()["error"]["code"] == code, (path, r.text)
            # a broadcast client gets its own copy of everything
            await produce_numbered(cluster.master_addr, "t", 3)
            async with c.stream(
                "GET", "/v1/groups/gb/stream?client_id=ui-1", headers=READER
            ) as response:
                kind, data = await EventReader(response).next(20)
                assert (kind, values(data)) == ("batch", ["m0", "m1", "m2"])


async def test_streams_end_on_shutdown_and_at_max_seconds(redis_server: RedisServer) -> None:
    async with FakeCluster(topics={"t": 1}, max_batch=2) as cluster:
        await produce_numbered(cluster.master_addr, "t", 4)
        config = stream_config(
            cluster.master_addr,
            redis_server.url,
            _groups(),
            stream={"max_seconds": 2.0, "wait_ms": 300, "heartbeat_seconds": 0.3},
        )
        async with serving(config) as url, httpx.AsyncClient(base_url=url, timeout=30) as c:
            async with c.stream("GET", "/v1/groups/gs/stream", headers=READER) as response:
                started = time.monotonic()
                raw = (await asyncio.wait_for(response.aread(), 20)).decode()
            assert time.monotonic() - started < 10
            assert raw.count("event: batch") == 1  # its one partition stays leased: "busy"
            assert ": keepalive" in raw  # the idle stream spoke while waiting
            assert raw.rstrip().endswith('data: {"reason":"max_seconds"}'), raw[-300:]
            r = await c.post("/v1/groups/gs/fetch", json={}, headers=READER)
            assert r.json()["status"] == "ok"  # the stream's unacked batch was released


async def test_a_replica_shutting_down_ends_its_streams_and_releases_their_batches(
    redis_server: RedisServer,
) -> None:
    async with FakeCluster(topics={"t": 1}, max_batch=3) as cluster:
        bodies = await produce_numbered(cluster.master_addr, "t", 3)
        config = stream_config(cluster.master_addr, redis_server.url, _groups())
        async with serving(config) as url, httpx.AsyncClient(base_url=url, timeout=30) as c:
            response_cm = c.stream("GET", "/v1/groups/gs/stream", headers=READER)
            response = await response_cm.__aenter__()
            kind, data = await EventReader(response).next(20)
            assert (kind, values(data)) == ("batch", bodies)
        # the replica stopped with the stream open and the batch unacked
        started = time.monotonic()
        await response_cm.__aexit__(None, None, None)
        async with serving(config) as url, httpx.AsyncClient(base_url=url, timeout=30) as c:
            r = await c.post("/v1/groups/gs/fetch", json={}, headers=READER)
            got = r.json()
            assert got["status"] == "ok", got
            assert [m["value"] for m in got["messages"]] == bodies
            assert got["lease"]["redelivery"] == 0  # released, not expired
        assert time.monotonic() - started < 30


async def test_streams_are_capped_per_replica_and_per_key(redis_server: RedisServer) -> None:
    async with FakeCluster(topics={"t": 1}) as cluster:
        config = stream_config(
            cluster.master_addr,
            redis_server.url,
            _groups(),
            stream={"max_streams": 2},
            max_long_polls_per_key=1,
        )
        async with (
            serving(config) as url,
            httpx.AsyncClient(base_url=url, timeout=30) as c,
            c.stream("GET", "/v1/groups/gs/stream", headers=READER) as first,
        ):
            assert first.status_code == 200
            # the reader key holds its share of long polls (a stream is one)
            r = await c.get("/v1/groups/gs/stream", headers=READER)
            assert r.status_code == 503, r.text
            assert r.json()["error"]["code"] == "too_many_waiters"
            assert "share" in r.json()["error"]["message"]
            async with c.stream("GET", "/v1/groups/gs/stream", headers=ADMIN) as second:
                assert second.status_code == 200
                # the replica serves max_streams (2)
                r = await c.get("/v1/groups/gs/stream", headers=ADMIN)
                assert r.status_code == 503, r.text
                assert r.json()["error"] == {
                    "code": "too_many_waiters",
                    "message": "this replica serves as many streams as it may",
                    "retriable": True,
                }
