"""A loopback TubeMQ RPC test server with fault knobs (the ``tests/io`` helper).

The ``server`` and ``settings`` fixtures built on it live in ``tests/io/conftest.py``.
The server decodes request frames with the coordinator's ``decode_request`` and answers with
``encode_success`` (echoing the request body) or ``encode_exception``. Knobs change how it
answers: shuffled order, delay, drop, duplicate, garbage, close mid-flight, stop reading.
:class:`MemoryTransport` stands in for the socket where a test drives a connection by hand.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

from tubemq_aio._io.connection import Connection
from tubemq_aio._io.pool import Address
from tubemq_aio._io.rpc_client import RpcClient
from tubemq_aio._io.settings import TransportSettings
from tubemq_aio.protocol.framing import FrameDecoder, encode_frame
from tubemq_aio.protocol.rpc import (
    Method,
    RpcRequest,
    decode_request,
    encode_exception,
    encode_success,
)
from tubemq_aio.testing._port_hold import PortHold

__all__ = [
    "FakeServer",
    "Knobs",
    "flood_until_paused",
    "limit_send_buffer",
    "request_payload",
    "small_buffers",
    "unanswered_port",
]


@dataclass
class Knobs:
    """How the server answers; change the attributes at any time.

    Attributes:
        shuffle: answer the requests of one read in random order.
        delay: seconds to wait before answering.
        drop: never answer.
        duplicate: send every answer twice.
        garbage: send these bytes instead of an answer.
        close_after: close the connection when this many requests (per server) were received.
        pause_reading: stop reading new connections right after accepting them.
        reset_on_accept: abort every connection as soon as it is accepted.
        exception: answer with ``(exception_name, message, fatal)`` instead of the echo.
        handler: build the answer payload from the request (overrides the echo); None leaves
            the request unanswered.
    """

    shuffle: bool = False
    delay: float = 0.0
    drop: bool = False
    duplicate: bool = False
    garbage: bytes | None = None
    close_after: int | None = None
    pause_reading: bool = False
    reset_on_accept: bool = False
    exception: tuple[str, str, bool] | None = None
    handler: Callable[[RpcRequest], bytes | None] | None = None
    rng: random.Random = field(default_factory=lambda: random.Random(1234))


class _ServerProtocol(asyncio.Protocol):
    def __init__(self, server: FakeServer) -> None:
        self.server = server
        self.decoder = FrameDecoder()
        self.transport: asyncio.Transport | None = None
        self.stash: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport = cast(asyncio.Transport, transport)
        self.server.accepted += 1
        self.server.open.add(self)
        if self.server.knobs.reset_on_accept:
            transport.abort()
            return
        if self.server.knobs.pause_reading:
            limit_kernel_buffer(transport, socket.SO_RCVBUF)
            transport.pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.open.discard(self)
        self.transport = None

    def data_received(self, data: bytes) -> None:
        server = self.server
        knobs = server.knobs
        if knobs.pause_reading:
            # uvloop starts reading after connection_made, so pausing there is not enough.
            assert self.transport is not None
            self.transport.pause_reading()
            self.stash.append(data)
            return
        server.bytes_received += len(data)
        out: list[bytes] = []
        for serial, payload in self.decoder.feed(data):
            request = decode_request(payload)
            server.requests.append(request)
            if knobs.close_after is not None and len(server.requests) >= knobs.close_after:
                assert self.transport is not None
                self.transport.abort()
                return
            if knobs.drop:
                continue
            if knobs.garbage is not None:
                out.append(knobs.garbage)
                continue
            if knobs.handler is not None:
                handled = knobs.handler(request)
                if handled is None:  # the handler leaves this request unanswered
                    continue
                answer = handled
            elif knobs.exception is not None:
                name, text, fatal = knobs.exception
                answer = encode_exception(name, text, fatal=fatal)
            else:
                answer = encode_success(request.method, request.body)
            frame = encode_frame(serial, answer)
            out.append(frame)
            if knobs.duplicate:
                out.append(frame)
        if not out:
            return
        if knobs.shuffle:
            knobs.rng.shuffle(out)
        if knobs.delay > 0:
            asyncio.get_running_loop().call_later(knobs.delay, self._write, out)
        else:
            self._write(out)

    def _write(self, frames: list[bytes]) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.writelines(frames)


class FakeServer:
    """A TCP (optionally TLS) server on 127.0.0.1 speaking the TubeMQ RPC framing.

    Args:
        knobs: answer behaviour (a default echo when None).
        ssl_context: a server-side TLS context, or None for plain TCP.
    """

    def __init__(self, knobs: Knobs | None = None, ssl_context: ssl.SSLContext | None = None):
        self.knobs = knobs if knobs is not None else Knobs()
        self.ssl_context = ssl_context
        self.port = 0
        self.accepted = 0
        self.bytes_received = 0
        self.requests: list[RpcRequest] = []
        self.open: set[_ServerProtocol] = set()
        self._server: asyncio.Server | None = None
        self._hold = PortHold()

    async def start(self, port: int = 0) -> FakeServer:
        """Listen on ``port`` (0: the previous port, or any free one the first time); the port
        a ``stop(hold_port=True)`` kept is listened on with the socket that kept it."""
        loop = asyncio.get_running_loop()
        port = port or self.port

        def protocol() -> _ServerProtocol:
            return _ServerProtocol(self)

        self._server = await self._hold.listen(
            port, lambda held: loop.create_server(protocol, sock=held, ssl=self.ssl_context)
        ) or await loop.create_server(
            protocol, "127.0.0.1", port, ssl=self.ssl_context, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def limit_receive_buffers(self) -> None:
        """Cap the kernel receive buffer of the connections accepted from now on at
        :data:`KERNEL_BUFFER`, set on the listening socket so that it holds from each one's
        handshake on, whichever runs first: the accept (``pause_reading``'s own cap, set on the
        accepted connection) or the client's first writes. A flood paused at the client once
        resumed in a loaded run (``test_reaper_leaves_a_connection_whose_callers_wait_for_room``:
        the kernel took more than the cap allows; not reproduced since)."""
        assert self._server is not None
        for sock in self._server.sockets:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, KERNEL_BUFFER)

    async def stop(self, *, hold_port: bool = False) -> None:
        """Stop listening and abort every open connection.

        Args:
            hold_port: keep the port bound (not listening: connects are refused) until the
                next :meth:`start` on it, so that the kernel gives it to no other socket
                meanwhile (a restart on the old port); False (default) frees it.
        """
        if self._server is not None:
            self._server.close()  # the listening socket closes now: hold its port at once
            if hold_port:
                self._hold.hold("127.0.0.1", self.port)
        if not hold_port:
            self._hold.release()
        if self._server is not None:
            for proto in list(self.open):
                if proto.transport is not None:
                    proto.transport.abort()
            await self._server.wait_closed()
            self._server = None
        await asyncio.sleep(0)

    def resume_reading(self) -> None:
        """Resume reading on every open connection (after ``pause_reading``)."""
        self.knobs.pause_reading = False
        for proto in list(self.open):
            stash, proto.stash = proto.stash, []
            for data in stash:
                proto.data_received(data)
            if proto.transport is not None:
                proto.transport.resume_reading()

    async def __aenter__(self) -> FakeServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


def request_payload(body: bytes, method: int = 1, timeout_ms: int = 10_000) -> bytes:
    """A request envelope (master service) the echo server answers with ``body``."""
    from tubemq_aio.protocol.rpc import SERVICE_OF_METHOD, Method, encode_request

    return encode_request(SERVICE_OF_METHOD[Method(method)], method, timeout_ms, body)


def small_buffers(idle_timeout: float = 180.0) -> TransportSettings:
    """Settings whose write buffer pauses at 64 KiB, so a peer that stops reading shows fast."""
    return TransportSettings(
        sweep_interval=0.01,
        idle_timeout=idle_timeout,
        write_high_water=64 * 1024,
        write_low_water=16 * 1024,
    )


KERNEL_BUFFER = 64 * 1024
"""Socket buffer size that tests which fill a connection set on both ends. Left to the kernel,
the client's send buffer alone may grow to 4 MB (``tcp_wmem``) and the server's receive buffer
further (``tcp_rmem`` allows 32 MB on this kernel), so whether a 4 MiB flood pauses the
transport depends on timing: it did in one CI run and not in the next."""


def limit_kernel_buffer(transport: asyncio.BaseTransport, option: int) -> None:
    """Cap the kernel's ``option`` (``SO_RCVBUF`` or ``SO_SNDBUF``) buffer of ``transport``'s
    socket at :data:`KERNEL_BUFFER`, which also stops the kernel from growing it."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, option, KERNEL_BUFFER)


def limit_send_buffer(conn: Connection) -> None:
    """Cap the client side's kernel send buffer of ``conn`` (see :data:`KERNEL_BUFFER`)."""
    assert conn._transport is not None
    limit_kernel_buffer(conn._transport, socket.SO_SNDBUF)


async def flood_until_paused(
    server: FakeServer, rpc: RpcClient, timeout: float = 30.0
) -> tuple[Connection, list[asyncio.Task[bytes]]]:
    """Make ``server`` stop reading, then send 64 KiB calls (each with ``timeout``) until the
    connection's transport pauses writing. Returns the connection and the flooding calls."""
    server.knobs.pause_reading = True
    server.limit_receive_buffers()
    address = Address("127.0.0.1", server.port)
    conn = await rpc.connect(address)
    limit_send_buffer(conn)
    chunk = b"z" * 65536
    method = Method.MASTER_PRODUCER_HEARTBEAT
    flood = [asyncio.create_task(rpc.call(address, method, chunk, timeout)) for _ in range(64)]
    for _ in range(300):
        await asyncio.sleep(0.01)
        if conn.writing_paused:
            break
    assert conn.writing_paused
    return conn, flood


class MemoryTransport(asyncio.Transport):
    """Collects written bytes; never blocks."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closing = False
        self.writes = 0

    def writelines(self, list_of_data: Any) -> None:
        self.writes += 1
        for chunk in list_of_data:
            self.written += chunk

    def write(self, data: Any) -> None:
        self.writes += 1
        self.written += data

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass


@contextlib.contextmanager
def unanswered_port() -> Iterator[int]:
    """A port whose listener's accept backlog is full, so a connect's SYN goes unanswered."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(8):
            s = socket.socket()
            s.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                s.connect(("127.0.0.1", port))
            fillers.append(s)
        yield port
    finally:
        for s in fillers:
            s.close()
        listener.close()
