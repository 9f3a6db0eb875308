"""A stopped fake node or a proxy refusing connections keeps its port until it listens again.

``make test-pythons`` failed once (Python 3.12, 10 workers) in
``test_fake_send_deadline.py::test_a_send_outlives_every_broker_restarting_at_once[send]``:
while every broker was down, the kernel gave one broker's free port to another socket of the
machine, ``start_broker`` failed to bind it ("address already in use", in a task the test
awaited only after the send), the brokers never came back, and the send ended, rightly, with
``ConnectError`` at its deadline. Each test here stands another socket on the stopped port, as
one asking the kernel for a free port could have been given it; each failed before the fix.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from tests.support.leak_checks import open_fds, wait_released
from tests.support.port_probes import another_socket_on, refused
from tubemq_aio import Producer, SendResult
from tubemq_aio.testing import FakeCluster, FaultProxy

pytestmark = pytest.mark.timeout(60)

HOST = "127.0.0.1"


async def test_a_send_outlives_its_brokers_restarting_while_other_sockets_want_ports() -> None:
    async with FakeCluster(topics={"demo": 2}, brokers=2) as cluster:
        async with Producer(cluster.master_addr, topics=["demo"]) as producer:
            assert isinstance(await producer.send("demo", b"warm-up"), SendResult)
            for broker in cluster.brokers:
                await cluster.stop_broker(broker.broker_id)
            sending = asyncio.ensure_future(producer.send("demo", b"during", timeout=6))
            with contextlib.ExitStack() as others:
                for broker in cluster.brokers:
                    others.enter_context(another_socket_on(broker.node.port))
                    assert await refused(broker.node.port)
                for broker in cluster.brokers:
                    await cluster.start_broker(broker.broker_id)
            assert isinstance(await sending, SendResult)
        assert sorted(cluster.bodies("demo")) == [b"during", b"warm-up"]


async def test_a_restarted_master_gets_its_port_back() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        addr = cluster.master_addr
        await cluster.stop_master()
        port = cluster.master.node.port
        with another_socket_on(port):
            assert await refused(port)
            await cluster.start_master()
        assert cluster.master_addr == addr
        async with Producer(addr, topics=["demo"]) as producer:
            assert isinstance(await producer.send("demo", b"x", timeout=5), SendResult)


async def test_a_proxy_refusing_connections_gets_its_port_back() -> None:
    cluster = FakeCluster(topics={"demo": 1})
    async with cluster, FaultProxy(cluster.master_addr) as proxy:
        addr = proxy.addr
        port = int(addr.rsplit(":", 1)[1])
        await proxy.refuse_connections()
        with another_socket_on(port):
            assert await refused(port)
            await proxy.start()
        assert proxy.addr == addr
        _, writer = await asyncio.wait_for(asyncio.open_connection(HOST, port), 5)
        writer.close()


async def test_a_cluster_or_proxy_stopped_for_good_frees_the_held_ports() -> None:
    before = open_fds()
    cluster = FakeCluster(topics={"demo": 1}, brokers=2)
    async with cluster, FaultProxy(cluster.master_addr) as proxy:
        await cluster.stop_broker(1)
        await cluster.stop_master()
        await proxy.refuse_connections()
    await wait_released(before)  # the sockets holding the ports closed too
