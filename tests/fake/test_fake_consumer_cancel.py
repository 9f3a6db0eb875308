"""Cut-short calls of the consumers: what a cancelled or timed-out call leaves behind.

Each test is a finding: a ``commit()`` cancelled during its acks dropped the batches it had not
reached (they stayed leased until ``confirm_timeout`` and then came again), and
``Consumer.offsets_for_times(timeout=...)`` waited ``rpc_timeout`` for a master that did not
answer its planner's registration instead of ``timeout``.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from tests.support.fake_helpers import group_consumer, produce
from tubemq_aio import Consumer
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
