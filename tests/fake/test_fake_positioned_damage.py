"""Positioned reads re-read a batch damaged on the way (issue 30 leftover).

``read_at``, ``read_next``, ``peek_at``, ``read_with`` and the time search behind
``offsets_for_times`` used to decode a batch with a checksum mismatch at once: the damaged
message was dropped (or delivered with ``crc_ok=False``) and the read moved past it, so a link
that damaged an answer lost a message. They now roll the batch back and read it again until
two reads of its offset show the same damage (``protocol/damage.py``, as the fetch path does).
``FakeCluster.corrupt_next_fetches`` flips another bit in each answer: damage on the way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable

import pytest

from tests.support.fake_helpers import produce
from tests.support.time_bursts import produce_bursts
from tubemq_aio import ClientBalancedConsumer, PositionedRead
from tubemq_aio.errors import RequestTimeoutError
from tubemq_aio.protocol.message import decode_payload
from tubemq_aio.testing import FakeCluster

KEY = "1:demo:0"

pytestmark = pytest.mark.timeout(60)


def _consumer(cluster: FakeCluster, group: str = "pd", **options: object) -> ClientBalancedConsumer:
    return ClientBalancedConsumer(
        cluster.master_addr,
        group=group,
        topics=["demo"],
        consume_from="earliest",
        **options,  # type: ignore[arg-type]
    )


async def _walk(
    consumer: ClientBalancedConsumer, *, sequential: bool
) -> tuple[list[PositionedRead], list[bytes]]:
    """Every batch of the partition from offset 0 by positioned reads."""
    reads: list[PositionedRead] = []
    read = await consumer.read_at(KEY, 0)
    while read.messages:
        reads.append(read)
        follow: Callable[[str, int], Awaitable[PositionedRead]] = (
            consumer.read_next if sequential else consumer.read_at
        )
        read = await follow(KEY, read.next_offset)
    return reads, [m.body for r in reads for m in r.messages]


@pytest.mark.parametrize("sequential", [False, True], ids=["read_at", "read_next"])
async def test_damage_on_the_way_is_read_again_and_nothing_is_lost(sequential: bool) -> None:
    async with FakeCluster(topics={"demo": 1}, max_batch=4) as cluster:
        sent = await produce(cluster.master_addr, "demo", 20)
        async with _consumer(cluster) as consumer:
            await consumer.partitions()
            cluster.corrupt_next_fetches(5)  # the first read and its next four re-reads
            _, got = await _walk(consumer, sequential=sequential)
            assert got == sent  # each exactly once, in order, with the right body
            assert consumer.stats.crc_refetches == 5
            # (The flipped bit lands in the attribute block's length: undecodable first.)
            assert consumer.stats.crc_mismatches + consumer.stats.decode_errors == 5


async def test_a_damaged_read_in_the_middle_of_a_walk_is_read_again() -> None:
    async with FakeCluster(topics={"demo": 1}, max_batch=4) as cluster:
        sent = await produce(cluster.master_addr, "demo", 12)
        async with _consumer(cluster) as consumer:
            first = await consumer.read_at(KEY, 0)
            cluster.corrupt_next_fetches(2)
            second = await consumer.read_next(KEY, first.next_offset)
            third = await consumer.read_next(KEY, second.next_offset)
            got = [m.body for r in (first, second, third) for m in r.messages]
            assert got == sent
            assert all(m.crc_ok for r in (first, second, third) for m in r.messages)
            assert consumer.stats.crc_refetches == 2


async def test_a_peek_reads_again_and_leaves_the_group_offset() -> None:
    async with FakeCluster(topics={"demo": 1}, max_batch=4) as cluster:
        sent = await produce(cluster.master_addr, "demo", 8)
        async with _consumer(cluster) as consumer:
            cluster.corrupt_next_fetches(3)
            peeked = await consumer.peek_at(KEY, 0)
            assert [m.body for m in peeked.messages] == sent[:4]
            assert peeked.next_offset == peeked.start_offset
            assert consumer.stats.crc_refetches == 3
            again = await consumer.read_at(KEY, 0)
            assert [m.body for m in again.messages] == sent[:4]


@pytest.mark.parametrize("deliver_corrupt", [False, True])
async def test_damage_at_rest_is_recognised_on_the_second_read(deliver_corrupt: bool) -> None:
    async with FakeCluster(topics={"demo": 1}, max_batch=4) as cluster:
        sent = await produce(cluster.master_addr, "demo", 8)
        log = cluster.brokers[0].log("demo", 0)
        bad = log.messages[1]
        log.messages[1] = dataclasses.replace(bad, checksum=bad.checksum ^ 1)
        bad_body = decode_payload(bad.payload, bad.flag, 0).body
        async with _consumer(cluster, deliver_corrupt=deliver_corrupt) as consumer:
            reads, got = await _walk(consumer, sequential=False)
            # The second read of offset 0 showed the same damage: the documented handling.
            assert consumer.stats.crc_refetches == 1
            assert consumer.stats.crc_mismatches == 2
            if deliver_corrupt:
                assert got == sent
                (damaged,) = [m for r in reads for m in r.messages if not m.crc_ok]
                assert damaged.body == bad_body
            else:
                assert got == [b for b in sent if b != bad_body]
            # The walk went on past the damaged message: the offsets are consecutive.
            assert [r.start_offset for r in reads[1:]] == [r.next_offset for r in reads[:-1]]


async def test_damage_on_the_way_past_rpc_timeout_fails_typed_and_consumes_nothing() -> None:
    async with FakeCluster(topics={"demo": 1}, max_batch=4) as cluster:
        sent = await produce(cluster.master_addr, "demo", 4)
        async with _consumer(cluster, rpc_timeout=3.0) as consumer:
            cluster.corrupt_next_fetches(1000)
            with pytest.raises(RequestTimeoutError, match="damaged on the way"):
                await consumer.read_at(KEY, 0)
            cluster.corrupt_next_fetches(0)
            again = await consumer.read_at(KEY, 0)  # nothing was consumed: it is all there
            assert [m.body for m in again.messages] == sent
            assert again.start_offset == 0


async def test_the_time_search_reads_damaged_batches_again() -> None:
    async with FakeCluster(topics={"demo": 1}, max_batch=1) as cluster:
        bursts = await produce_bursts(cluster.master_addr, "demo")
        async with _consumer(cluster, "clean") as clean:
            want = await clean.offsets_for_times({KEY: bursts.pauses[0]})
        async with _consumer(cluster, "damaged") as consumer:
            cluster.corrupt_next_fetches(12)
            got = await consumer.offsets_for_times({KEY: bursts.pauses[0]})
            assert got == want
            assert consumer.stats.crc_refetches == 12
            offset = got[KEY]
            assert offset is not None
            first = await consumer.read_at(KEY, offset)
            assert [m.body for m in first.messages] == bursts.bodies[1][:1]
