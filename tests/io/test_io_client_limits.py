"""The transport limits a client sets (``ClientConfig``) act on its connections: an answer
over ``max_frame_bytes`` fails with the documented ``FrameError``, a tiny ``sweep_interval``
still ends calls at their deadline and not before, a failed connect keeps the address away for
``connect_backoff_initial``, and a close waits at most ``connection_close_timeout`` for a
peer that stopped reading."""

from __future__ import annotations

import asyncio
import socket

import pytest

from tests.support.echo_server import FakeServer, flood_until_paused
from tubemq_aio._client import open_pool
from tubemq_aio._io.pool import Address
from tubemq_aio._io.rpc_client import RpcClient
from tubemq_aio.config import ClientConfig, parse_masters
from tubemq_aio.errors import ConnectError, FrameError, RequestTimeoutError
from tubemq_aio.protocol.rpc import Method

METHOD = Method.MASTER_PRODUCER_HEARTBEAT


def _rpc(**options: object) -> RpcClient:
    config = ClientConfig(masters=parse_masters("h:8715"), connection_reuse=False, **options)  # type: ignore[arg-type]
    return RpcClient(open_pool(config))


async def test_an_answer_over_max_frame_bytes_fails_with_frame_error(server: FakeServer) -> None:
    rpc = _rpc(max_frame_bytes=16384)
    address = Address("127.0.0.1", server.port)
    try:
        assert await rpc.call(address, METHOD, b"s" * 12000, 5.0) == b"s" * 12000
        with pytest.raises(FrameError, match="16384-byte cap"):
            await rpc.call(address, METHOD, b"b" * 20000, 5.0)  # echoed back: over the cap
    finally:
        await rpc.pool.close()


async def test_a_tiny_sweep_interval_ends_calls_at_their_deadline(server: FakeServer) -> None:
    server.knobs.drop = True
    rpc = _rpc(sweep_interval=0.001)
    loop = asyncio.get_running_loop()
    address = Address("127.0.0.1", server.port)
    try:
        await rpc.connect(address)
        began = loop.time()
        with pytest.raises(RequestTimeoutError):
            async with asyncio.timeout(10):  # a sweeper that never ran would hang here
                await rpc.call(address, METHOD, b"x", 0.2)
        assert loop.time() - began >= 0.2  # never before the deadline
    finally:
        await rpc.pool.close()


def _refused_port() -> int:
    """A loopback port nothing listens on (a connect to it is refused at once)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_a_failed_connect_keeps_the_address_away_for_the_backoff() -> None:
    rpc = _rpc(connect_backoff_initial=30.0, connect_backoff_max=60.0, connect_backoff_jitter=0.0)
    try:
        address = Address("127.0.0.1", _refused_port())
        with pytest.raises(ConnectError, match="cannot connect"):
            await rpc.call(address, METHOD, b"x", 5.0)
        with pytest.raises(ConnectError, match=r"next attempt allowed in (29|30)\.\d+ s"):
            await rpc.call(address, METHOD, b"x", 5.0)
    finally:
        await rpc.pool.close()


async def test_a_close_waits_connection_close_timeout_for_a_peer_not_reading(
    server: FakeServer,
) -> None:
    rpc = _rpc(connection_close_timeout=0.2, write_high_water=64 * 1024, write_low_water=16384)
    conn, flood = await flood_until_paused(server, rpc)
    async with asyncio.timeout(10):  # the default 1 s would pass too: the bound is the point
        await rpc.pool.close()
    assert conn.is_closed
    await asyncio.gather(*flood, return_exceptions=True)
