"""ClientBalancedConsumer against FakeCluster: metadata, connect, offsets, replay, errors."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.fake_helpers import HEARTBEAT, drain, produce
from tubemq_aio import ClientBalancedConsumer, ServerError, assign_modulo
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault, wait_until
from tubemq_aio.testing._fake_store import TopicLayout


def _consumer(
    cluster: FakeCluster, group: str, node_id: int = 0, sources: int = 1
) -> ClientBalancedConsumer:
    return ClientBalancedConsumer(
        cluster.master_addr,
        group=group,
        topics=["demo"],
        source_count=sources,
        node_id=node_id,
        consume_from="earliest",
        heartbeat_interval=HEARTBEAT,
    )


async def test_metadata_lists_every_partition_of_every_broker() -> None:
    async with FakeCluster(topics={"demo": 3}, brokers=2) as cluster:
        async with _consumer(cluster, "cb1") as consumer:
            metas = await consumer.partitions()
        keys = sorted(m.partition_key for m in metas)
        assert keys == sorted(f"{b}:demo:{p}" for b in (1, 2) for p in range(3))
        assert all(m.subscribable for m in metas)


async def test_two_nodes_split_by_modulo_and_read_everything_once() -> None:
    async with FakeCluster(topics={"demo": 3}, brokers=2) as cluster:
        sent = await produce(cluster.master_addr, "demo", 120)
        got: list[bytes] = []
        async with _consumer(cluster, "cb1", 0, 2) as a, _consumer(cluster, "cb1", 1, 2) as b:
            metas = await a.partitions()
            for node, consumer in enumerate((a, b)):
                for key in assign_modulo(metas, source_count=2, node_id=node):
                    await consumer.connect(key)
            assert len(a.assignment()) + len(b.assignment()) == 6

            def expected(consumer: ClientBalancedConsumer) -> int:
                keys = [k.split(":") for k in consumer.assignment()]
                return sum(
                    len(cluster.brokers[int(b) - 1].log(t, int(p)).partition_messages(int(p)))
                    for b, t, p in keys
                )

            parts = await asyncio.gather(
                drain(a, expected(a), timeout=10), drain(b, expected(b), timeout=10)
            )
            got = parts[0] + parts[1]
        assert sorted(got) == sorted(sent)
        assert cluster.committed_messages("cb1", "demo") == 120


async def test_a_partition_connected_at_its_end_is_fetched_after_msg_not_found_wait() -> None:
    """Connecting a partition with nothing to read sends no fetch at once (it could only
    answer "no new data"); the first comes msg_not_found_wait later, and a message stored
    meanwhile is delivered by it. One with messages is fetched at once."""
    layout = TopicLayout("demo", partitions=1, stores=2)  # partitions 0 and 10000, own stores
    async with FakeCluster(topics={"demo": layout}) as cluster:
        broker = cluster.brokers[0]
        for n in range(4):
            broker.log("demo", 10000).append(n + 1, b"old", 0, partition_id=10000)
        async with ClientBalancedConsumer(
            cluster.master_addr, group="cbend", topics=["demo"], msg_not_found_wait=1.0
        ) as consumer:
            loop = asyncio.get_running_loop()
            began = loop.time()  # before the call: the wait starts inside connect()
            await consumer.connect("1:demo:0")
            await asyncio.sleep(0.3)
            assert consumer.stats.fetches == 0
            broker.log("demo", 0).append(9, b"new", 0, partition_id=0)
            batch = await consumer.getmany(timeout=5.0)
            assert batch.partition_key == "1:demo:0"
            assert [m.body for m in batch] == [b"new"]
            assert loop.time() - began >= 1.0
            assert consumer.stats.fetches == 1
            await batch.ack()
            await consumer.connect("1:demo:10000", offset=0)
            batch = await consumer.getmany(timeout=0.5)  # before a 1 s wait could end
            assert batch.partition_key == "1:demo:10000"
            assert len(batch) == 4


async def test_connect_at_an_offset_replays_from_there() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        sent = await produce(cluster.master_addr, "demo", 10)
        async with _consumer(cluster, "cb1") as consumer:
            position = await consumer.connect("1:demo:0", offset=28 * 7)
            assert position.current_offset == 28 * 7
            assert position.max_offset == 28 * 10
            assert await drain(consumer, 3, timeout=10) == sent[7:]
            assert consumer.positions()["1:demo:0"].lag == 0


async def test_occupied_partition_is_a_typed_error() -> None:
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        _consumer(cluster, "cb1", 0, 2) as a,
        _consumer(cluster, "cb1", 1, 2) as b,
    ):
        await a.connect("1:demo:0")
        with pytest.raises(ServerError) as info:
            await b.connect("1:demo:0")
        assert info.value.err_code == 410


async def test_master_forgetting_the_consumer_makes_it_register_again() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster, _consumer(cluster, "cb1") as consumer:
        await consumer.connect("1:demo:0")
        cluster.master.groups.clear()

        registers = Method.MASTER_CONSUMER_REGISTER_V2
        await wait_until(lambda: cluster.requests(registers) >= 2, 10, "a new register")
        sent = await produce(cluster.master_addr, "demo", 4)
        assert sorted(await drain(consumer, 4, timeout=10)) == sorted(sent)


async def test_refused_register_fails_start() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        cluster.inject(Method.MASTER_CONSUMER_REGISTER_V2, Fault.error(450), times=None)
        consumer = ClientBalancedConsumer(
            cluster.master_addr,
            group="cb1",
            topics=["demo"],
            source_count=1,
            node_id=0,
            register_attempts=1,
        )
        with pytest.raises(ServerError) as info:
            await consumer.start()
        assert info.value.err_code == 450
        await consumer.close()


async def test_automatic_reassignment_connects_at_start_not_a_period_later(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Its first round used to run while the consumer was still starting, fail with "not
    # started" (a WARNING) and leave every partition unread for a whole reassign_interval.
    async with FakeCluster(topics={"demo": 3}, brokers=2) as cluster:
        consumer = ClientBalancedConsumer(
            cluster.master_addr,
            group="cb_auto",
            topics=["demo"],
            source_count=1,
            node_id=0,
            reassign_interval=60.0,
            heartbeat_interval=HEARTBEAT,
        )
        async with consumer:
            await wait_until(lambda: len(consumer.assignment()) == 6, 5, "six partitions connected")
        assert "re-assignment failed" not in caplog.text
