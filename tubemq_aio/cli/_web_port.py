"""What answers at an address given for the master's web API, asked before the web request.

A master's client port (8715) or a broker's (8123) reads an HTTP request as frame garbage and
answers nothing, and so does a server that accepts connections and never answers: a listing
pointed there would wait the web API's whole timeout (10 s). Three requests, each on a
connection of its own and all at once, tell such a port apart within a short deadline:

- one TubeMQ request (a master producer heartbeat with an empty body, which every TubeMQ node
  answers with an error frame and which changes nothing), bare: a client port of the current
  framing answers with the frame token (docs/protocol/wire.md §1);
- the same request behind its length, as TubeMQ 1.1/1.2 servers read it: their client port
  answers with a length and then the token (docs/protocol/wire.md §1.7); each framing leaves
  the other one's request unanswered;
- ``GET /`` in HTTP/1.0: a web server answers ``HTTP/`` at once, before the web API computes
  anything.

Any other outcome (a refused or closed connection, another protocol's answer) is left to the
web request, whose error says what it met.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import struct

from tubemq_aio.protocol.framing import BEGIN_TOKEN, encode_frame
from tubemq_aio.protocol.legacy_framing import LENGTH_PREFIX, length_prefix
from tubemq_aio.protocol.rpc import SERVICE_OF_METHOD, Method, encode_request

__all__ = ["PROBE_TIMEOUT", "WebPort", "probe_web_port"]

#: Seconds the probe waits for the first bytes of an answer by default. A TubeMQ node answers
#: in milliseconds, and so does a master's web server the HTTP request (docs/cli.md, measured
#: on the local cluster); a port that stays silent fails the listing after this long.
PROBE_TIMEOUT = 3.0

_TOKEN = struct.pack(">I", BEGIN_TOKEN)
_METHOD = Method.MASTER_PRODUCER_HEARTBEAT
_FRAME = encode_frame(
    1, encode_request(SERVICE_OF_METHOD[_METHOD], _METHOD, round(PROBE_TIMEOUT * 1000), b"")
)
_LEGACY_FRAME = length_prefix(len(_FRAME)) + _FRAME
_HTTP = b"HTTP/"


class WebPort(enum.Enum):
    """What :func:`probe_web_port` found at an address."""

    #: An HTTP server answered.
    HTTP = "an HTTP server"
    #: A TubeMQ client (RPC) port of the current framing answered.
    CLIENT_PORT = "a TubeMQ client (RPC) port"
    #: A TubeMQ client port of a 1.1/1.2 server (length-prefixed framing) answered.
    LEGACY_CLIENT_PORT = "a TubeMQ client (RPC) port of a 1.1/1.2 server (length-prefixed framing)"
    #: The connection was made, and nothing answered any request within the deadline.
    SILENT = "silent"
    #: No connection was made within the deadline (nothing answered the connect).
    NO_CONNECTION = "no connection"
    #: Anything else: a refused or closed connection, another protocol's answer.
    OTHER = "other"


async def _first_bytes(
    host: str, port: int, request: bytes, count: int, timeout: float
) -> tuple[bool, bytes | None]:
    """``(connected, answer)``: whether a connection was made, and the first ``count`` bytes
    answered to ``request`` (fewer when the peer closed first; ``b""`` when the connect failed)
    or None when nothing more came within ``timeout`` seconds."""
    connected = False
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(host, port)
            connected = True
            try:
                writer.write(request)
                return True, await reader.readexactly(count)
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
    except asyncio.IncompleteReadError as exc:
        return True, exc.partial
    except TimeoutError:
        return connected, None
    except OSError:
        return connected, b""


async def probe_web_port(host: str, port: int, timeout: float = PROBE_TIMEOUT) -> WebPort:
    """What answers at ``host:port`` (see the module docstring): as soon as one request's
    answer tells, else after ``timeout`` seconds at most."""
    # What each request is answered with when it tells: the expected bytes after a skip.
    probes = {
        WebPort.CLIENT_PORT: (_FRAME, 0, _TOKEN),
        WebPort.LEGACY_CLIENT_PORT: (_LEGACY_FRAME, LENGTH_PREFIX.size, _TOKEN),
        WebPort.HTTP: (f"GET / HTTP/1.0\r\nHost: {host}:{port}\r\n\r\n".encode(), 0, _HTTP),
    }
    tasks = {
        asyncio.ensure_future(_first_bytes(host, port, request, skip + len(expected), timeout)): (
            kind,
            skip,
            expected,
        )
        for kind, (request, skip, expected) in probes.items()
    }
    pending = set(tasks)
    try:
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                kind, skip_size, expected = tasks[task]
                answer = task.result()[1]
                if answer is not None and answer[skip_size:] == expected:
                    return kind
    finally:
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    outcomes = [task.result() for task in tasks]
    if all(answer is None for _, answer in outcomes):
        connected = any(made for made, _ in outcomes)
        return WebPort.SILENT if connected else WebPort.NO_CONNECTION
    return WebPort.OTHER
