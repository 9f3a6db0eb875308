"""A call waits for its connection no longer than its own timeout.

Found by sending with ``timeout=0.5`` to a broker whose host drops connection attempts (its
accept queue full, as a powered-off host or a firewall makes): the send took the pool's whole
``connect_timeout``, 5 s, ten times its timeout, and so did the next one. The connect goes on
for the callers with more time (and the next call finds it), but each call gives up at its own
timeout with :class:`WriteTimeoutError` (nothing sent; not counted as a failed connect).
"""

from __future__ import annotations

import asyncio

import pytest

from tests.support.echo_server import unanswered_port
from tubemq_aio import Producer
from tubemq_aio._io.pool import Address, ConnectionPool
from tubemq_aio._io.rpc_client import RpcClient
from tubemq_aio._io.settings import TransportSettings
from tubemq_aio.errors import WriteTimeoutError
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster

pytestmark = [pytest.mark.timeout(60), pytest.mark.also_on_uvloop]
#: Far above the calls' 0.3 s and far below the 20 s connect_timeout.
BOUND = 8.0


async def test_a_call_gives_up_on_a_hanging_connect_at_its_timeout() -> None:
    pool = ConnectionPool(TransportSettings(connect_timeout=20.0))
    rpc = RpcClient(pool)
    loop = asyncio.get_running_loop()
    try:
        with unanswered_port() as port:
            address = Address("127.0.0.1", port)
            began = loop.time()
            with pytest.raises(WriteTimeoutError, match=r"within the call.s 0\.3 s"):
                await rpc.call(address, Method.MASTER_PRODUCER_HEARTBEAT, b"x", 0.3)
            assert loop.time() - began < BOUND
            assert len(pool.background_tasks) >= 1  # the connect itself goes on
    finally:
        await pool.close()
    assert pool.background_tasks == []


async def test_a_send_to_a_broker_whose_connect_hangs_ends_by_its_timeout() -> None:
    with unanswered_port() as port:
        async with FakeCluster(topics={"demo": 1}) as cluster:
            cluster.advertise_broker(1, f"127.0.0.1:{port}")
            async with Producer(
                cluster.master_addr, topics=["demo"], connect_timeout=20.0
            ) as producer:
                loop = asyncio.get_running_loop()
                for _ in range(2):
                    began = loop.time()
                    with pytest.raises(WriteTimeoutError, match="no connection"):
                        await producer.send("demo", b"x", timeout=0.5)
                    assert loop.time() - began < BOUND
