"""The Spark source's ``maxOffsetsPerTrigger`` holds on FakeCluster as on the real cluster.

The source plans each micro-batch per broker store (``spark._offsets.plan_end``): the
partitions of a store share one index, so ``k`` index slots hold at most ``k`` messages of all of
them. On the real cluster that keeps every batch within the limit
(``tests/integration/test_spark_source.py``); FakeCluster used to number each partition's
offsets from 0, which let ``partitions × limit`` messages through. This runs the source's own
planning and reading code (no Spark session) against the fake.
"""

from __future__ import annotations

from collections import Counter

from tests.support.fake_helpers import produce
from tubemq_aio import ClientBalancedConsumer
from tubemq_aio.spark._offsets import plan_end, plan_ranges, resolve_start
from tubemq_aio.spark._options import parse_source_options
from tubemq_aio.spark._planner import consumer_kwargs, fetch_bounds
from tubemq_aio.spark._reader import read_range
from tubemq_aio.testing import FakeCluster

LIMIT = 8
SENT = 60


async def test_every_micro_batch_holds_the_limit_and_reads_everything_once() -> None:
    async with FakeCluster(topics={"demo": 2}) as cluster:  # two partitions, one store
        sent = await produce(cluster.master_addr, "demo", SENT)
        options = parse_source_options(
            {
                "master": cluster.master_addr,
                "topic": "demo",
                "startingOffsets": "earliest",
                "maxOffsetsPerTrigger": str(LIMIT),
            },
            streaming=True,
        )
        planner_kw = consumer_kwargs(options, options.planner_group, ["demo"])
        reader_kw = consumer_kwargs(options, options.group, ["demo"])
        async with (
            ClientBalancedConsumer(**planner_kw) as planner,
            ClientBalancedConsumer(**reader_kw) as reader,
        ):
            bounds = await fetch_bounds(planner)
            assert len(bounds) == 2
            offsets = resolve_start("earliest", {}, bounds)
            sizes: list[int] = []
            got: Counter[bytes] = Counter()
            for _ in range(4 * SENT // LIMIT):  # far more batches than needed
                end = plan_end(offsets, bounds, LIMIT)
                batch = 0
                for rng in plan_ranges(offsets, end):
                    async for chunk in read_range(reader, rng, options):
                        got.update(bytes(b) for b in chunk.columns.bodies.to_pylist())
                        batch += len(chunk.columns)
                if end == offsets:
                    break
                sizes.append(batch)
                offsets = end
    assert got == Counter(sent)  # everything, once
    assert max(sizes) <= LIMIT, sizes
    assert len(sizes) >= SENT // LIMIT
