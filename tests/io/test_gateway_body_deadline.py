"""The request-body deadline on a real uvicorn (in this process, loopback, both of its HTTP
implementations), driven over raw sockets: a body that stops coming (``Content-Length`` or
chunked) is answered 408 ``request_timeout`` at ``body_timeout`` and the connection closed; a
body sent in parts within the deadline is served; a fetch's long poll and a stream, which
await ``receive`` after their body for longer than ``body_timeout``, are not cut."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import AsyncIterator
from typing import Literal, cast

import httpx
import pytest

from tests.support.gateway_fakes import ADMIN, CFG, LongPollEngine, fake_app
from tests.support.gateway_stream_support import READER, served, serving, stream_config
from tubemq_aio.testing import FakeCluster, RedisServer

BODY_TIMEOUT = 1.0
CONFIG = dataclasses.replace(CFG, body_timeout=BODY_TIMEOUT, noop_route=True)
AUTH = ADMIN["Authorization"].encode()


@dataclasses.dataclass(frozen=True)
class Answer:
    """One HTTP/1.1 response read off a socket."""

    status: int
    headers: dict[str, str]
    body: bytes


@pytest.fixture(params=["h11", "httptools"])
async def port(request: pytest.FixtureRequest) -> AsyncIterator[int]:
    """A gateway (stand-in engine and producer) on a real uvicorn with ``request.param``."""
    http = cast(Literal["h11", "httptools"], request.param)
    async with served(fake_app(LongPollEngine({"g1": "clustering"}), CONFIG), http) as url:
        yield int(url.rsplit(":", 1)[1])


def head(path: str, framing: bytes) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n".encode()
        + b"Authorization: "
        + AUTH
        + b"\r\n"
        + framing
        + b"\r\n"
    )


async def read_answer(reader: asyncio.StreamReader, timeout: float) -> Answer:
    async with asyncio.timeout(timeout):
        raw = await reader.readuntil(b"\r\n\r\n")
        first, *lines = raw.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines:
            if line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Answer(int(first.split()[1]), headers, body)


async def closed_by_server(reader: asyncio.StreamReader, timeout: float = 3.0) -> bool:
    async with asyncio.timeout(timeout):
        return await reader.read(1) == b""


async def send_in_parts(
    port: int, first: bytes, parts: list[bytes], pause: float
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(first)
    await writer.drain()
    for piece in parts:
        await asyncio.sleep(pause)
        writer.write(piece)
        await writer.drain()
    return reader, writer


def assert_request_timeout(answer: Answer) -> None:
    assert answer.status == 408, answer
    assert answer.headers["connection"] == "close"
    assert json.loads(answer.body) == {
        "error": {
            "code": "request_timeout",
            "message": "the request body was not complete within 1 seconds",
            "retriable": True,
        }
    }


@pytest.mark.also_on_uvloop
@pytest.mark.parametrize(
    ("framing", "sent"),
    [
        (b"Content-Length: 100\r\n", b"{"),  # one byte of 100, then nothing
        (b"Content-Length: 100\r\n", b""),  # the headers, then nothing
        (b"Transfer-Encoding: chunked\r\n", b'6\r\n{"valu\r\n'),  # one chunk, then nothing
        (b"Transfer-Encoding: chunked\r\n", b""),
    ],
    ids=["length-1-byte", "length-no-byte", "chunked-1-chunk", "chunked-no-chunk"],
)
async def test_a_body_that_stops_is_408_at_the_deadline_and_the_connection_closed(
    port: int, framing: bytes, sent: bytes
) -> None:
    started = time.monotonic()
    reader, writer = await send_in_parts(port, head("/v1/noop", framing) + sent, [], 0)
    try:
        answer = await read_answer(reader, BODY_TIMEOUT + 5)
        took = time.monotonic() - started
        assert_request_timeout(answer)
        assert BODY_TIMEOUT - 0.1 <= took < BODY_TIMEOUT + 2, took
        assert await closed_by_server(reader)
    finally:
        writer.close()


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_a_body_in_parts_within_the_deadline_is_served(port: int, chunked: bool) -> None:
    raw = b'{"value": "sent in four parts"}'
    parts = [raw[i : i + 8] for i in range(0, len(raw), 8)]
    if chunked:
        framing = b"Transfer-Encoding: chunked\r\n"
        parts = [b"%x\r\n%s\r\n" % (len(p), p) for p in parts] + [b"0\r\n\r\n"]
    else:
        framing = b"Content-Length: %d\r\n" % len(raw)
    # 0.1 s apart: the whole body within about 0.5 s of the 1 s deadline
    reader, writer = await send_in_parts(port, head("/v1/noop", framing), parts, 0.1)
    try:
        answer = await read_answer(reader, 5)
        assert answer.status == 200, answer
        assert json.loads(answer.body)["message_id"] == "0"
        # the connection serves the next request as usual, its body whole in one write
        writer.write(head("/v1/noop", b"Content-Length: %d\r\n" % len(raw)) + raw)
        await writer.drain()
        assert (await read_answer(reader, 5)).status == 200
    finally:
        writer.close()


async def test_a_long_poll_past_the_deadline_is_not_cut(port: int) -> None:
    # the body is whole at once; the fetch then watches receive for a disconnect for 2 s
    raw = b'{"wait_ms": 2000}'
    started = time.monotonic()
    first = head("/v1/groups/g1/fetch", b"Content-Length: %d\r\n" % len(raw)) + raw
    reader, writer = await send_in_parts(port, first, [], 0)
    try:
        answer = await read_answer(reader, 10)
        assert answer.status == 200, answer
        assert json.loads(answer.body)["status"] == "empty"
        assert time.monotonic() - started >= 1.9
    finally:
        writer.close()


@pytest.mark.parametrize("body", [None, b"{}"], ids=["no-body", "json-body"])
async def test_a_stream_is_not_cut_by_the_deadline(
    redis_server: RedisServer, body: bytes | None
) -> None:
    async with FakeCluster(topics={"t": 1}) as cluster:
        config = stream_config(
            cluster.master_addr,
            redis_server.url,
            [{"name": "gs", "topics": ["t"]}],
            body_timeout=BODY_TIMEOUT,
            stream={"heartbeat_seconds": 0.2},
        )
        headers = dict(READER)
        if body is not None:
            headers["Content-Type"] = "application/json"
        async with (
            serving(config) as url,
            httpx.AsyncClient(base_url=url, timeout=10) as client,
            client.stream("GET", "/v1/groups/gs/stream", headers=headers, content=body) as r,
        ):
            assert r.status_code == 200
            started = time.monotonic()
            late_keepalives = 0
            lines = r.aiter_lines()
            async with asyncio.timeout(10):
                while time.monotonic() - started < 2.5 * BODY_TIMEOUT:
                    line = await anext(lines)
                    if line == ": keepalive" and time.monotonic() - started > 1.5 * BODY_TIMEOUT:
                        late_keepalives += 1
            assert late_keepalives >= 2  # every 0.2 s, well past body_timeout
