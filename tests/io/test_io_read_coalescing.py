"""Read coalescing (``read_coalescing``, ``docs/api.md``): while many answers are owed on a
connection, the socket wakes the client only once a share of them has come (``SO_RCVLOWAT``),
so one read serves several answers; every answer that comes is still delivered, and one that
sits unread behind the mark when a call's deadline passes is read first.

A holding server answers only when the test releases answers, so the mark and what it holds
back are seen exactly (the kernel does not wake a reader below it)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import cast

import pytest

from tests.support.echo_server import request_payload
from tests.support.self_signed import self_signed_cert
from tubemq_aio._io.connection import Connection
from tubemq_aio._io.pool import Address, ConnectionPool
from tubemq_aio._io.settings import TransportSettings
from tubemq_aio.errors import ConnectionLostError, RequestTimeoutError
from tubemq_aio.protocol.framing import FrameDecoder, encode_frame
from tubemq_aio.protocol.rpc import decode_request, encode_success
from tubemq_aio.testing import wait_until

pytestmark = [
    pytest.mark.timeout(30),
    pytest.mark.skipif(not hasattr(socket, "SO_RCVLOWAT"), reason="no SO_RCVLOWAT here"),
]

CALLS = 256  # owed answers: a read then waits for 256 / 32 = 8 of them


class HoldingServer(asyncio.Protocol):
    """Answers (echoes) nothing until :meth:`release` lets the oldest held answers go."""

    def __init__(self) -> None:
        self.decoder = FrameDecoder()
        self.held: list[bytes] = []
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        for serial, payload in self.decoder.feed(data):
            request = decode_request(payload)
            self.held.append(encode_frame(serial, encode_success(request.method, request.body)))

    def release(self, count: int) -> None:
        out, self.held = self.held[:count], self.held[count:]
        assert self.transport is not None
        self.transport.write(b"".join(out))


@contextlib.asynccontextmanager
async def _connected(
    coalescing: float, tls_dir: Path | None = None
) -> AsyncIterator[tuple[HoldingServer, Connection]]:
    """A holding server (TLS with a self-signed certificate made in ``tls_dir`` when given) and
    a connection to it, both closed on exit."""
    servers: list[HoldingServer] = []

    def made() -> HoldingServer:
        servers.append(HoldingServer())
        return servers[-1]

    server_tls = client_tls = None
    if tls_dir is not None:
        cert, key = self_signed_cert(tls_dir)
        server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_tls.load_cert_chain(cert, key)
        client_tls = ssl.create_default_context(cafile=str(cert))
    loop = asyncio.get_running_loop()
    server = await loop.create_server(made, "127.0.0.1", 0, ssl=server_tls)
    port = server.sockets[0].getsockname()[1]
    settings = TransportSettings(
        sweep_interval=0.01,
        read_coalescing=coalescing,
        ssl_context=client_tls,
        tls_server_hostname=None if tls_dir is None else "localhost",
    )
    pool = ConnectionPool(settings)
    try:
        conn = await pool.connection(Address("127.0.0.1", port, tls=tls_dir is not None))
        (held,) = servers
        yield held, conn
    finally:
        await pool.close()
        server.close()


def _mark(conn: Connection) -> int:
    assert conn._transport is not None
    sock = conn._transport.get_extra_info("socket")
    return int(sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT))


async def _settled(tasks: list[asyncio.Task[bytes]], count: int) -> None:
    await wait_until(lambda: sum(t.done() for t in tasks) >= count, 10, f"{count} settled")


async def _owe(conn: Connection, held: HoldingServer, timeout: float) -> list[asyncio.Task[bytes]]:
    """:data:`CALLS` calls of ``timeout`` seconds, once the server holds every request."""
    tasks = [
        asyncio.create_task(conn.call(request_payload(b"%03d" % i), timeout)) for i in range(CALLS)
    ]
    await wait_until(lambda: len(held.held) == CALLS, 10, "every request at the server")
    return tasks


async def _ten_answered(
    conn: Connection, held: HoldingServer, timeout: float
) -> list[asyncio.Task[bytes]]:
    """:func:`_owe`, then the first ten answered (read while no answer size was known yet)."""
    tasks = await _owe(conn, held, timeout)
    held.release(10)
    await _settled(tasks, 10)
    return tasks


@pytest.mark.also_on_uvloop
@pytest.mark.parametrize("tls", [False, True], ids=["tcp", "tls"])
async def test_a_read_waits_for_a_share_of_the_owed_answers_and_all_arrive(
    tls: bool, tmp_path: Path
) -> None:
    """Over TLS the mark counts the socket's encrypted bytes, never fewer than the answers'."""
    async with _connected(1 / 32, tmp_path if tls else None) as (held, conn):
        tasks = await _owe(conn, held, 10.0)
        assert _mark(conn) == 1  # nothing read yet: no answer size known
        held.release(10)
        await _settled(tasks, 10)
        assert _mark(conn) > 1  # 246 owed: a read waits for 7 of them
        held.release(1)  # under the mark: the kernel keeps it
        await asyncio.sleep(0.2)
        assert sum(t.done() for t in tasks) == 10
        held.release(CALLS)
        assert await asyncio.gather(*tasks) == [b"%03d" % i for i in range(CALLS)]
        assert _mark(conn) == 1  # nothing owed


@pytest.mark.also_on_uvloop
async def test_an_answer_held_behind_the_mark_is_read_before_its_deadline_fails_it() -> None:
    """A broker that answers two more and then nothing: the two are delivered (the sweeper
    lowers the mark before it fails anything), the rest time out."""
    async with _connected(1 / 32) as (held, conn):
        tasks = await _ten_answered(conn, held, 1.0)
        assert _mark(conn) > 1
        held.release(2)
        await _settled(tasks, CALLS)
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        assert outcomes[:12] == [b"%03d" % i for i in range(12)]
        assert all(isinstance(o, RequestTimeoutError) for o in outcomes[12:])


async def test_off_every_answer_wakes_the_reader() -> None:
    async with _connected(0.0) as (held, conn):
        tasks = await _ten_answered(conn, held, 10.0)
        held.release(1)
        await _settled(tasks, 11)
        assert _mark(conn) == 1
        held.release(CALLS)
        await asyncio.gather(*tasks)


@pytest.mark.also_on_uvloop
@pytest.mark.parametrize("how", ["close", "reset"])
async def test_a_peer_that_closes_or_resets_behind_the_mark_is_seen_at_once(how: str) -> None:
    """The kernel wakes a reader for the end of the stream or a reset whatever the mark: the
    answer that came before it is delivered, the rest fail as lost, long before their 10 s."""
    async with _connected(1 / 32) as (held, conn):
        tasks = await _ten_answered(conn, held, 10.0)
        assert _mark(conn) > 1
        held.release(1)  # under the mark
        assert held.transport is not None
        if how == "close":
            held.transport.close()
        else:
            held.transport.abort()
        async with asyncio.timeout(5):
            outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        if how == "close":  # a reset may discard what the socket held unread
            assert outcomes[10] == b"010"
        lost = outcomes[11:]
        assert all(isinstance(o, ConnectionLostError) for o in lost), {type(o) for o in lost}
