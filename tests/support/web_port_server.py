"""A stand-in for a TubeMQ master's web port: a loopback HTTP server that answers whatever it
is sent with ``400 Bad Request``, as a web server answers a TubeMQ frame."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

_ANSWER = (
    b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/html\r\nContent-Length: 11\r\n"
    b"Connection: close\r\n\r\nBad Request"
)


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        await reader.read(1)  # a web server answers once the request's first bytes came
        writer.write(_ANSWER)
        await writer.drain()
    writer.close()


@contextlib.asynccontextmanager
async def web_port() -> AsyncIterator[str]:
    """Serve the stand-in on a free loopback port; yields its ``host:port``."""
    server = await asyncio.start_server(_answer, "127.0.0.1", 0)
    host, port = server.sockets[0].getsockname()[:2]
    try:
        yield f"{host}:{port}"
    finally:
        server.close()
        await server.wait_closed()
