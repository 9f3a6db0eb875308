"""The client-balanced consumer's tail check (issue 30): a broker comes back without its
unflushed tail and stores new messages past the group's offset before the consumer
re-connects the partition it lost with the broker. The register answer looks normal; only the
message ids the consumer remembers show that the broker replaced what it had read, and the
group moves back to read every new message (at least once). The same check as the
server-balanced consumer's (tests/fake/test_fake_tail_check.py), reached from the
client-balanced re-connect.
"""

from __future__ import annotations

import logging

import pytest

from tests.support.fake_helpers import cb_consumer, drain, produce
from tests.support.tail_helpers import (
    LOST,
    NEW,
    assert_new_delivered,
    crash_and_refill,
    read_old,
    read_until,
)
from tubemq_aio import ClientBalancedConsumer
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault, wait_until
from tubemq_aio.testing._fake_store import INDEX_UNIT

KEY = "1:demo:0"


def _consumer(cluster: FakeCluster, **options: object) -> ClientBalancedConsumer:
    # rpc_timeout 3: a fetch cut by the broker's stop rests its partition that long
    options.setdefault("rpc_timeout", 3.0)
    return cb_consumer(cluster, "g1", reconnect_delay_max=1.0, **options)


def _tails(consumer: ClientBalancedConsumer) -> set[str]:
    assert consumer._engine is not None
    return {k.format() for k in consumer._engine.tails}


async def test_new_messages_below_the_groups_offset_are_delivered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="tubemq_aio.consumer")
    async with FakeCluster(topics={"demo": 1}) as cluster, _consumer(cluster) as consumer:
        await consumer.connect(KEY)
        old = await read_old(cluster, consumer)
        assert _tails(consumer) == {KEY}
        gate, new = await crash_and_refill(cluster, consumer)
        gate.open()
        got = await read_until(consumer, set(new), timeout=30)
        assert consumer.assignment() == [KEY]
        assert_new_delivered(consumer, got, old, new)
        assert consumer.stats.partitions_reconnected == 1
    warnings = [r.getMessage() for r in caplog.records if "replaced messages" in r.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].startswith(f"group g1 partition {KEY}: the broker replaced messages")


async def test_without_the_check_the_new_messages_below_the_offset_are_skipped() -> None:
    """The fault itself (the client-balanced consumer before the check, or
    ``tail_check_depth=0``): it re-connects at the group's stored offset and the new messages
    below it never arrive."""
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        _consumer(cluster, tail_check_depth=0) as consumer,
    ):
        await consumer.connect(KEY)
        await read_old(cluster, consumer)
        assert _tails(consumer) == set()
        gate, new = await crash_and_refill(cluster, consumer)
        gate.open()
        got = await read_until(consumer, set(new[LOST:]), timeout=8)
        assert sorted(got) == sorted(new[LOST:])
        assert consumer.stats.partitions_reconnected == 1
        assert consumer.stats.tail_checks == 0


async def test_a_broker_that_kept_everything_costs_no_duplicate() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster, _consumer(cluster) as consumer:
        await consumer.connect(KEY)
        await read_old(cluster, consumer)
        await cluster.stop_broker(1)
        await cluster.start_broker(1)
        await wait_until(lambda: consumer.stats.tail_checks == 1, 30, "the tail check")
        assert consumer.assignment() == [KEY]
        new = await produce(cluster.master_addr, "demo", NEW, prefix="new")
        assert sorted(await read_until(consumer, set(new), timeout=20)) == sorted(new)
        assert consumer.stats.tail_rewinds == 0


async def test_a_disconnected_partition_forgets_its_record() -> None:
    """The application disconnected the partition (another node may read it on): connecting
    it again starts a new record and makes no read-back."""
    async with FakeCluster(topics={"demo": 1}) as cluster, _consumer(cluster) as consumer:
        await consumer.connect(KEY)
        await produce(cluster.master_addr, "demo", 10)
        await drain(consumer, 10, timeout=20)
        assert _tails(consumer) == {KEY}
        await consumer.disconnect(KEY)
        assert _tails(consumer) == set()
        await consumer.connect(KEY)
        more = await produce(cluster.master_addr, "demo", 5, prefix="more")
        assert sorted(await drain(consumer, 5, timeout=20)) == sorted(more)
        assert consumer.stats.tail_checks == 0


async def test_positioned_reads_are_not_remembered() -> None:
    """``read_at`` and friends read where the application says: nothing is recorded for them
    and nothing is checked (docs/consumer.md)."""
    async with FakeCluster(topics={"demo": 1}) as cluster, _consumer(cluster) as consumer:
        sent = await produce(cluster.master_addr, "demo", 10)
        read = await consumer.read_at(KEY, 0)
        assert [m.body for m in read.messages] == sent[: len(read.messages)]
        assert len(read.messages) >= 1
        assert _tails(consumer) == set()


async def test_a_check_cut_short_by_close_leaves_the_group_where_it_was_loaded() -> None:
    """The broker's offset file was older than what the consumer read (a SIGKILL loses up to
    about 11 s of commits), so the first probe registers the group above the offset the
    broker loaded. Closing the consumer while that probe's read is held must not leave the
    group there: the next reader would skip what lies between."""
    async with FakeCluster(topics={"demo": 1}) as cluster:
        async with _consumer(cluster) as consumer:
            await consumer.connect(KEY)
            await read_old(cluster, consumer)
            gate, _new = await crash_and_refill(cluster, consumer)
            loaded = 10 * INDEX_UNIT  # the offset the broker had persisted
            cluster.brokers[0].offsets[("g1", "demo", 0)] = loaded
            held = cluster.inject(
                int(Method.BROKER_CONSUMER_GET_MESSAGE), Fault.delay(30.0), times=1
            )
            gate.open()
            await wait_until(lambda: held.hits >= 1, 30, "the first probe's read held")
            assert cluster.group_offset("g1", 1, "demo", 0) > loaded  # the probe moved it up
        assert cluster.group_offset("g1", 1, "demo", 0) == loaded
