"""The transport façade every client uses: envelope, remote errors, timeouts, endpoints."""

from __future__ import annotations

import pytest

from tests.support.echo_server import FakeServer
from tubemq_aio._io.decisions import MAX_WIRE_TIMEOUT_MS
from tubemq_aio._io.pool import Address, ConnectionPool
from tubemq_aio._io.rpc_client import RpcClient
from tubemq_aio._io.settings import TransportSettings
from tubemq_aio.config import HostPort
from tubemq_aio.errors import ConfigError, ConnectError, RemoteRpcError, RequestTimeoutError
from tubemq_aio.protocol.pb import RPC_pb2
from tubemq_aio.protocol.rpc import Method, ServiceType

pytestmark = pytest.mark.timeout(30)


def addr(server: FakeServer) -> Address:
    return Address("127.0.0.1", server.port)


async def test_call_encodes_envelope_and_returns_business_bytes(
    server: FakeServer, settings: TransportSettings
) -> None:
    pool = ConnectionPool(settings)
    rpc = RpcClient(pool)
    body = RPC_pb2.RspExceptionBody(exceptionName="echo", stackTrace="me").SerializeToString()
    response = await rpc.call(addr(server), Method.BROKER_PRODUCER_SEND_MESSAGE, body, 5.0)
    assert response == body
    sent = server.requests[0]
    assert sent.service_type == ServiceType.BROKER_WRITE
    assert sent.method == Method.BROKER_PRODUCER_SEND_MESSAGE
    assert sent.timeout_ms == 5000
    assert sent.protocol_version == 3
    assert rpc.stats is pool.stats
    assert rpc.stats.responses == 1
    await pool.close()


async def test_remote_exception_is_raised(server: FakeServer, settings: TransportSettings) -> None:
    server.knobs.exception = ("java.lang.Exception", "boom", True)
    pool = ConnectionPool(settings)
    rpc = RpcClient(pool)
    with pytest.raises(RemoteRpcError, match="boom") as info:
        await rpc.call(addr(server), Method.MASTER_PRODUCER_REGISTER, b"", 5.0)
    assert info.value.fatal
    await pool.close()


async def test_no_answer_is_a_request_timeout(
    server: FakeServer, settings: TransportSettings
) -> None:
    server.knobs.drop = True
    pool = ConnectionPool(settings)
    rpc = RpcClient(pool)
    with pytest.raises(RequestTimeoutError, match="may or may not"):
        await rpc.call(addr(server), Method.MASTER_PRODUCER_HEARTBEAT, b"x", 0.05)
    await pool.close()


async def test_endpoints_without_tls_flag_use_the_client_default(
    server: FakeServer, settings: TransportSettings
) -> None:
    pool = ConnectionPool(settings)
    rpc = RpcClient(pool)
    peer = HostPort("127.0.0.1", server.port)
    assert not rpc.connected(peer)
    assert await rpc.call(peer, Method.MASTER_PRODUCER_HEARTBEAT, b"9", 5.0) == b"9"
    assert rpc.connected(peer)
    assert list(pool.connections) == [Address("127.0.0.1", server.port, False)]
    tls_rpc = RpcClient(pool, tls=True)
    assert tls_rpc.address(peer) == Address("127.0.0.1", server.port, True)
    assert tls_rpc.address(addr(server)) == addr(server)  # an Address keeps its own flag
    await pool.close()


async def test_connect_without_sending(server: FakeServer, settings: TransportSettings) -> None:
    pool = ConnectionPool(settings)
    rpc = RpcClient(pool)
    conn = await rpc.connect(addr(server))
    assert conn is await rpc.connect(addr(server))
    assert server.requests == []
    await pool.close()
    with pytest.raises(ConnectError):
        await RpcClient(ConnectionPool(settings)).connect(Address("127.0.0.1", 1))


@pytest.mark.parametrize("timeout", [0.0, -1.0, float("nan"), float("inf")])
async def test_bad_timeouts_fail_before_any_io(
    server: FakeServer, settings: TransportSettings, timeout: float
) -> None:
    pool = ConnectionPool(settings)
    rpc = RpcClient(pool)
    with pytest.raises(ConfigError, match="timeout"):
        await rpc.call(addr(server), Method.MASTER_PRODUCER_HEARTBEAT, b"x", timeout)
    assert server.accepted == 0
    await pool.close()


async def test_huge_timeouts_are_capped_on_the_wire(
    server: FakeServer, settings: TransportSettings
) -> None:
    pool = ConnectionPool(settings)
    rpc = RpcClient(pool)
    assert await rpc.call(addr(server), Method.MASTER_PRODUCER_HEARTBEAT, b"x", 1e300) == b"x"
    assert server.requests[0].timeout_ms == MAX_WIRE_TIMEOUT_MS
    await pool.close()
