"""A broker comes back without its unflushed tail and stores new messages past the group's
offset before the server-balanced group registers there again (issue 30): the register answer
looks normal, and only the message ids the consumer remembers show that the broker replaced
what it had read. The group moves back and reads every new message (at least once).
"""

from __future__ import annotations

import logging

import pytest

from tests.support.fake_helpers import drain, group_consumer, produce
from tests.support.tail_helpers import (
    LOST,
    NEW,
    OLD,
    assert_new_delivered,
    crash_and_refill,
    read_old,
    read_until,
)
from tubemq_aio import Consumer
from tubemq_aio.testing import FakeCluster, wait_until
from tubemq_aio.testing._fake_store import INDEX_UNIT

KEY = "1:demo:0"


def _consumer(cluster: FakeCluster, **options: object) -> Consumer:
    # rpc_timeout 3: a fetch cut by the broker's stop rests its partition that long
    options.setdefault("rpc_timeout", 3.0)
    return group_consumer(cluster, "g1", **options)


async def test_new_messages_below_the_groups_offset_are_delivered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="tubemq_aio.consumer")
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        _consumer(cluster) as consumer,
    ):
        old = await read_old(cluster, consumer)
        gate, new = await crash_and_refill(cluster, consumer)
        gate.open()
        got = await read_until(consumer, set(new), timeout=30)
        assert_new_delivered(consumer, got, old, new)
    warnings = [r.getMessage() for r in caplog.records if "replaced messages" in r.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].startswith(f"group g1 partition {KEY}: the broker replaced messages")


async def test_without_the_check_the_new_messages_below_the_offset_are_skipped() -> None:
    """The fault itself (what the consumer did before the check, ``tail_check_depth=0``):
    the group resumes at its stored offset, and the new messages below it never arrive."""
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        _consumer(cluster, tail_check_depth=0) as consumer,
    ):
        await read_old(cluster, consumer)
        gate, new = await crash_and_refill(cluster, consumer)
        gate.open()
        skipped = LOST  # the first LOST new messages took the offsets below the group's
        # read until the rest came (and 0.5 s more): the skipped ones never do
        got = await read_until(consumer, set(new[skipped:]), timeout=8)
        assert sorted(got) == sorted(new[skipped:])
        assert consumer.stats.tail_checks == 0


async def test_a_broker_that_kept_everything_costs_no_duplicate() -> None:
    """The partition is lost with its broker (stopped and started again, nothing lost): the
    check reads the newest batch back, finds it where it was and resumes where the group was."""
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        _consumer(cluster) as consumer,
    ):
        await read_old(cluster, consumer)
        await cluster.stop_broker(1)
        await cluster.start_broker(1)
        await wait_until(lambda: consumer.stats.tail_checks == 1, 30, "the tail check")
        new = await produce(cluster.master_addr, "demo", NEW, prefix="new")
        got = await read_until(consumer, set(new), timeout=20)
        assert sorted(got) == sorted(new)
        assert consumer.stats.tail_rewinds == 0


async def test_a_partition_moved_away_by_the_master_forgets_its_record() -> None:
    async with (
        FakeCluster(topics={"demo": 2}) as cluster,
        _consumer(cluster) as first,
    ):
        await produce(cluster.master_addr, "demo", 20)
        await drain(first, 20, timeout=20)
        assert first._engine is not None
        tails = first._engine.tails
        assert {k.format() for k in tails} == {"1:demo:0", "1:demo:1"}
        async with _consumer(cluster) as second:
            await wait_until(lambda: len(first.assignment()) == 1, 30, "one partition moved")
            await wait_until(lambda: len(second.assignment()) == 1, 30, "the second member")
            assert {k.format() for k in tails} == set(first.assignment())


async def test_a_record_another_member_read_past_is_not_read_back() -> None:
    """Found in the chaos run: after the SIGKILL the partition went to the group's other
    member, which read on; when it came back, the first member's record predated the
    replacement and its read-back moved the group far back. Now a group offset beyond the
    end of the newest remembered batch (as its commit answered) marks the record stale: no
    read-back, the group goes on where the broker loaded it."""
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        _consumer(cluster) as consumer,
    ):
        await read_old(cluster, consumer)
        gate, _new = await crash_and_refill(cluster, consumer)
        # Another member of g1 read the new messages meanwhile (its commits moved the offset).
        read_on = (OLD - LOST + NEW) * INDEX_UNIT
        cluster.brokers[0].offsets[("g1", "demo", 0)] = read_on
        gate.open()
        await wait_until(lambda: consumer.assignment() == [KEY], 30, "the partition back")
        assert consumer.positions()[KEY].current_offset == read_on
        assert not await consumer.getmany(timeout=1.0)  # nothing read twice
        assert consumer.stats.tail_checks == 0
        assert consumer.stats.tail_rewinds == 0
        assert consumer._engine is not None
        assert KEY not in {k.format() for k in consumer._engine.tails}
        more = await produce(cluster.master_addr, "demo", 5, prefix="more")
        assert sorted(await read_until(consumer, set(more), timeout=20)) == sorted(more)
