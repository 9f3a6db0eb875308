"""Positioned reads of different partitions run at once; of one partition, in turn (issue 34).

``read_with`` held one consumer-wide lock, so ``read_at`` on different partitions, and the time
search behind ``offsets_for_times``, ran one partition after the other. The broker keeps one read
cursor per group and partition, so only calls on the same partition need to wait for each other.

Overlap is shown by the broker, not by a clock: its GetMessage answers are held back, and the
second partition's GetMessage reaches the broker while the first one's answer is still held
(with the one lock it could only be sent after that answer).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

import pytest

from tests.support.fake_helpers import produce
from tubemq_aio import ClientBalancedConsumer, PartitionAlreadyConnectedError
from tubemq_aio.consumer.client_balanced import PositionedRead
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault
from tubemq_aio.testing.polling import wait_until

pytestmark = pytest.mark.timeout(60)

GET = Method.BROKER_CONSUMER_GET_MESSAGE
COMMIT = Method.BROKER_CONSUMER_COMMIT
#: How long the fake broker holds a GetMessage answer back.
HOLD = 1.5
KEYS = ["1:demo:0", "1:demo:1", "1:demo:2"]


def _consumer(cluster: FakeCluster, **options: object) -> ClientBalancedConsumer:
    return ClientBalancedConsumer(
        cluster.master_addr,
        group="par",
        topics=["demo"],
        consume_from="earliest",
        **options,  # type: ignore[arg-type]
    )


def _commits(cluster: FakeCluster) -> int:
    return cluster.brokers[0].node.requests.get(int(COMMIT), 0)


async def _until(done: Callable[[], bool]) -> None:
    """Poll until ``done()`` (the callers' own conditions end it; the limit only bounds a bug)."""
    await wait_until(done, 10 * HOLD, "the reads reached the broker", interval=0.01)


async def _serial_reads(consumer: ClientBalancedConsumer) -> dict[str, list[bytes]]:
    out = {}
    for key in KEYS:
        got = await consumer.read_at(key, 0)
        out[key] = [m.body for m in got.messages]
    return out


async def _two_reads_at_the_broker(
    cluster: FakeCluster, consumer: ClientBalancedConsumer
) -> tuple[asyncio.Task[PositionedRead], asyncio.Task[PositionedRead]]:
    """Start ``read_at`` of the first two partitions at 0 while the broker holds GetMessage
    answers back; return once both requests reached it, neither answer having come back."""
    held = cluster.inject(GET, Fault.delay(HOLD), times=2)
    committed = _commits(cluster)
    first = asyncio.create_task(consumer.read_at(KEYS[0], 0))
    second = asyncio.create_task(consumer.read_at(KEYS[1], 0))
    await _until(lambda: held.hits == 2 or first.done() or second.done())
    assert held.hits == 2
    assert _commits(cluster) == committed  # no read got past its GetMessage
    assert not first.done()
    assert not second.done()
    return first, second


@asynccontextmanager
async def _three_partitions() -> AsyncIterator[
    tuple[FakeCluster, ClientBalancedConsumer, dict[str, list[bytes]]]
]:
    """A cluster with 30 messages over three partitions, a consumer, and what a read at 0 of
    each partition returns when read one after the other."""
    async with FakeCluster(topics={"demo": 3}) as cluster:
        await produce(cluster.master_addr, "demo", 30)
        async with _consumer(cluster) as consumer:
            yield cluster, consumer, await _serial_reads(consumer)


async def test_reads_of_two_partitions_are_at_the_broker_at_once() -> None:
    async with _three_partitions() as (cluster, consumer, expected):
        first, second = await _two_reads_at_the_broker(cluster, consumer)
        a, b = await asyncio.gather(first, second)
        assert [m.body for m in a.messages] == expected[KEYS[0]]
        assert [m.body for m in b.messages] == expected[KEYS[1]]
        assert a.messages
        assert b.messages


async def test_two_reads_of_one_partition_run_in_turn_and_each_gets_its_batch() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        await produce(cluster.master_addr, "demo", 40)
        async with _consumer(cluster) as consumer:
            key = KEYS[0]
            head = await consumer.read_at(key, 0)
            nxt = await consumer.read_at(key, head.next_offset)
            held = cluster.inject(GET, Fault.delay(HOLD), times=1)
            registers = cluster.brokers[0].node.requests.get(int(Method.BROKER_CONSUMER_REGISTER))
            first = asyncio.create_task(consumer.read_at(key, 0))
            second = asyncio.create_task(consumer.read_at(key, head.next_offset))
            await _until(lambda: held.hits == 1)
            for _ in range(20):  # give the second read every chance to interleave
                await asyncio.sleep(0)
            # The second read waits for the first: no register of it moved the cursor.
            now = cluster.brokers[0].node.requests.get(int(Method.BROKER_CONSUMER_REGISTER))
            assert now == (registers or 0) + 1
            a, b = await asyncio.gather(first, second)
            assert (a.start_offset, a.next_offset) == (head.start_offset, head.next_offset)
            assert [m.body for m in a.messages] == [m.body for m in head.messages]
            assert (b.start_offset, b.next_offset) == (nxt.start_offset, nxt.next_offset)
            assert [m.body for m in b.messages] == [m.body for m in nxt.messages]


async def test_a_cancelled_read_leaves_the_other_partitions_read_whole() -> None:
    async with _three_partitions() as (cluster, consumer, expected):
        doomed, other = await _two_reads_at_the_broker(cluster, consumer)
        doomed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await doomed
        got = await other
        assert [m.body for m in got.messages] == expected[KEYS[1]]
        # The cancelled partition reads again as before, and so does the other one.
        again = await consumer.read_at(KEYS[0], 0)
        assert [m.body for m in again.messages] == expected[KEYS[0]]
        assert len(consumer._locks) == 0  # no lock left behind by the cancelled read


async def test_a_time_search_reads_its_partitions_at_once() -> None:
    async with FakeCluster(topics={"demo": 3}) as cluster:
        await produce(cluster.master_addr, "demo", 30)
        when = datetime.now(UTC) - timedelta(hours=1)
        times = dict.fromkeys(KEYS, when)
        async with _consumer(cluster, time_search_concurrency=1) as one_by_one:
            expected = await one_by_one.offsets_for_times(times)
        async with _consumer(cluster) as consumer:
            await consumer.partitions()
            held = cluster.inject(GET, Fault.delay(HOLD), times=3)
            committed = _commits(cluster)
            search = asyncio.create_task(consumer.offsets_for_times(times))
            await _until(lambda: held.hits == 3 or search.done())
            assert held.hits == 3  # one read of each partition at the broker at once
            assert _commits(cluster) == committed
            found = await search
            assert found == expected
            assert list(found) == KEYS
            assert all(offset is not None for offset in found.values())


async def test_two_connects_of_one_partition_at_once_connect_it_once() -> None:
    async with FakeCluster(topics={"demo": 3}) as cluster, _consumer(cluster) as consumer:
        await consumer.partitions()
        results = await asyncio.gather(
            consumer.connect(KEYS[0]),
            consumer.connect(KEYS[0]),
            consumer.connect(KEYS[1]),
            return_exceptions=True,
        )
        refused = [r for r in results if isinstance(r, BaseException)]
        assert len(refused) == 1
        assert isinstance(refused[0], PartitionAlreadyConnectedError)
        assert sorted(consumer.assignment()) == KEYS[:2]
        with pytest.raises(PartitionAlreadyConnectedError):
            await consumer.read_at(KEYS[0], 0)  # connected for fetching
        assert len(consumer._locks) == 0
