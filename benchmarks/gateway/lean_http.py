"""A minimal keep-alive HTTP/1.1 JSON client on asyncio streams: the consume benchmark's load.

The consume benchmark's client shares the two cores with the gateway and the broker, so every
CPU second it spends is taken from what it measures. ``httpx`` spends, per fetch answer of about
1 300 messages (≈ 260 KB), most of its time in its own machinery (h11's event parsing, the
chunked reads of the body, its request and response objects); this client writes one request
per call and reads one ``Content-Length`` answer with a single ``readexactly``. The caller still
parses each whole answer with ``orjson`` (as a user's client would), so what remains is the
honest cost of receiving and reading the answer. See "The consume client" in
``docs/benchmarks.md``.

Only what the benchmark needs: ``POST``/``GET`` with a JSON body, answers with a
``Content-Length`` (the gateway's are), one request at a time per connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from types import TracebackType
from urllib.parse import urlsplit

import orjson

__all__ = ["LeanClient", "LeanResponse"]

#: The largest answer read (the gateway's fetch answers are well below it).
MAX_BODY = 256 << 20


@dataclass(frozen=True, slots=True)
class LeanResponse:
    """One answer: its status code and body bytes."""

    status_code: int
    content: bytes


class LeanClient:
    """One keep-alive HTTP/1.1 connection to ``url`` (``http://host:port``), opened on first use.

    Args:
        url: the base URL (plain HTTP).
        headers: sent with every request (e.g. ``Authorization``).
        timeout: seconds each request may take (connect, write and read).

    Raises:
        ValueError: ``url`` is not ``http://host[:port]``.
    """

    def __init__(self, url: str, headers: dict[str, str], timeout: float = 60) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"LeanClient: expected http://host[:port], got {url!r}")
        self._host, self._port = parts.hostname, parts.port or 80
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self._head = f"Host: {parts.netloc}\r\n{extra}".encode()
        self._timeout = timeout
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def __aenter__(self) -> LeanClient:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection (a later request opens a new one)."""
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    def local_port(self) -> int:
        """The connection's local port (-1 when none is open)."""
        if self._writer is None:
            return -1
        return int(self._writer.get_extra_info("sockname")[1])

    async def post(self, path: str, json: object = None) -> LeanResponse:
        """``POST path`` with ``json`` as its body (none when None)."""
        return await asyncio.wait_for(self._request(b"POST", path, json), self._timeout)

    async def get(self, path: str) -> LeanResponse:
        """``GET path``."""
        return await asyncio.wait_for(self._request(b"GET", path, None), self._timeout)

    async def _request(self, method: bytes, path: str, json: object) -> LeanResponse:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self._host, self._port)
        reader, writer = self._reader, self._writer
        assert reader is not None
        body = b"" if json is None else orjson.dumps(json)
        kind = b"Content-Type: application/json\r\n" if json is not None else b""
        writer.write(
            b"%b %b HTTP/1.1\r\n%b%bContent-Length: %d\r\n\r\n%b"
            % (method, path.encode(), self._head, kind, len(body), body)
        )
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            await self.close()
            raise ConnectionError(f"LeanClient: no answer head from {path}") from exc
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length, close = -1, False
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                raise ConnectionError("LeanClient: chunked answers are not supported")
            elif name == b"connection" and value.strip().lower() == b"close":
                close = True
        if not 0 <= length <= MAX_BODY:
            await self.close()
            raise ConnectionError(f"LeanClient: answer without a usable Content-Length ({length})")
        content = await reader.readexactly(length) if length else b""
        if close:
            await self.close()
        return LeanResponse(status, content)
