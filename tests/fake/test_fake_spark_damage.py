"""The Spark source's partition reader reads a batch damaged on the way again (issue 30 leftover).

``read_range`` walks a task's range with positioned reads decoded straight into columns (the
``COLUMNS`` codec); a batch with a checksum mismatch used to lose its damaged message (dropped by
the decode while the read moved past it). Now the batch is rolled back and read again until two
reads of its offset show the same damage (``protocol/damage.py``). This runs the source's own
planning and reading code against FakeCluster (no Spark session).
"""

from __future__ import annotations

import dataclasses

import pytest

from tests.support.fake_helpers import produce
from tubemq_aio import ClientBalancedConsumer
from tubemq_aio.protocol.message import decode_payload
from tubemq_aio.spark._offsets import RECORD, OffsetRange
from tubemq_aio.spark._options import parse_source_options
from tubemq_aio.spark._planner import consumer_kwargs
from tubemq_aio.spark._reader import read_range
from tubemq_aio.testing import FakeCluster

KEY = "1:demo:0"
SENT = 20

pytestmark = pytest.mark.timeout(60)


async def _read(cluster: FakeCluster, end: int, corrupt: int) -> tuple[list[bytes], list[int], int]:
    """The bodies and offsets ``read_range`` yields for ``[0, end)``, after damaging the next
    ``corrupt`` answers on the way; and the reader's re-reads."""
    options = parse_source_options(
        {"master": cluster.master_addr, "topic": "demo", "startingOffsets": "earliest"},
        streaming=False,
    )
    bodies: list[bytes] = []
    offsets: list[int] = []
    async with ClientBalancedConsumer(**consumer_kwargs(options, options.group, ["demo"])) as c:
        await c.partitions()
        cluster.corrupt_next_fetches(corrupt)
        async for chunk in read_range(c, OffsetRange(KEY, 0, end), options):
            bodies.extend(bytes(b) for b in chunk.columns.bodies.to_pylist())
            offsets.extend(chunk.offsets.tolist())
        return bodies, offsets, c.stats.crc_refetches


@pytest.mark.parametrize("end", [SENT, 10], ids=["whole", "straddling"])
async def test_every_message_of_the_range_once_under_damage_on_the_way(end: int) -> None:
    async with FakeCluster(topics={"demo": 1}, max_batch=4) as cluster:
        sent = await produce(cluster.master_addr, "demo", SENT)
        bodies, offsets, rereads = await _read(cluster, end * RECORD, corrupt=9)
        assert bodies == sent[:end]
        assert offsets == [i * RECORD for i in range(end)]
        assert rereads == 9


async def test_damage_at_rest_is_dropped_after_one_reread() -> None:
    async with FakeCluster(topics={"demo": 1}, max_batch=4) as cluster:
        sent = await produce(cluster.master_addr, "demo", SENT)
        log = cluster.brokers[0].log("demo", 0)
        bad = log.messages[5]
        log.messages[5] = dataclasses.replace(bad, checksum=bad.checksum ^ 1)
        bodies, offsets, rereads = await _read(cluster, SENT * RECORD, corrupt=0)
        bad_body = decode_payload(bad.payload, bad.flag, 0).body
        assert bodies == [b for b in sent if b != bad_body]  # dropped, as documented
        # (The offset column counts the kept messages of a batch, so the two after the dropped
        # one in its batch are one slot low: the column is a lower bound, docs/spark.md.)
        assert offsets[:5] == [i * RECORD for i in range(5)]
        assert offsets[7:] == [i * RECORD for i in range(8, SENT)]
        assert rereads == 1  # the second read of its batch showed the same damage
