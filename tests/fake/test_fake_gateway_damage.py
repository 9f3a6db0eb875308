"""The gateway's TubeMQ read reads a batch damaged on the way again (issue 30 leftover).

``TubeGroup.read`` decodes each batch while the next RPC is at the broker, so a damaged batch is
committed before its damage is known. It used to drop the damaged message (the read moved past
it: lost for the group). Now the read ends before that batch and puts the broker cursor back at
its start: the first batch is read again within the read, a later one is left to the next read,
until two reads of its offset show the same damage (``protocol/damage.py``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator

import pytest

from tests.support.fake_helpers import produce
from tubemq_aio.gateway.tubemq.tube_group import TubeGroup, TubeReach
from tubemq_aio.gateway.tubemq.tube_read import TubeRead
from tubemq_aio.protocol.message import decode_payload
from tubemq_aio.testing import FakeCluster

pytestmark = pytest.mark.timeout(60)

SENT = 20


@pytest.fixture
async def cluster() -> AsyncIterator[FakeCluster]:
    async with FakeCluster(topics={"demo": 1}, max_batch=4) as c:
        yield c


@pytest.fixture
async def tube(cluster: FakeCluster) -> AsyncIterator[TubeGroup]:
    group = TubeGroup(
        TubeReach(cluster.master_addr, "d", rpc_timeout=3), group="gw-d", topics=["demo"]
    )
    try:
        await group.start()
        yield group
    finally:
        await group.close()


async def _walk(tube: TubeGroup, *, max_messages: int) -> tuple[list[TubeRead], list[bytes]]:
    """Read the partition from its start to its end as the gateway does: each read where the
    last one ended, trusting the cursor to be there."""
    (key,) = await tube.partitions(force=True)
    start, _ = await tube.register(key, 0)
    reads: list[TubeRead] = []
    while True:
        read = await tube.read(
            key,
            start,
            cursor_at_start=True,
            max_messages=max_messages,
            gather_until=time.monotonic() + 30,
        )
        assert read.status in ("ok", "empty"), read
        if read.status == "empty":
            break
        assert read.start == start  # the cursor was where the last read said it ended
        reads.append(read)
        start = read.next
    return reads, [m.body for r in reads for m in r.messages]


@pytest.mark.parametrize("max_messages", [1, 100], ids=["one-batch", "gathering"])
async def test_a_first_batch_damaged_on_the_way_is_read_again(
    cluster: FakeCluster, tube: TubeGroup, max_messages: int
) -> None:
    sent = await produce(cluster.master_addr, "demo", SENT)
    cluster.corrupt_next_fetches(5)  # the first answer and its next four reads
    reads, got = await _walk(tube, max_messages=max_messages)
    assert got == sent  # each exactly once, in order, with the right body
    assert all(m.crc_ok for r in reads for m in r.messages)
    # (Gathering, the answers read after a damaged batch are rolled back undecoded: two of
    # the five damaged answers are never seen.)
    assert tube.stats.crc_refetches == (5 if max_messages == 1 else 3)
    assert all(not r.resync for r in reads)


async def test_a_gathered_batch_damaged_on_the_way_ends_the_read_before_it(
    cluster: FakeCluster, tube: TubeGroup
) -> None:
    sent = await produce(cluster.master_addr, "demo", SENT)
    cluster.corrupt_next_fetches(1, after=2)  # the third batch of the first gathered read
    reads, got = await _walk(tube, max_messages=100)
    assert got == sent
    first = reads[0]
    assert (first.batches, len(first.messages), first.next) == (2, 8, 8 * 28)
    assert tube.stats.crc_refetches == 1
    assert all(not r.resync for r in reads)  # the cursor was put back where the read ended


@pytest.mark.parametrize("max_messages", [1, 100], ids=["one-batch", "gathering"])
async def test_damage_at_rest_is_dropped_after_one_reread(
    cluster: FakeCluster, tube: TubeGroup, max_messages: int
) -> None:
    sent = await produce(cluster.master_addr, "demo", SENT)
    log = cluster.brokers[0].log("demo", 0)
    bad = log.messages[9]  # in the third batch
    log.messages[9] = dataclasses.replace(bad, checksum=bad.checksum ^ 1)
    reads, got = await _walk(tube, max_messages=max_messages)
    bad_body = decode_payload(bad.payload, bad.flag, 0).body
    assert got == [b for b in sent if b != bad_body]  # dropped and counted, as documented
    assert tube.stats.crc_refetches == 1
    assert tube.stats.crc_mismatches == 2
    assert reads[-1].next == SENT * 28  # the walk went on past it


async def test_damage_on_the_way_past_rpc_timeout_answers_error_and_consumes_nothing(
    cluster: FakeCluster, tube: TubeGroup
) -> None:
    sent = await produce(cluster.master_addr, "demo", 4)
    (key,) = await tube.partitions(force=True)
    start, _ = await tube.register(key, 0)
    cluster.corrupt_next_fetches(1000)
    began = time.monotonic()
    read = await tube.read(key, start, cursor_at_start=True)
    assert read.status == "error"
    assert "damaged on the way" in read.error
    assert (read.start, read.next, read.messages) == (start, start, ())
    assert 2.5 <= time.monotonic() - began <= 5
    cluster.corrupt_next_fetches(0)
    again = await tube.read(key, start, cursor_at_start=True)  # the cursor is back at start
    assert (again.status, again.resync) == ("ok", "")
    assert [m.body for m in again.messages] == sent
