"""Regression tests of the transport defects found by the hardening review (issue 13).

Each test failed on the transport before its fix: a peer that stops reading (2), the shared pool
across different settings (3), TLS host checks (10), a peer that accepts and resets (11), closed
loops kept alive by the shared pool (14).
"""

from __future__ import annotations

import asyncio
import gc
import socket
import ssl
import weakref
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.echo_server import (
    FakeServer,
    flood_until_paused,
    request_payload,
    small_buffers,
)
from tests.support.self_signed import self_signed_cert
from tubemq_aio._client import open_pool
from tubemq_aio._io.pool import Address, ConnectionPool
from tubemq_aio._io.rpc_client import RpcClient
from tubemq_aio._io.settings import TransportSettings
from tubemq_aio.config import ClientConfig
from tubemq_aio.errors import (
    ClientClosedError,
    ConnectError,
    NetworkError,
    RequestNotSentError,
    RequestTimeoutError,
    WriteTimeoutError,
)
from tubemq_aio.protocol.rpc import Method

pytestmark = pytest.mark.timeout(60)

METHOD = Method.MASTER_PRODUCER_HEARTBEAT


def addr(server: FakeServer, tls: bool = False, host: str = "127.0.0.1") -> Address:
    return Address(host, server.port, tls)


# ---- defect 2: a peer that stops reading -------------------------------------------------------


async def test_call_waiting_for_a_full_write_buffer_ends_at_its_deadline(
    server: FakeServer,
) -> None:
    pool = ConnectionPool(small_buffers())
    rpc = RpcClient(pool)
    conn, flood = await flood_until_paused(server, rpc)
    flooding = conn.waiting  # the flood's calls past the high-water mark wait too
    with pytest.raises(RequestTimeoutError, match="not sent") as info:
        await asyncio.wait_for(rpc.call(addr(server), METHOD, b"late", 0.2), 10.0)
    assert isinstance(info.value, WriteTimeoutError)
    assert conn.waiting <= flooding  # the late call left the queue (the flood's may go on)
    assert not conn.is_closed  # a slow reader is not a dead link
    server.resume_reading()
    assert len(await asyncio.gather(*flood)) == 64
    assert await rpc.call(addr(server), METHOD, b"after", 5.0) == b"after"
    await pool.close()


async def test_cancelled_write_waiters_are_removed(server: FakeServer) -> None:
    pool = ConnectionPool(small_buffers())
    rpc = RpcClient(pool)
    conn, flood = await flood_until_paused(server, rpc)
    flooding = conn.waiting  # the flood's calls past the high-water mark wait too
    waiters = [
        asyncio.create_task(rpc.call(addr(server), METHOD, b"w%d" % i, 30.0)) for i in range(100)
    ]
    await asyncio.sleep(0.05)
    assert conn.waiting >= 100  # behind the flood's own (a drain serves those first)
    for task in waiters:
        task.cancel()
    await asyncio.gather(*waiters, return_exceptions=True)
    assert conn.waiting <= flooding
    server.resume_reading()
    await asyncio.gather(*flood)
    await pool.close()


async def test_waiters_for_an_in_flight_slot_end_at_their_deadline(server: FakeServer) -> None:
    server.knobs.drop = True
    pool = ConnectionPool(TransportSettings(sweep_interval=0.01, max_in_flight=2))
    rpc = RpcClient(pool)
    held = [asyncio.create_task(rpc.call(addr(server), METHOD, b"h", 30.0)) for _ in range(2)]
    await asyncio.sleep(0.05)
    with pytest.raises(WriteTimeoutError, match="in-flight slots"):
        await rpc.call(addr(server), METHOD, b"third", 0.1)
    await pool.close()
    results = await asyncio.gather(*held, return_exceptions=True)
    assert all(isinstance(r, ClientClosedError) for r in results)


async def test_waiters_of_a_lost_connection_fail_as_not_sent(server: FakeServer) -> None:
    server.knobs.drop = True
    pool = ConnectionPool(TransportSettings(sweep_interval=0.01, max_in_flight=1))
    rpc = RpcClient(pool)
    held = asyncio.create_task(rpc.call(addr(server), METHOD, b"h", 30.0))
    await asyncio.sleep(0.05)
    waiting = asyncio.create_task(rpc.call(addr(server), METHOD, b"w", 30.0))
    await asyncio.sleep(0.05)
    await server.stop()
    with pytest.raises(RequestNotSentError, match="before the request was written"):
        await asyncio.wait_for(waiting, 5.0)
    with pytest.raises(Exception, match="may or may not"):
        await held
    await pool.close()


# ---- defect 3: one shared pool per transport settings ------------------------------------------


async def test_shared_pool_is_shared_only_between_identical_settings(server: FakeServer) -> None:
    plain = TransportSettings(sweep_interval=0.01)
    strict_ctx = ssl.create_default_context()
    loose_ctx = ssl.create_default_context()
    loose_ctx.check_hostname = False
    loose_ctx.verify_mode = ssl.CERT_NONE
    a = ConnectionPool.shared(plain)
    b = ConnectionPool.shared(TransportSettings(sweep_interval=0.01))
    strict = ConnectionPool.shared(TransportSettings(sweep_interval=0.01, ssl_context=strict_ctx))
    loose = ConnectionPool.shared(TransportSettings(sweep_interval=0.01, ssl_context=loose_ctx))
    short = ConnectionPool.shared(TransportSettings(sweep_interval=0.01, connect_timeout=0.5))
    assert a is b
    assert len({id(a), id(strict), id(loose), id(short)}) == 4
    assert strict.settings.ssl_context is strict_ctx
    assert loose.settings.ssl_context is loose_ctx
    assert short.settings.connect_timeout == 0.5
    for pool in (a, b, strict, loose, short):
        await pool.close()
    assert all(p.closed for p in (a, strict, loose, short))


async def test_clients_with_different_tls_get_their_own_shared_pools(server: FakeServer) -> None:
    url = f"tubemq://127.0.0.1:{server.port}"
    plain = open_pool(ClientConfig.from_url(url))
    tls = open_pool(ClientConfig.from_url(url.replace("tubemq:", "tubemqs:")))
    assert plain is not tls
    assert tls.settings.ssl_context is not None
    assert tls.settings.ssl_context.verify_mode == ssl.CERT_REQUIRED
    again = open_pool(ClientConfig.from_url(url))
    assert again is plain
    for pool in (plain, tls, again):
        await pool.close()


# ---- defect 10: TLS verifies each peer against the host it dials -------------------------------


@pytest.fixture(name="tls_files", scope="module")
def tls_files_fixture(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate with the names of ``make_tls_material``'s (127.0.0.1,
    127.0.0.2, localhost) and its key; made by ``openssl`` in a fraction of a second, where
    ``make_tls_material`` starts ``keytool`` (a JVM) four times (the real-cluster TLS tests use
    that one)."""
    return self_signed_cert(
        tmp_path_factory.mktemp("tls"), "127.0.0.1", "IP:127.0.0.1,IP:127.0.0.2,DNS:localhost"
    )


@pytest.fixture(name="tls_server")
async def tls_server_fixture(tls_files: tuple[Path, Path]) -> AsyncIterator[FakeServer]:
    cert, key = tls_files
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server = await FakeServer(ssl_context=ctx).start()
    yield server
    await server.stop()


async def test_default_context_verifies_the_peer_host(
    tls_server: FakeServer, tls_files: tuple[Path, Path]
) -> None:
    ctx = ssl.create_default_context(cafile=str(tls_files[0]))
    pool = ConnectionPool(
        TransportSettings(connect_timeout=10.0, ssl_context=ctx, sweep_interval=0.01)
    )
    rpc = RpcClient(pool, tls=True)
    for host in ("127.0.0.1", "localhost"):  # two peers, each checked against its own name
        peer = addr(tls_server, tls=True, host=host)
        assert await rpc.call(peer, METHOD, host.encode(), 5.0) == host.encode()
        conn = pool.ready(peer)
        assert conn is not None
        assert conn._transport is not None
        assert conn._transport.get_extra_info("peercert") is not None
    await pool.close()


async def test_a_certificate_for_another_host_is_refused(tmp_path: Path) -> None:
    cert, key = self_signed_cert(tmp_path, "localhost", "DNS:localhost")
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    async with FakeServer(ssl_context=server_ctx) as server:
        ctx = ssl.create_default_context(cafile=str(cert))
        pool = ConnectionPool(
            TransportSettings(connect_timeout=10.0, ssl_context=ctx, sweep_interval=0.01)
        )
        with pytest.raises(ConnectError, match=r"127\.0\.0\.1"):  # trusted chain, wrong host name
            await pool.connection(addr(server, tls=True))
        assert (
            await (await pool.connection(addr(server, True, "localhost"))).call(
                request_payload(b"ok"), 5.0
            )
            == b"ok"
        )
        await pool.close()
        # The explicit opt-out: a context that checks no host name accepts the mismatch.
        insecure = ssl.create_default_context(cafile=str(cert))
        insecure.check_hostname = False
        pool = ConnectionPool(
            TransportSettings(connect_timeout=10.0, ssl_context=insecure, sweep_interval=0.01)
        )
        conn = await pool.connection(addr(server, tls=True))
        assert await conn.call(request_payload(b"insecure"), 5.0) == b"insecure"
        await pool.close()
        # One shared name for every peer.
        named = TransportSettings(
            connect_timeout=10.0, ssl_context=ctx, tls_server_hostname="localhost"
        )
        pool = ConnectionPool(named)
        conn = await pool.connection(addr(server, tls=True))
        assert await conn.call(request_payload(b"named"), 5.0) == b"named"
        await pool.close()


async def test_tubemqs_url_builds_a_context_that_works(
    tls_server: FakeServer, tls_files: tuple[Path, Path]
) -> None:
    for url in (
        f"tubemqs://127.0.0.1:{tls_server.port}",
        f"tubemq://127.0.0.1:{tls_server.port}?tls=true",
    ):
        cfg = ClientConfig.from_url(url)
        assert cfg.ssl_context is not None
        assert cfg.ssl_context.check_hostname
        cfg.ssl_context.load_verify_locations(cafile=str(tls_files[0]))  # our test CA
        pool = open_pool(cfg)
        rpc = RpcClient(pool, tls=True)
        assert await rpc.call(cfg.masters[0], METHOD, b"url", 5.0) == b"url"
        await pool.close()


# ---- defect 11: a peer that accepts and resets at once -----------------------------------------


async def test_link_reset_before_any_answer_backs_off(server: FakeServer) -> None:
    server.knobs.reset_on_accept = True
    settings = TransportSettings(
        sweep_interval=0.01, backoff_initial=30.0, backoff_max=60.0, backoff_jitter=0.0
    )
    pool = ConnectionPool(settings)
    rpc = RpcClient(pool)
    for _ in range(2):  # the first drop is retried at once, the second starts the backoff
        with pytest.raises(NetworkError):  # lost before or after the request was written
            await rpc.call(addr(server), METHOD, b"x", 5.0)
        for _ in range(100):
            if pool.ready(addr(server)) is None:
                break
            await asyncio.sleep(0.01)
    assert server.accepted == 2
    attempts = []
    for _ in range(200):  # a tight retry loop, as a naive caller would write it
        try:
            await rpc.call(addr(server), METHOD, b"x", 5.0)
        except ConnectError as exc:
            attempts.append(str(exc))
    assert server.accepted == 2
    assert len(attempts) == 200
    assert all("next attempt allowed" in a for a in attempts)
    assert "closed before any answer" in attempts[0]
    await pool.close()


async def test_an_answer_clears_the_backoff(server: FakeServer) -> None:
    settings = TransportSettings(sweep_interval=0.01, backoff_initial=30.0, backoff_max=60.0)
    pool = ConnectionPool(settings)
    rpc = RpcClient(pool)
    assert await rpc.call(addr(server), METHOD, b"1", 5.0) == b"1"
    conn = pool.ready(addr(server))
    assert conn is not None
    for proto in list(server.open):
        assert proto.transport is not None
        proto.transport.abort()  # the peer drops a link that did answer
    await asyncio.wait_for(conn.wait_closed(), 5.0)
    assert await rpc.call(addr(server), METHOD, b"2", 5.0) == b"2"  # no backoff
    assert server.accepted == 2
    await pool.close()


# ---- defect 14: nothing survives a closed loop -------------------------------------------------


def test_no_shared_pool_or_loop_survives_50_asyncio_runs() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(128)
        port = listener.getsockname()[1]
        loops: list[weakref.ref[asyncio.AbstractEventLoop]] = []
        pools: list[weakref.ref[ConnectionPool]] = []

        async def client(close: bool) -> None:
            loops.append(weakref.ref(asyncio.get_running_loop()))
            pool = ConnectionPool.shared(TransportSettings(sweep_interval=0.01))
            pools.append(weakref.ref(pool))
            await pool.connection(Address("127.0.0.1", port))
            if close:
                await pool.close()

        for i in range(50):
            asyncio.run(client(close=i % 2 == 0))  # half never close their client
        gc.collect()
        assert [r for r in loops if r() is not None] == []
        assert [r for r in pools if r() is not None] == []
        assert len(ConnectionPool._shared) == 0
