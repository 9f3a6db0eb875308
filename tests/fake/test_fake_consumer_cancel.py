"""Cut-short calls of the consumers: what a cancelled or timed-out call leaves behind.

Each test is a finding: a ``commit()`` cancelled during its acks dropped the batches it had not
reached (they stayed leased until ``confirm_timeout`` and then came again);
``Consumer.offsets_for_times(timeout=...)`` waited ``rpc_timeout`` for a master that did not
answer its planner's registration instead of ``timeout``; a ``ClientBalancedConsumer.connect``
or ``read_at`` cut short during its broker register left the partition registered at the broker
with nothing to release it (``disconnect`` refused, ``close`` skipped it), so the group's next
member met 410 (occupied) until the broker expired the registration, as after a ``close()``
of a ``Consumer`` in the middle of a register at a slow broker; a cancelled ``run()`` left the
batch in its handler leased until ``confirm_timeout``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import pytest

from tests.support.fake_helpers import cb_consumer, group_consumer, produce
from tubemq_aio import Consumer
from tubemq_aio.consumer.client_balanced import ClientBalancedConsumer
from tubemq_aio.errors import RequestTimeoutError
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault, wait_until

PARTITIONS = 3
COUNT = 30


async def test_a_cancelled_commit_leaves_what_it_did_not_ack_to_the_next_one() -> None:
    async with FakeCluster(topics={"demo": PARTITIONS}) as cluster:
        await produce(cluster.master_addr, "demo", COUNT)
        async with group_consumer(cluster, "g1", auto_ack=False) as consumer:
            await wait_until(lambda: len(consumer.assignment()) == PARTITIONS, 20, "assigned")
            got = 0
            async for _ in consumer:  # one batch per partition, all yielded
                got += 1
                if got == COUNT:
                    break
            cluster.inject(Method.BROKER_CONSUMER_COMMIT, Fault.delay(30.0), times=None)
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.5):  # cut short during the first batch's commit
                    await consumer.commit()
            cluster.clear_faults()
            # The batch whose commit was cut short settled (its flag rides on the next fetch);
            # the others are acked now, not left leased until confirm_timeout.
            assert await consumer.commit() == PARTITIONS - 1
            await wait_until(
                lambda: cluster.committed_messages("g1", "demo") == COUNT, 10, "all committed"
            )
            assert not await consumer.getmany(timeout=0.3)  # nothing comes again


async def test_offsets_for_times_keeps_its_timeout_when_the_master_does_not_answer() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        consumer = Consumer(cluster.master_addr, group="g1", topics=["demo"], rpc_timeout=60)
        cluster.inject(Method.MASTER_CONSUMER_REGISTER_V2, Fault.no_answer(), times=None)
        when = {"1:demo:0": datetime.now(UTC)}
        async with asyncio.timeout(30):  # the planner's register alone waited rpc_timeout
            with pytest.raises(RequestTimeoutError, match="took longer than 1 s"):
                await consumer.offsets_for_times(when, timeout=1)
        cluster.clear_faults()
        assert await consumer.offsets_for_times({}) == {}
        assert cluster.requests(Method.MASTER_CONSUMER_REGISTER_V2) == 1  # none for {}
        assert list(await consumer.offsets_for_times(when, timeout=10)) == ["1:demo:0"]


async def _connect(consumer: ClientBalancedConsumer, key: str) -> object:
    return await consumer.connect(key)


async def _read_at(consumer: ClientBalancedConsumer, key: str) -> object:
    return await consumer.read_at(key, 0)


@pytest.mark.parametrize("call", [_connect, _read_at])
@pytest.mark.parametrize("release", ["disconnect", "close"])
async def test_a_register_cut_short_is_released_by_disconnect_and_close(
    call: Callable[[ClientBalancedConsumer, str], Awaitable[object]], release: str
) -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        await produce(cluster.master_addr, "demo", 5)
        first = cb_consumer(cluster, "g1", rpc_timeout=3)
        async with first:
            key = (await first.partitions())[0].partition_key
            # The broker registers at once and answers a second later; the call is cut short.
            cluster.inject(Method.BROKER_CONSUMER_REGISTER, Fault.delay(1.0))
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.3):
                    await call(first, key)
            if release == "disconnect":
                await first.disconnect(key)  # refused before: "not connected"
        async with cb_consumer(cluster, "g1") as second:
            position = await second.connect(key)  # PartitionOccupiedError before
            assert position.partition_key == key


async def test_a_cancelled_run_hands_the_batch_in_its_handler_back_at_once() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        sent = await produce(cluster.master_addr, "demo", 5)
        async with group_consumer(cluster, "g1") as consumer:
            started = asyncio.Event()

            async def handler(_: object) -> None:
                started.set()
                await asyncio.Event().wait()  # never done

            task = asyncio.create_task(consumer.run(handler))
            await asyncio.wait_for(started.wait(), 20)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # Nacked, not left leased until confirm_timeout (60 s) with its partition idle.
            batch = await consumer.getmany(timeout=5)
            assert sorted(m.body for m in batch) == sorted(sent)


async def test_releasing_a_register_cut_short_at_a_broker_that_answers_nothing_is_bounded() -> None:
    """The unregister of a register cut short is written and its answer awaited only briefly:
    a broker that answers nothing must not hold ``close()`` for ``rpc_timeout``."""
    async with FakeCluster(topics={"demo": 1}) as cluster:
        consumer = cb_consumer(cluster, "g1", rpc_timeout=60, close_timeout=60)
        async with consumer:
            key = (await consumer.partitions())[0].partition_key
            cluster.inject(Method.BROKER_CONSUMER_REGISTER, Fault.no_answer(), times=None)
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.3):
                    await consumer.connect(key)
            async with asyncio.timeout(30):  # close_timeout and rpc_timeout are 60 s
                await consumer.close()
        assert cluster.requests(Method.BROKER_CONSUMER_REGISTER) == 2  # the unregister went out


async def test_a_close_during_a_register_at_a_slow_broker_releases_it() -> None:
    """``close()`` waits ``close_rebalance_wait`` for a rebalance event, then cancels it: a
    register the broker had then stayed there, and the group's next member got the partition
    only once the broker expired it (30 s on the fake, about 35 s on a real broker)."""
    async with FakeCluster(topics={"demo": 1}) as cluster:
        await produce(cluster.master_addr, "demo", 5)
        cluster.inject(Method.BROKER_CONSUMER_REGISTER, Fault.delay(3.0))
        first = group_consumer(cluster, "g1", close_rebalance_wait=0.5)
        async with first:
            await wait_until(
                lambda: cluster.requests(Method.BROKER_CONSUMER_REGISTER) == 1, 20, "a register"
            )
        async with group_consumer(cluster, "g1") as second:
            assert await second.wait_for_assignment(timeout=15)  # AssignmentTimeoutError before
