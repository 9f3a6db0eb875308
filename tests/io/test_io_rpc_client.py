"""The RPC façade: protobuf in and out, remote errors, async with callback, oneway."""

from __future__ import annotations

import asyncio

import pytest
from echo_server import FakeServer, server_fixture, settings_fixture  # noqa: F401

from tubemq_aio._io.pool import Address, ConnectionPool
from tubemq_aio._io.rpc_client import RpcClient
from tubemq_aio._io.settings import TransportSettings
from tubemq_aio.config import HostPort
from tubemq_aio.errors import RemoteProtocolError, RemoteRpcError, RequestTimeoutError
from tubemq_aio.protocol._pb import RPC_pb2
from tubemq_aio.protocol.rpc import Method, ServiceType, encode_success

pytestmark = pytest.mark.timeout(30)


def addr(server: FakeServer) -> Address:
    return Address("127.0.0.1", server.port)


async def test_call_encodes_envelope_and_parses_response(
    server: FakeServer, settings: TransportSettings
) -> None:
    pool = ConnectionPool(settings)
    rpc = RpcClient(pool)
    request = RPC_pb2.RspExceptionBody(exceptionName="echo", stackTrace="me")
    response = await rpc.call(
        addr(server), Method.BROKER_PRODUCER_SEND_MESSAGE, request, RPC_pb2.RspExceptionBody, 2.5
    )
    assert response == request
    sent = server.requests[0]
    assert sent.service_type == ServiceType.BROKER_WRITE
    assert sent.method == Method.BROKER_PRODUCER_SEND_MESSAGE
    assert sent.timeout_ms == 2500
    assert sent.protocol_version == 3
    await pool.close()


async def test_remote_exception_is_raised(server: FakeServer, settings: TransportSettings) -> None:
    server.knobs.exception = ("java.lang.Exception", "boom", True)
    pool = ConnectionPool(settings)
    rpc = RpcClient(pool)
    with pytest.raises(RemoteRpcError, match="boom") as info:
        await rpc.call(
            addr(server), Method.MASTER_PRODUCER_REGISTER, RPC_pb2.RpcConnHeader(flag=0),
            RPC_pb2.RpcConnHeader, 1.0,
        )  # fmt: skip
    assert info.value.fatal
    await pool.close()


async def test_unparsable_business_response(
    server: FakeServer, settings: TransportSettings
) -> None:
    server.knobs.handler = lambda request: encode_success(request.method, b"\xff\xff\xff")
    pool = ConnectionPool(settings)
    rpc = RpcClient(pool)
    with pytest.raises(RemoteProtocolError, match="cannot parse"):
        await rpc.call(
            addr(server), Method.MASTER_PRODUCER_REGISTER, RPC_pb2.RpcConnHeader(flag=1),
            RPC_pb2.RspExceptionBody, 1.0,
        )  # fmt: skip
    await pool.close()


async def test_call_async_with_callback_and_timeout(
    server: FakeServer, settings: TransportSettings
) -> None:
    pool = ConnectionPool(settings)
    rpc = RpcClient(pool)
    done: list[int] = []
    fut = await rpc.call_async(
        addr(server), Method.MASTER_PRODUCER_HEARTBEAT, RPC_pb2.RpcConnHeader(flag=5),
        RPC_pb2.RpcConnHeader, 1.0, callback=lambda f: done.append(f.result().flag),
    )  # fmt: skip
    assert (await fut).flag == 5
    await asyncio.sleep(0)
    assert done == [5]
    server.knobs.drop = True
    fut = await rpc.call_async(
        addr(server), Method.MASTER_PRODUCER_HEARTBEAT, RPC_pb2.RpcConnHeader(flag=6),
        RPC_pb2.RpcConnHeader, 0.05,
    )  # fmt: skip
    with pytest.raises(RequestTimeoutError):
        await fut
    await pool.close()


async def test_call_oneway(server: FakeServer, settings: TransportSettings) -> None:
    pool = ConnectionPool(settings)
    rpc = RpcClient(pool)
    await rpc.call_oneway(
        addr(server), Method.MASTER_PRODUCER_CLOSE, RPC_pb2.RpcConnHeader(flag=3), 1.0
    )
    for _ in range(100):
        if server.requests:
            break
        await asyncio.sleep(0.01)
    assert server.requests[0].method == Method.MASTER_PRODUCER_CLOSE
    assert (await pool.connection(addr(server))).in_flight == 0
    await pool.close()


async def test_endpoints_without_tls_flag_use_the_client_default(
    server: FakeServer, settings: TransportSettings
) -> None:
    pool = ConnectionPool(settings)
    rpc = RpcClient(pool)
    response = await rpc.call(
        HostPort("127.0.0.1", server.port), Method.MASTER_PRODUCER_HEARTBEAT,
        RPC_pb2.RpcConnHeader(flag=9), RPC_pb2.RpcConnHeader, 1.0,
    )  # fmt: skip
    assert response.flag == 9
    assert list(pool.connections) == [Address("127.0.0.1", server.port, False)]
    await pool.close()
