"""``await consumer.commit()`` after leaving ``async for`` with ``break``: what the loop yielded
counts as consumed at once (it returned 0 before, and the batch was settled a moment later).

TubeMQ commits whole broker batches. So: a batch every message of which was yielded is committed
at the broker by ``commit()``; a batch left in the middle is split, the yielded part acked and
the rest handed back first in line, and the broker's offset moves past the batch once the rest
was acked too (until then a restart delivers the whole batch again: at-least-once).
"""

from __future__ import annotations

import asyncio

import pytest

from tests.support.fake_helpers import group_consumer, produce
from tubemq_aio import Consumer
from tubemq_aio.models import Message
from tubemq_aio.testing import FakeCluster, wait_until

COUNT = 10  # one broker batch: the fake's max_batch is 64


async def _take(consumer: Consumer, count: int) -> list[Message]:
    got: list[Message] = []
    async for msg in consumer:
        got.append(msg)
        if len(got) == count:
            break
    return got


@pytest.mark.parametrize("auto_ack", [True, False])
async def test_commit_after_break_keeps_the_yielded_part_and_hands_back_the_rest(
    auto_ack: bool,
) -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        sent = await produce(cluster.master_addr, "demo", COUNT)
        async with group_consumer(cluster, "g1", auto_ack=auto_ack) as consumer:
            first = await _take(consumer, 3)
            assert await consumer.commit() == 1  # the yielded part, acked now
            assert cluster.committed_messages("g1", "demo") == 0  # the batch is not whole yet
            rest = await _take(consumer, COUNT - 3)  # exactly the rest, without a new fetch
            assert sorted(m.body for m in first + rest) == sorted(sent)
            assert await consumer.commit() == 1
            assert cluster.committed_messages("g1", "demo") == COUNT
            assert await consumer.commit() == 0  # nothing left to commit
            assert not await consumer.getmany(timeout=0.3)  # and nothing comes again


async def test_commit_after_a_break_at_the_end_of_a_batch_commits_it_at_the_broker() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        await produce(cluster.master_addr, "demo", COUNT)
        async with group_consumer(cluster, "g1") as consumer:
            assert len(await _take(consumer, COUNT)) == COUNT
            assert await consumer.commit() == 1
            assert cluster.committed_messages("g1", "demo") == COUNT


async def test_commit_leaves_a_running_loop_alone() -> None:
    """A loop of another task, paused in the middle of its batch, keeps it: no message skipped
    and none delivered twice."""
    async with FakeCluster(topics={"demo": 1}) as cluster:
        sent = await produce(cluster.master_addr, "demo", COUNT)
        async with group_consumer(cluster, "g1") as consumer:
            paused, resume = asyncio.Event(), asyncio.Event()
            got: list[bytes] = []

            async def loop() -> None:
                async for msg in consumer:
                    got.append(msg.body)
                    if len(got) == 2:
                        paused.set()
                        await resume.wait()
                    if len(got) == COUNT:
                        break

            task = asyncio.create_task(loop())
            await asyncio.wait_for(paused.wait(), 20)
            assert await consumer.commit() == 0  # its batch is still being iterated
            resume.set()
            await asyncio.wait_for(task, 20)
            assert sorted(got) == sorted(sent)
            # The loop's break fell on the batch's last message: commit() or, if it ran first,
            # the loop's own ending (in its task's aclose) acks the whole batch.
            assert await consumer.commit() in (0, 1)
            await wait_until(lambda: cluster.committed_messages("g1", "demo") == COUNT, 10, "ack")


async def test_a_dropped_loop_without_commit_still_ends_by_itself() -> None:
    """Without ``commit()`` the loops' own endings do the same a moment later (auto_ack)."""
    async with FakeCluster(topics={"demo": 1}) as cluster:
        sent = await produce(cluster.master_addr, "demo", COUNT)
        async with group_consumer(cluster, "g1") as consumer:
            first = await _take(consumer, 4)
            rest = await _take(consumer, COUNT - 4)
            assert sorted(m.body for m in first + rest) == sorted(sent)
            await wait_until(lambda: cluster.committed_messages("g1", "demo") == COUNT, 10, "acks")
