"""A minimal Redis protocol (RESP2) client for the Redis test tools: one command per connection.

The tools need only a handful of admin commands (``PING``, ``ROLE``, ``INFO``, ``CLUSTER``,
``SENTINEL``) and must not depend on the gateway's optional ``redis`` package, so they speak
the protocol over a plain asyncio stream.
"""

from __future__ import annotations

import asyncio
import ssl

__all__ = ["Reply", "RespError", "command"]

HOST = "127.0.0.1"

#: A decoded reply: a simple or bulk string, an integer, None, or a list of replies.
Reply = str | int | None | list["Reply"]


class RespError(Exception):
    """The server answered with an error reply (``-ERR ...``)."""


async def _read(reader: asyncio.StreamReader) -> Reply:
    line = await reader.readline()
    if not line.endswith(b"\r\n"):
        raise ConnectionError("connection closed in the middle of a reply")
    kind, body = line[:1], line[1:-2].decode()
    if kind == b"+":
        return body
    if kind == b"-":
        raise RespError(body)
    if kind == b":":
        return int(body)
    if kind == b"$":
        size = int(body)
        if size < 0:
            return None
        data = await reader.readexactly(size + 2)
        return data[:-2].decode()
    if kind == b"*":
        count = int(body)
        if count < 0:
            return None
        return [await _read(reader) for _ in range(count)]
    raise ConnectionError(f"not a Redis reply: {line[:40]!r}")


def _encode(args: tuple[str, ...]) -> bytes:
    parts = [f"*{len(args)}\r\n".encode()]
    for arg in args:
        raw = arg.encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(raw), raw))
    return b"".join(parts)


async def command(
    port: int,
    *args: str,
    timeout: float,
    host: str = HOST,
    password: str | None = None,
    tls: ssl.SSLContext | None = None,
) -> Reply:
    """Send one command to ``host:port`` and return its decoded reply.

    Args:
        password: sent with ``AUTH`` first (a server with ``requirepass``).
        tls: connect with TLS in this context (a server listening on its TLS port only).

    Raises:
        RespError: the server answered an error (to the ``AUTH`` too).
        OSError, TimeoutError, ConnectionError: no answer within ``timeout`` seconds.
    """
    auth = b"" if password is None else _encode(("AUTH", password))
    async with asyncio.timeout(timeout):
        reader, writer = await asyncio.open_connection(host, port, ssl=tls)
        try:
            writer.write(auth + _encode(args))
            await writer.drain()
            if auth:
                await _read(reader)
            return await _read(reader)
        finally:
            writer.close()
            await writer.wait_closed()
