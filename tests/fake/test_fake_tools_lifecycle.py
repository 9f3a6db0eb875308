"""The testing tools' own start and stop, attacked as a user's fixtures meet them: two starts at
once, a stop while a start is under way, a cluster whose event loop ended, many clusters at
once. Each of the first three left listening sockets behind (or a dead cluster that said it
ran) before the fix."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.fake_helpers import produce
from tests.support.leak_checks import open_fds, wait_released
from tubemq_aio import Producer
from tubemq_aio.testing import FakeCluster, FaultProxy


async def test_two_starts_at_once_start_one_cluster() -> None:
    before = open_fds()
    cluster = FakeCluster(topics={"t": 1}, brokers=2)
    await asyncio.gather(cluster.start(), cluster.start())
    await produce(cluster.master_addr, "t", 1)
    await cluster.stop()
    await wait_released(before)


async def test_a_stop_during_the_start_stops_the_cluster() -> None:
    before = open_fds()
    cluster = FakeCluster(topics={"t": 1}, brokers=3)
    starting = asyncio.ensure_future(cluster.start())
    await asyncio.sleep(0)  # the start is under way: one node listens, three do not yet
    await cluster.stop()
    await starting
    assert "stopped" in repr(cluster)
    await wait_released(before)


async def test_a_proxy_starts_once_and_a_close_during_its_start_closes_it() -> None:
    before = open_fds()
    async with FakeCluster(topics={"t": 1}) as cluster:
        proxy = FaultProxy(cluster.broker_addr(1))
        await asyncio.gather(proxy.start(), proxy.start())
        await proxy.close()
        starting = asyncio.ensure_future(proxy.start())
        await asyncio.sleep(0)
        await proxy.close()
        await starting
        assert proxy.open_links == 0
    await wait_released(before)


def test_a_cluster_whose_loop_ended_starts_afresh_on_the_next_loop() -> None:
    # A module-level cluster used by two asyncio.run calls: the first loop's sockets served
    # nobody once it ended, and start() on the next loop returned at once ("already started"),
    # so every client timed out.
    cluster = FakeCluster(topics={"t": 1})

    async def use() -> int:
        await cluster.start()
        return len(await produce(cluster.master_addr, "t", 1))

    assert asyncio.run(use()) == 1
    assert asyncio.run(use()) == 1
    asyncio.run(cluster.stop())


def test_a_cluster_running_on_a_live_loop_is_not_started_on_another() -> None:
    cluster = FakeCluster(topics={"t": 1})
    first = asyncio.new_event_loop()
    try:
        first.run_until_complete(cluster.start())
        with pytest.raises(RuntimeError, match="another event loop"):
            asyncio.run(cluster.start())
        first.run_until_complete(cluster.stop())
    finally:
        first.close()


async def test_many_clusters_at_once_take_distinct_ports_and_leave_nothing() -> None:
    before = open_fds()
    clusters = [FakeCluster(topics={"t": 1}, brokers=2) for _ in range(20)]
    await asyncio.gather(*(c.start() for c in clusters))
    assert len({c.master_addr for c in clusters}) == 20
    await asyncio.gather(*(produce(c.master_addr, "t", 1) for c in clusters[:5]))
    await asyncio.gather(*(c.stop() for c in clusters))
    await wait_released(before)


def test_a_cluster_on_a_loop_that_does_not_run_gives_no_address_to_a_client() -> None:
    # A session-scoped pytest fixture's cluster used by a test on a loop of its own: the
    # client connected, waited for answers its loop could not give, and timed out with hints
    # about framing and TLS. Now the address itself says what is wrong.
    cluster = FakeCluster(topics={"t": 1})
    fixture_loop = asyncio.new_event_loop()
    try:
        fixture_loop.run_until_complete(cluster.start())
        assert cluster.master_addr  # outside any loop: just the address

        async def a_test() -> None:
            with pytest.raises(RuntimeError, match="loop_scope"):
                _ = cluster.master_addr
            with pytest.raises(RuntimeError, match="loop_scope"):
                cluster.broker_addr(1)

        asyncio.run(a_test())
        fixture_loop.run_until_complete(cluster.stop())
    finally:
        fixture_loop.close()


def test_a_proxy_whose_loop_ended_listens_again_on_the_next_loop() -> None:
    # start() on the next loop returned at once ("already listening") and forwarded nothing.
    async def serve_and_use(proxy: FaultProxy | None) -> tuple[FaultProxy, int]:
        async with FakeCluster(topics={"t": 1}) as cluster:
            if proxy is None:
                proxy = FaultProxy(cluster.master_addr)
            proxy.target = ("127.0.0.1", int(cluster.master_addr.rsplit(":", 1)[1]))
            await proxy.start()
            sent = await produce(proxy.addr, "t", 1)
            return proxy, len(sent)

    proxy, sent = asyncio.run(serve_and_use(None))
    assert sent == 1
    assert asyncio.run(serve_and_use(proxy))[1] == 1
    asyncio.run(proxy.close())


def test_a_proxy_on_a_loop_that_does_not_run_gives_no_address() -> None:
    proxy = FaultProxy("127.0.0.1:9")
    fixture_loop = asyncio.new_event_loop()
    try:
        fixture_loop.run_until_complete(proxy.start())

        async def a_test() -> None:
            with pytest.raises(RuntimeError, match="loop_scope"):
                _ = proxy.addr

        asyncio.run(a_test())
        fixture_loop.run_until_complete(proxy.close())
    finally:
        fixture_loop.close()


async def test_a_node_restart_needs_a_stopped_node_of_a_started_cluster() -> None:
    cluster = FakeCluster(topics={"t": 1})
    async with cluster, Producer(cluster.master_addr, topics=["t"]) as producer:
        await producer.send("t", b"x")
        known = dict(cluster.master.producers)
        assert known
        # It wiped the master's clients, then failed with a raw OSError (address in use).
        with pytest.raises(RuntimeError, match="stop_master"):
            await cluster.start_master()
        assert cluster.master.producers == known
    before = open_fds()
    # A broker of a stopped cluster listened on, behind a cluster that said "stopped".
    with pytest.raises(RuntimeError, match="cluster is stopped"):
        await cluster.start_broker(1)
    with pytest.raises(RuntimeError, match="cluster is stopped"):
        await cluster.start_master()
    await wait_released(before)
