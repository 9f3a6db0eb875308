"""Example pipeline: TubeMQ → Spark Structured Streaming → Parquet (``make spark-example``).

The job reads topic ``demo`` with the ``tubemq`` source, parses each JSON body
(``{"id": .., "type": .., "ts": <epoch ms>, "value": ..}``), counts events per type per minute of
event time (``ts``, watermark 1 minute) and appends the closed windows to Parquet, with a
checkpoint, so a restarted job carries on where it stopped.

Run as a script it starts a local TubeMQ cluster (as ``make demo`` does), produces events with
the tubemq-aio :class:`~tubemq_aio.Producer`, runs the job until every produced event is counted
in the output, prints the result table, checks it against what was produced and exits (0 when
the counts match). Pass ``--master host:port`` to use a running cluster with a ``demo`` topic
instead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from tubemq_aio import Producer
from tubemq_aio.spark import TubeMQDataSource
from tubemq_aio.spark.local import local_session
from tubemq_aio.testing import LocalCluster

TOPIC = "demo"
TYPES = ("view", "click", "buy")
#: Event time of the first event; the events spread over ``SPAN``.
BASE = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
SPAN = timedelta(minutes=5)
#: How late an event may be and still be counted.
WATERMARK = "1 minute"
#: Event-time distance of the final "tick" event: it moves the watermark past the last window.
TICK_AFTER = timedelta(minutes=10)
#: Columns of the job's Parquet output.
OUTPUT_SCHEMA = "minute TIMESTAMP, msg_type STRING, count LONG"
#: Seconds the job may take to count every event.
RUN_TIMEOUT = 600.0


@dataclass(frozen=True, slots=True)
class Event:
    """One produced event."""

    id: int
    type: str
    ts: datetime
    value: int

    def body(self) -> bytes:
        """The JSON body sent to TubeMQ."""
        millis = int(self.ts.timestamp() * 1000)
        data = {"id": self.id, "type": self.type, "ts": millis, "value": self.value}
        return json.dumps(data).encode()


def make_events(count: int) -> list[Event]:
    """``count`` events spread evenly over ``SPAN`` of event time, types 1:1:4."""
    step = SPAN / count
    return [Event(i, TYPES[min(i % 6, 2)], BASE + i * step, i % 100) for i in range(count)]


def expected_counts(events: list[Event]) -> dict[tuple[datetime, str], int]:
    """Events per (minute, type): what the job must output."""
    counts: Counter[tuple[datetime, str]] = Counter()
    for event in events:
        counts[(event.ts.replace(second=0, microsecond=0), event.type)] += 1
    return dict(counts)


async def produce(master: str, topic: str, events: list[Event]) -> None:
    """Send the events (``msg_type`` = the event type), then one ``tick`` event far ahead.

    A finite demo needs the tick: in append mode a window is written once the watermark passes
    its end, and on an endless stream newer events would move the watermark instead.
    """
    async with Producer(master, topics=[topic]) as producer:
        for start in range(0, len(events), 500):
            chunk = events[start : start + 500]
            await asyncio.gather(*(producer.send(topic, e.body(), msg_type=e.type) for e in chunk))
        tick = Event(-1, "tick", BASE + TICK_AFTER, 0)
        await producer.send(topic, tick.body(), msg_type=tick.type)


def start_query(
    spark: SparkSession, master: str, topic: str, out_dir: str, checkpoint: str
) -> StreamingQuery:
    """Start the streaming job: per-type counts per event-time minute, appended to Parquet."""
    spark.dataSource.register(TubeMQDataSource)
    events = (
        spark.readStream.format("tubemq")
        .option("master", master)
        .option("topic", topic)
        .option("group", "spark-example")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 2000)
        .load()
        .select(
            F.from_json(
                F.col("body").cast("string"), "id LONG, type STRING, ts LONG, value INT"
            ).alias("event")
        )
        .select(
            F.col("event.type").alias("msg_type"),
            F.timestamp_millis(F.col("event.ts")).alias("event_time"),
        )
    )
    counts = (
        events.withWatermark("event_time", WATERMARK)
        .groupBy(F.window("event_time", "1 minute"), "msg_type")
        .count()
        .select(F.col("window.start").alias("minute"), "msg_type", "count")
    )
    return (
        counts.writeStream.format("parquet")
        .outputMode("append")
        .option("checkpointLocation", checkpoint)
        .start(out_dir)
    )


def wait_for_output(
    spark: SparkSession, query: StreamingQuery, out_dir: str, total: int, timeout: float
) -> dict[tuple[datetime, str], int]:
    """Wait until the committed output counts ``total`` events, stop the query, return the table.

    Raises:
        RuntimeError: the query failed, or the counts were not complete within ``timeout``.
    """
    deadline = time.monotonic() + timeout
    table: dict[tuple[datetime, str], int] = {}
    try:
        while time.monotonic() < deadline:
            if query.awaitTermination(2):
                break  # ended on its own: a failure
            if os.path.isdir(os.path.join(out_dir, "_spark_metadata")):
                rows = spark.read.schema(OUTPUT_SCHEMA).parquet(out_dir).collect()
                table = {(_utc(r["minute"]), r["msg_type"]): r["count"] for r in rows}
                if sum(table.values()) >= total:
                    return table
        failure = query.exception()
        if failure is not None:
            raise RuntimeError(f"the streaming query failed: {failure}")
        raise RuntimeError(f"only {sum(table.values())} of {total} events counted in time")
    finally:
        query.stop()


def _utc(value: datetime) -> datetime:
    """Spark returns session-local naive datetimes; compare in UTC."""
    return value.astimezone(UTC) if value.tzinfo else value.astimezone().astimezone(UTC)


def print_table(table: dict[tuple[datetime, str], int]) -> None:
    """Print the counts as minute × type."""
    minutes = sorted({minute for minute, _ in table})
    print(f"{'minute (UTC)':<18}" + "".join(f"{t:>8}" for t in TYPES), flush=True)
    for minute in minutes:
        cells = "".join(f"{table.get((minute, t), 0):>8}" for t in TYPES)
        print(f"{minute:%Y-%m-%d %H:%M}  {cells}", flush=True)


def run_pipeline(
    spark: SparkSession, master: str, topic: str, work_dir: str, count: int
) -> tuple[dict[tuple[datetime, str], int], dict[tuple[datetime, str], int]]:
    """Produce ``count`` events to ``topic``, run the job until they are all counted.

    Returns:
        (the job's output table, the expected table).
    """
    events = make_events(count)
    asyncio.run(produce(master, topic, events))
    out_dir, checkpoint = os.path.join(work_dir, "counts"), os.path.join(work_dir, "checkpoint")
    query = start_query(spark, master, topic, out_dir, checkpoint)
    table = wait_for_output(spark, query, out_dir, count, RUN_TIMEOUT)
    return table, expected_counts(events)


def session(submitted: bool) -> SparkSession:
    """The job's session: ``spark-submit``'s when ``submitted``, else a local one."""
    if not submitted:
        return local_session(
            "tubemq-spark-example", log_level="ERROR", conf={"spark.sql.session.timeZone": "UTC"}
        )
    spark = (
        SparkSession.builder.appName("tubemq-spark-example")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(TubeMQDataSource)
    return spark


def main() -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=3000, help="events to produce (3000)")
    parser.add_argument("--master", help="use this running cluster instead of a local one")
    parser.add_argument("--topic", default=TOPIC, help="topic to use (demo); start it empty")
    parser.add_argument("--work-dir", help="output and checkpoint directory (default: temp)")
    parser.add_argument(
        "--submitted",
        action="store_true",
        help="run under spark-submit: use the session (master, shipped files) it provides",
    )
    args = parser.parse_args()
    work_dir = args.work_dir or tempfile.mkdtemp(prefix="tubemq-spark-example-")
    cluster: LocalCluster | None = None
    if args.master is None:
        print("starting a local TubeMQ cluster (master + broker) ...", flush=True)
        cluster = LocalCluster(brokers=1, topics=[args.topic], topic_partitions=3)
        asyncio.run(cluster.start())
    master = args.master or (cluster.master_addr if cluster else "")
    try:
        print(f"producing {args.events} events to {args.topic!r} at {master}", flush=True)
        spark = session(args.submitted)
        began = time.monotonic()
        try:
            table, expected = run_pipeline(spark, master, args.topic, work_dir, args.events)
        finally:
            spark.stop()
        print(f"counted in {time.monotonic() - began:.0f} s; output in {work_dir}", flush=True)
        print_table(table)
        ok = table == expected
        print("counts match what was produced" if ok else f"MISMATCH, expected {expected}")
        return 0 if ok else 1
    finally:
        if cluster is not None:
            asyncio.run(cluster.stop())
            print("cluster stopped", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
