"""Our Spark source's read path without Spark: the ceiling of the Spark read rows.

``python -m benchmarks.harness.spark_client --master H:P --topic T [--parallel 2]`` plans the
whole topic as a batch read does (the driver's planner, from the earliest to the latest offset
of every partition) and reads every range as a Spark task does (its own
``ClientBalancedConsumer``, :func:`~tubemq_aio.spark._reader.arrow_batches`: positioned reads,
read-ahead, column decode, 10 000-row Arrow batches), ``--parallel`` ranges at a time as
``local[2]`` runs two tasks, then drops the batches. It prints one JSON line: ``rows``,
``seconds`` (planning and the consumers' start-ups included, as they are in a Spark query) and
``cpu_seconds`` of this process over the same span.

So the rows/s are what the broker and our client deliver on this machine with no Spark at all,
and the CPU is our client's own per row.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
from collections.abc import Sequence


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def read_topic(master: str, topic: str, group: str, parallel: int) -> dict[str, float]:
    """Read every partition of ``topic`` once; rows, seconds and CPU seconds of the reads."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from tubemq_aio import ClientBalancedConsumer
    from tubemq_aio.spark._offsets import plan_ranges, resolve_start
    from tubemq_aio.spark._options import parse_source_options
    from tubemq_aio.spark._planner import consumer_kwargs, fetch_bounds
    from tubemq_aio.spark._reader import arrow_batches
    from tubemq_aio.spark.source import SCHEMA

    c0, t0 = _cpu(), time.perf_counter()
    schema = to_arrow_schema(SCHEMA, timezone="UTC")
    options = parse_source_options(
        {"master": master, "topic": topic, "group": group}, streaming=False
    )
    async with ClientBalancedConsumer(
        **consumer_kwargs(options, options.planner_group, [topic])
    ) as planner:
        bounds = await fetch_bounds(planner)
    start = resolve_start("earliest", {}, bounds)
    ranges = plan_ranges(start, {k: b.max_offset for k, b in bounds.items()})
    slots = asyncio.Semaphore(parallel)
    rows = 0

    async def task(index: int) -> None:
        nonlocal rows
        async with (
            slots,
            ClientBalancedConsumer(**consumer_kwargs(options, options.group, [topic])) as consumer,
        ):
            async for batch in arrow_batches(consumer, ranges[index], options, schema):
                rows += batch.num_rows

    await asyncio.gather(*(task(i) for i in range(len(ranges))))
    return {"rows": rows, "seconds": time.perf_counter() - t0, "cpu_seconds": _cpu() - c0}


def main(argv: Sequence[str] | None = None) -> int:
    """Read the topic once and print one JSON line."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.harness.spark_client")
    p.add_argument("--master", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--group", default=f"bench_client_{time.time_ns()}")
    p.add_argument("--parallel", type=int, default=2, help="ranges read at a time")
    ns = p.parse_args(argv)
    result = asyncio.run(read_topic(ns.master, ns.topic, ns.group, ns.parallel))
    result = {k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()}
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
