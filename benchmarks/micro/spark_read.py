"""The Spark source's whole read path without Spark: client CPU per row against a fake broker.

Run ``python -m benchmarks.micro.spark_read [--rows N] [--kind plain|attrs] [--rounds R]``.
A child process serves ``N`` messages of 1 KB on one partition from
:class:`~tubemq_aio.testing.FakeCluster` (the real wire protocol on loopback, answers of up to
470 messages); this process reads them ``R`` times as a Spark task does
(:func:`~tubemq_aio.spark._reader.arrow_batches` over a ``ClientBalancedConsumer``: positioned
reads, read-ahead, commits, column decode, 10 000-row Arrow batches) and prints one JSON line
per round with its process CPU time per row (the broker's CPU is the child's, not counted;
the consumer's start-up is not counted either), then one with the medians.

``impl`` names the decode measured: ``compiled`` when the optional accelerator
(:mod:`tubemq_aio.accelerator`) is built, ``pure`` otherwise or with ``TUBEMQ_AIO_PURE=1``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import time

from tubemq_aio.protocol.message import EncodedMessage, encode_message

_BODY = bytes(range(256)) * 4
_SERVE_TIMEOUT = 120.0


def _message(kind: str) -> EncodedMessage:
    if kind == "plain":
        return encode_message(_BODY)
    attrs = {"source": "bench", "region": "eu"}
    return encode_message(_BODY, attributes=attrs, msg_type="o", msg_time="202401011200")


async def _serve(rows: int, kind: str) -> None:
    """Child: a fake cluster holding ``rows`` messages until stdin closes."""
    from tubemq_aio.testing import FakeCluster

    message = _message(kind)
    async with FakeCluster(
        topics={"t": 1},
        max_batch=470,
        max_batch_bytes=512 * 1024,
        registration_timeout=600,
        client_timeout=600,
    ) as cluster:
        log = cluster._broker(1).log("t", 0)
        for i in range(rows):
            log.append(i, message.data, message.flag, partition_id=0)
        print(cluster.master_addr, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _read(master: str, group: str) -> tuple[int, float]:
    """Read the whole partition once; return the rows and the CPU seconds of the read."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from tubemq_aio import ClientBalancedConsumer
    from tubemq_aio.spark._offsets import OffsetRange
    from tubemq_aio.spark._options import parse_source_options
    from tubemq_aio.spark._reader import arrow_batches
    from tubemq_aio.spark.source import SCHEMA

    schema = to_arrow_schema(SCHEMA, timezone="UTC")
    options = parse_source_options(
        {"master": master, "topic": "t", "group": group}, streaming=False
    )
    async with ClientBalancedConsumer(
        master, group=group, topics=["t"], consume_from="earliest"
    ) as consumer:
        (meta,) = await consumer.partitions()
        low, high = await consumer.offset_bounds(meta.partition_key)
        rng = OffsetRange(meta.partition_key, low, high)
        rows = 0
        start = _cpu()
        async for batch in arrow_batches(consumer, rng, options, schema):
            rows += batch.num_rows
        return rows, _cpu() - start


def main() -> None:
    """Serve (``--serve``) or run the rounds and print the JSON lines."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--kind", choices=["plain", "attrs"], default="plain")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.serve:
        asyncio.run(_serve(ns.rows, ns.kind))
        return
    from tubemq_aio import accelerator

    serve = ["--serve", "--rows", str(ns.rows), "--kind", ns.kind]
    argv = [sys.executable, "-m", "benchmarks.micro.spark_read", *serve]
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        master = child.stdout.readline().strip()
        if not master:
            raise RuntimeError("the fake cluster did not start")
        impl = "pure" if accelerator.compiled() is None else "compiled"
        case = {"case": f"read_{ns.kind}", "impl": impl}
        per_row = []
        for r in range(ns.rounds):
            rows, cpu = asyncio.run(_read(master, f"bench-{time.time_ns()}-{r}"))
            if rows != ns.rows:
                raise RuntimeError(f"read {rows} rows of {ns.rows}")
            per_row.append(cpu / rows * 1e6)
            us_per_row = round(per_row[-1], 3)
            print(json.dumps({**case, "round": r, "us_per_row": us_per_row, "rows": rows}))
        median = round(statistics.median(per_row), 3)
        print(json.dumps({**case, "round": "median", "us_per_row": median}))
    finally:
        if child.stdin is not None:
            child.stdin.close()
        try:
            child.wait(_SERVE_TIMEOUT)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(_SERVE_TIMEOUT)


if __name__ == "__main__":
    main()
