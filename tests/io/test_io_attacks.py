"""Attacks on the pool and connection API: cancellation at each await, two tasks at once, close
while connecting or waiting, a peer that stops reading or never finishes its TLS handshake."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Iterator

import pytest

from tests.support.echo_server import (
    FakeServer,
    MemoryTransport,
    flood_until_paused,
    request_payload,
    small_buffers,
)
from tubemq_aio._io.connection import Connection
from tubemq_aio._io.pool import Address, ConnectionPool
from tubemq_aio._io.rpc_client import RpcClient
from tubemq_aio._io.settings import TransportSettings
from tubemq_aio.errors import ClientClosedError, ConnectError, WriteTimeoutError
from tubemq_aio.protocol.framing import encode_frame
from tubemq_aio.protocol.rpc import Method, encode_success

pytestmark = pytest.mark.timeout(60)

METHOD = Method.MASTER_PRODUCER_HEARTBEAT


def addr(server: FakeServer, tls: bool = False) -> Address:
    return Address("127.0.0.1", server.port, tls)


async def settle(ticks: int = 5) -> None:
    for _ in range(ticks):
        await asyncio.sleep(0)


async def test_a_slot_handed_to_a_cancelled_waiter_passes_to_the_next() -> None:
    conn = Connection("memory", TransportSettings(max_in_flight=1))
    conn.connection_made(MemoryTransport())
    first = asyncio.create_task(conn.call(request_payload(b"1"), 5.0))
    second = asyncio.create_task(conn.call(request_payload(b"2"), 5.0))
    third = asyncio.create_task(conn.call(request_payload(b"3"), 5.0))
    await settle()
    assert conn.in_flight == 1
    assert conn.waiting == 2
    # The answer frees the slot and wakes `second`; it is cancelled in the same tick.
    conn.data_received(encode_frame(1, encode_success(1, b"1")))
    second.cancel()
    await settle()
    assert await first == b"1"
    assert second.cancelled()
    assert conn.waiting == 0
    assert conn.in_flight == 1  # `third` took the slot instead of waiting for its deadline
    conn.data_received(encode_frame(2, encode_success(1, b"3")))
    assert await asyncio.wait_for(third, 5.0) == b"3"
    conn.abort()


async def test_cancelling_one_connect_waiter_leaves_the_others_connected(
    server: FakeServer, settings: TransportSettings
) -> None:
    pool = ConnectionPool(settings)
    waiters = [asyncio.create_task(pool.connection(addr(server))) for _ in range(3)]
    await asyncio.sleep(0)
    waiters[0].cancel()
    done = await asyncio.gather(*waiters, return_exceptions=True)
    assert isinstance(done[0], asyncio.CancelledError)
    assert done[1] is done[2]
    assert isinstance(done[1], Connection)
    assert server.accepted == 1
    await pool.close()


async def test_pool_close_ends_calls_waiting_for_write_room(server: FakeServer) -> None:
    pool = ConnectionPool(small_buffers())
    rpc = RpcClient(pool)
    conn, flood = await flood_until_paused(server, rpc)
    waiting = asyncio.create_task(rpc.call(addr(server), METHOD, b"w", 30.0))
    await asyncio.sleep(0.05)
    assert conn.waiting >= 1  # the call, behind the flood's calls past the high-water mark
    await asyncio.wait_for(pool.close(), 5.0)
    with pytest.raises(ClientClosedError):
        await waiting
    results = await asyncio.gather(*flood, return_exceptions=True)
    assert all(isinstance(r, ClientClosedError) for r in results)


async def test_reaper_leaves_a_connection_whose_callers_wait_for_room(server: FakeServer) -> None:
    pool = ConnectionPool(small_buffers(idle_timeout=0.3))
    rpc = RpcClient(pool)
    # Written calls that expire at once: nothing in flight, the buffer stays full. The waiting
    # call starts before they end, so the connection is never idle without a caller (a gap of
    # idle_timeout between the two, as a loaded machine made, would let the reaper in).
    conn, flood = await flood_until_paused(server, rpc, timeout=0.05)

    async def wait_for_room() -> int:
        with pytest.raises(WriteTimeoutError):  # its own deadline ends it, not the reaper
            await rpc.call(addr(server), METHOD, b"w", 1.5)
        return pool.stats.connections_reaped  # read in the step the wait ended (no await)

    waiting = asyncio.create_task(wait_for_room())
    await asyncio.gather(*flood, return_exceptions=True)
    assert conn.writing_paused
    assert conn.in_flight == 0
    assert await waiting == 0
    await pool.close()


async def test_two_concurrent_closes_both_finish(
    server: FakeServer, settings: TransportSettings
) -> None:
    pool = ConnectionPool(settings)
    conn = await pool.connection(addr(server))
    await asyncio.wait_for(asyncio.gather(pool.close(), pool.close()), 5.0)
    assert conn.is_closed
    assert pool.background_tasks == []
    await pool.close()  # and once more, after the fact


@pytest.fixture(name="silent_port")
def silent_port_fixture() -> Iterator[int]:
    """A listener that accepts (through its backlog) and never says a word."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener.getsockname()[1]


async def test_tls_handshake_that_never_completes_ends_at_connect_timeout(
    silent_port: int,
) -> None:
    settings = TransportSettings(
        ssl_context=ssl.create_default_context(),
        connect_timeout=0.3,
        backoff_initial=30.0,
        backoff_max=60.0,
    )
    pool = ConnectionPool(settings)
    address = Address("127.0.0.1", silent_port, True)
    with pytest.raises(ConnectError, match=r"timed out after 0\.3 s"):
        await asyncio.wait_for(pool.connection(address), 5.0)
    with pytest.raises(ConnectError, match="next attempt allowed"):
        await pool.connection(address)
    assert pool.background_tasks == []
    await pool.close()
