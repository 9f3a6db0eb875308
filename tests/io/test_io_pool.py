"""The pool: reuse, idle reaping, reconnect backoff, shared vs private, clean close, TLS."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest

from tests.support.echo_server import FakeServer, request_payload, unanswered_port
from tests.support.leak_checks import open_fds, wait_released
from tests.support.self_signed import self_signed_cert
from tubemq_aio._io.pool import Address, ConnectionPool
from tubemq_aio._io.settings import TransportSettings
from tubemq_aio.errors import ClientClosedError, ConfigError, ConnectError

pytestmark = pytest.mark.timeout(30)


def addr(server: FakeServer, tls: bool = False) -> Address:
    return Address("127.0.0.1", server.port, tls)


async def test_concurrent_callers_share_one_connect(
    server: FakeServer, settings: TransportSettings
) -> None:
    pool = ConnectionPool(settings)
    conns = await asyncio.gather(*(pool.connection(addr(server)) for _ in range(10)))
    assert all(c is conns[0] for c in conns)
    assert server.accepted == 1
    assert await pool.connection(addr(server)) is conns[0]
    assert "127.0.0.1" in repr(pool)
    assert "private" in repr(pool)
    await pool.close()


async def test_idle_connection_is_reaped(server: FakeServer) -> None:
    settings = TransportSettings(sweep_interval=0.01, idle_timeout=0.2)
    pool = ConnectionPool(settings)
    conn = await pool.connection(addr(server))
    assert await conn.call(request_payload(b"x"), 5.0) == b"x"
    await asyncio.sleep(0.5)
    assert pool.connections == {}
    assert conn.is_closed
    assert pool.stats.connections_reaped == 1
    fresh = await pool.connection(addr(server))
    assert fresh is not conn
    await pool.close()


async def test_busy_connection_is_not_reaped(server: FakeServer) -> None:
    server.knobs.delay = 0.4
    settings = TransportSettings(sweep_interval=0.01, idle_timeout=0.1)
    pool = ConnectionPool(settings)
    conn = await pool.connection(addr(server))
    assert await conn.call(request_payload(b"slow"), 5.0) == b"slow"
    assert pool.stats.connections_reaped == 0
    await pool.close()


async def test_reconnect_after_server_restart_with_backoff(server: FakeServer) -> None:
    settings = TransportSettings(
        sweep_interval=0.01, backoff_initial=0.5, backoff_jitter=0.0, connect_timeout=10.0
    )
    pool = ConnectionPool(settings, rand=lambda: 0.0)
    assert pool.retry_in(addr(server)) == 0.0  # never failed
    first = await pool.connection(addr(server))
    assert await first.call(request_payload(b"1"), 5.0) == b"1"
    assert pool.retry_in(addr(server)) == 0.0  # connected
    port = server.port
    await server.stop(hold_port=True)  # refused meanwhile; the restart gets the port back
    await asyncio.wait_for(first.wait_closed(), 10.0)
    assert first.is_closed
    with pytest.raises(ConnectError, match="cannot connect"):
        await pool.connection(addr(server))
    with pytest.raises(ConnectError, match=r"next attempt allowed in 0\.[0-5]"):
        await pool.connection(addr(server))
    assert 0.0 < pool.retry_in(addr(server)) <= 0.5  # what a caller waits for before retrying
    await server.start(port)
    with pytest.raises(ConnectError, match="next attempt allowed"):
        await pool.connection(addr(server))  # still in backoff although the server is back
    await asyncio.sleep(0.55)
    assert pool.retry_in(addr(server)) == 0.0
    second = await pool.connection(addr(server))
    assert second is not first
    assert await second.call(request_payload(b"2"), 5.0) == b"2"
    assert pool.stats.reconnects == 1
    assert pool.stats.connect_failures == 1
    await pool.close()


async def test_shared_pool_reuses_connection_across_clients(server: FakeServer) -> None:
    a = ConnectionPool.shared(TransportSettings(sweep_interval=0.01))
    b = ConnectionPool.shared(TransportSettings(sweep_interval=0.01))  # equal settings: shared
    assert a is b
    assert a.is_shared
    conn_a = await a.connection(addr(server))
    conn_b = await b.connection(addr(server))
    assert conn_a is conn_b
    assert server.accepted == 1
    assert "shared refs=2" in repr(a)
    await a.close()
    assert not b.closed
    assert await conn_b.call(request_payload(b"still"), 5.0) == b"still"
    await b.close()
    assert b.closed
    assert conn_b.is_closed
    c = ConnectionPool.shared()
    assert c is not a
    await c.close()


async def test_private_pools_do_not_share(server: FakeServer, settings: TransportSettings) -> None:
    a = ConnectionPool(settings)
    b = ConnectionPool(settings)
    conn_a = await a.connection(addr(server))
    conn_b = await b.connection(addr(server))
    assert conn_a is not conn_b
    assert server.accepted == 2
    await a.close()
    await b.close()


async def test_close_leaves_no_tasks_and_no_sockets(settings: TransportSettings) -> None:
    fds_before = open_fds()
    servers = [await FakeServer().start() for _ in range(2)]
    for s in servers:
        s.knobs.drop = True
    tasks_before = asyncio.all_tasks()
    pool = ConnectionPool(settings)
    conns = [await pool.connection(addr(s)) for s in servers]
    calls = [asyncio.create_task(c.call(request_payload(b"p"), 30.0)) for c in conns]
    await asyncio.sleep(0.02)
    assert len(pool.background_tasks) == 2
    await pool.close()
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(r, ClientClosedError) for r in results)
    assert pool.background_tasks == []
    assert asyncio.all_tasks() == tasks_before
    assert "closed=True" in repr(pool)
    with pytest.raises(ClientClosedError):
        await pool.connection(addr(servers[0]))
    for s in servers:
        await s.stop()
    await wait_released(fds_before)  # the servers' sockets close on a later loop iteration


async def test_connect_timeout() -> None:
    with unanswered_port() as port:
        pool = ConnectionPool(TransportSettings(connect_timeout=0.2, sweep_interval=0.01))
        with pytest.raises(ConnectError, match=r"timed out after 0\.2 s"):
            await pool.connection(Address("127.0.0.1", port))
        await pool.close()


async def test_close_while_connecting_fails_waiters_with_client_closed() -> None:
    with unanswered_port() as port:
        pool = ConnectionPool(TransportSettings(connect_timeout=5.0, sweep_interval=0.01))
        waiters = [
            asyncio.create_task(pool.connection(Address("127.0.0.1", port))) for _ in range(3)
        ]
        await asyncio.sleep(0.05)
        assert "connecting=1" in repr(pool)
        await pool.close()
        results = await asyncio.gather(*waiters, return_exceptions=True)
        assert all(isinstance(r, ClientClosedError) for r in results), results


async def test_tls_without_and_with_hostname_check(tmp_path: Path) -> None:
    cert, key = self_signed_cert(tmp_path)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    server = await FakeServer(ssl_context=server_ctx).start()

    no_check = ssl.create_default_context(cafile=str(cert))
    no_check.check_hostname = False
    pool = ConnectionPool(
        TransportSettings(connect_timeout=10.0, ssl_context=no_check, sweep_interval=0.01)
    )
    conn = await pool.connection(addr(server, tls=True))
    assert await conn.call(request_payload(b"secret"), 5.0) == b"secret"
    await pool.close()

    checked = ssl.create_default_context(cafile=str(cert))
    pool = ConnectionPool(
        TransportSettings(
            connect_timeout=10.0,
            ssl_context=checked,
            tls_server_hostname="localhost",
            sweep_interval=0.01,
        )
    )
    conn = await pool.connection(addr(server, tls=True))
    assert await conn.call(request_payload(b"named"), 5.0) == b"named"
    await pool.close()

    pool = ConnectionPool(TransportSettings(sweep_interval=0.01))
    with pytest.raises(ConfigError, match="ssl_context"):
        await pool.connection(addr(server, tls=True))
    await pool.close()
    await server.stop()
