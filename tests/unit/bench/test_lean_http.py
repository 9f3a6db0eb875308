"""The consume benchmark's minimal HTTP/1.1 client against a real uvicorn-less asyncio server:
keep-alive, JSON bodies, and a clear error for what it does not read."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import orjson
import pytest

from benchmarks.gateway.lean_http import LeanClient

Answer = Callable[[bytes], bytes]


async def _serve(answer: Answer) -> tuple[asyncio.Server, str, list[bytes]]:
    seen: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                seen.append(head + (await reader.readexactly(length) if length else b""))
                writer.write(answer(seen[-1]))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}", seen


def _ok(request: bytes) -> bytes:
    body = orjson.dumps({"echo": request.split(b"\r\n\r\n", 1)[1].decode()})
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%b" % (len(body), body)


@pytest.fixture
async def echo() -> AsyncIterator[tuple[str, list[bytes]]]:
    server, url, seen = await _serve(_ok)
    async with server:
        yield url, seen


async def test_requests_share_one_connection_and_carry_json(
    echo: tuple[str, list[bytes]],
) -> None:
    url, seen = echo
    async with LeanClient(url, {"Authorization": "Bearer k"}) as client:
        first = await client.post("/v1/groups/g/fetch", json={"wait_ms": 500})
        second = await client.get("/metrics")
    assert first.status_code == 200
    assert orjson.loads(orjson.loads(first.content)["echo"]) == {"wait_ms": 500}
    assert orjson.loads(second.content) == {"echo": ""}
    assert seen[0].startswith(b"POST /v1/groups/g/fetch HTTP/1.1\r\n")
    assert b"Authorization: Bearer k\r\n" in seen[0]
    assert b"Content-Type: application/json\r\n" in seen[0]
    assert seen[1].startswith(b"GET /metrics HTTP/1.1\r\n")
    assert b"Content-Type" not in seen[1]


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "chunked"),
        (b"HTTP/1.1 200 OK\r\nX: y\r\n\r\n", "Content-Length"),
    ],
)
async def test_answers_it_cannot_read_are_connection_errors(answer: bytes, error: str) -> None:
    server, url, _ = await _serve(lambda _: answer)
    async with server, LeanClient(url, {}) as client:
        with pytest.raises(ConnectionError, match=error):
            await client.post("/x", json={})


async def test_a_server_that_closes_after_an_answer_gets_a_new_connection() -> None:
    def closing(request: bytes) -> bytes:
        return b"HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}"

    server, url, seen = await _serve(closing)
    async with server, LeanClient(url, {}) as client:
        assert (await client.post("/a")).status_code == 404
        assert (await client.post("/b")).content == b"{}"
    assert len(seen) == 2


def test_only_plain_http_urls_are_taken() -> None:
    for url in ("https://h:1", "h:1", "http://"):
        with pytest.raises(ValueError, match="http://host"):
            LeanClient(url, {})
