"""The connection an :class:`RpcClient` remembers per host and port, over a real pool and a
loopback server: a closed, reaped or full connection is never used by ``start_parts``, a
reconnect is picked up, TLS and plain never mix, and the tables stay bounded and keep no peer
alive."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from tests.support.echo_server import FakeServer, request_payload
from tubemq_aio._io import rpc_client
from tubemq_aio._io.connection import Connection
from tubemq_aio._io.pool import Address, ConnectionPool
from tubemq_aio._io.rpc_client import RpcClient
from tubemq_aio._io.settings import TransportSettings
from tubemq_aio.config import HostPort
from tubemq_aio.protocol.producer_meta import Broker

pytestmark = pytest.mark.timeout(30)

PAYLOAD = request_payload(b"hi")


class Peer:
    """A mutable endpoint that can be weakly referenced (the models are frozen and slotted)."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port


def start(rpc: RpcClient, peer: object) -> asyncio.Future[bytes] | None:
    started = rpc.start_parts(peer, (PAYLOAD,), len(PAYLOAD), 5.0)  # type: ignore[arg-type]
    return None if started is None else started[2]


async def sent_at_once(rpc: RpcClient, peer: object) -> Connection:
    """``start_parts`` sends now; the answer comes back; returns the connection it used."""
    started = rpc.start_parts(peer, (PAYLOAD,), len(PAYLOAD), 5.0)  # type: ignore[arg-type]
    assert started is not None
    assert await asyncio.wait_for(started[2], 5) == b"hi"
    return started[0]


async def connected(
    server: FakeServer, settings: TransportSettings
) -> tuple[ConnectionPool, RpcClient, Broker, Connection]:
    """A client that sent one call to ``server`` through a broker object, and its connection."""
    pool = ConnectionPool(settings)
    rpc = RpcClient(pool)
    broker = Broker(1, "127.0.0.1", server.port)
    assert await rpc.call_payload(broker, PAYLOAD, 5.0) == b"hi"
    conn = rpc.ready(broker)
    assert conn is not None
    return pool, rpc, broker, conn


async def test_start_parts_needs_an_open_connection_and_reuses_it(
    server: FakeServer, settings: TransportSettings
) -> None:
    pool = ConnectionPool(settings)
    rpc = RpcClient(pool)
    broker = Broker(1, "127.0.0.1", server.port)
    assert start(rpc, broker) is None  # nothing open: the caller falls back to call_payload
    assert await rpc.call_payload(broker, PAYLOAD, 5.0) == b"hi"
    conn = pool.connections[Address("127.0.0.1", server.port)]
    assert await sent_at_once(rpc, broker) is conn
    # Another object with the same host and port: the same connection.
    assert await sent_at_once(rpc, Broker(2, "127.0.0.1", server.port)) is conn
    assert server.accepted == 1
    await pool.close()


@pytest.mark.parametrize("closer", ["client", "peer"])
async def test_a_closed_connection_is_not_reused_and_a_reconnect_is_picked_up(
    server: FakeServer, settings: TransportSettings, closer: str
) -> None:
    pool, rpc, broker, old = await connected(server, settings)
    if closer == "client":
        old.abort()
    else:
        await server.stop(hold_port=True)  # aborts the server side
        await server.start()  # the same port again
    await asyncio.wait_for(old.wait_closed(), 5)
    assert start(rpc, broker) is None  # the remembered connection closed: nothing sent on it
    assert not rpc.connected(broker)
    assert rpc._conns == {"127.0.0.1": {}}  # and it is not kept
    assert await rpc.call_payload(broker, PAYLOAD, 5.0) == b"hi"  # reconnects
    new = await sent_at_once(rpc, broker)
    assert new is not old
    assert not new.is_closed
    assert server.accepted == 2
    await pool.close()


async def test_a_connection_without_room_falls_back(
    server: FakeServer, settings: TransportSettings
) -> None:
    server.knobs.drop = True
    pool = ConnectionPool(TransportSettings(sweep_interval=0.01, max_in_flight=1))
    rpc = RpcClient(pool)
    broker = Broker(1, "127.0.0.1", server.port)
    await rpc.connect(broker)
    held = rpc.start_parts(broker, (PAYLOAD,), len(PAYLOAD), 5.0)
    assert held is not None
    assert start(rpc, broker) is None  # full, but open: the caller's call_payload waits
    assert rpc.ready(broker) is held[0]
    waiting = asyncio.ensure_future(rpc.call_payload(broker, PAYLOAD, 5.0))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    held[0].abandon(held[1])  # room again: the waiting call goes out
    server.knobs.drop = False
    await asyncio.sleep(0.05)
    assert len(server.requests) == 2
    waiting.cancel()
    await pool.close()


async def test_a_reaped_connection_is_not_returned(
    server: FakeServer, settings: TransportSettings
) -> None:
    pool, rpc, broker, conn = await connected(server, settings)
    reaping = asyncio.ensure_future(pool.reap(asyncio.get_running_loop().time() + 10_000))
    await asyncio.sleep(0)  # the reaper has taken it out of the pool, its close not done yet
    assert conn.is_closed
    assert start(rpc, broker) is None
    assert rpc.ready(broker) is None
    assert await reaping == [Address("127.0.0.1", server.port)]
    assert await rpc.call_payload(broker, PAYLOAD, 5.0) == b"hi"  # a new connection
    assert rpc.ready(broker) is not conn
    await pool.close()


async def test_a_closed_pool_leaves_nothing_to_reuse(
    server: FakeServer, settings: TransportSettings
) -> None:
    pool, rpc, broker, _ = await connected(server, settings)
    await pool.close()
    assert start(rpc, broker) is None
    assert rpc.ready(broker) is None


async def test_each_client_keeps_its_own_connections(
    server: FakeServer, settings: TransportSettings
) -> None:
    pool = ConnectionPool(settings)  # even on one pool, TLS and plain clients never mix
    plain = RpcClient(pool)
    tls = RpcClient(pool, tls=True)
    peer = HostPort("127.0.0.1", server.port)
    await plain.call_payload(peer, PAYLOAD, 5.0)
    assert plain.ready(peer) is not None
    assert tls.ready(peer) is None
    assert start(tls, peer) is None
    assert tls.address(peer).tls
    # An Address carries its own flag: the plain client's remembered connection is not it.
    tls_address = Address("127.0.0.1", server.port, True)
    assert plain.ready(tls_address) is None
    assert start(plain, tls_address) is None
    assert start(plain, Address("127.0.0.1", server.port)) is not None
    await pool.close()


async def test_an_object_whose_address_changed_gets_its_new_connection(
    settings: TransportSettings,
) -> None:
    # The connection is found by the peer's address, not by the peer object.
    async with FakeServer() as one, FakeServer() as two:
        pool = ConnectionPool(settings)
        rpc = RpcClient(pool)
        peer = Peer("127.0.0.1", one.port)
        await rpc.call_payload(peer, PAYLOAD, 5.0)
        first = rpc.ready(peer)
        peer.port = two.port
        assert rpc.ready(peer) is None
        assert start(rpc, peer) is None
        await rpc.call_payload(peer, PAYLOAD, 5.0)
        second = rpc.ready(peer)
        assert second is not None
        assert second is not first
        assert second is pool.connections[Address("127.0.0.1", two.port)]
        assert len(two.requests) == 1
        await pool.close()


async def test_the_tables_are_bounded_and_keep_no_peer_alive(
    server: FakeServer, settings: TransportSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rpc_client, "_MAX_REMEMBERED_ADDRESSES", 8)
    pool = ConnectionPool(settings)
    rpc = RpcClient(pool)
    await rpc.connect(HostPort("127.0.0.1", server.port))
    peers = [Peer("127.0.0.1", server.port) for _ in range(20)]
    refs = [weakref.ref(p) for p in peers]
    for peer in peers:
        assert rpc.ready(peer) is not None
    for port in range(1, 30):  # addresses nothing listens on: keys only
        rpc.address(HostPort("127.0.0.1", port))
        assert len(rpc._keys) <= 8
        assert sum(len(ports) for ports in rpc._conns.values()) <= 8
    assert rpc.ready(peers[0]) is not None  # forgotten, found in the pool again
    del peers, peer
    gc.collect()
    assert all(ref() is None for ref in refs)
    await pool.close()
