"""The Spark source against a real local[2] SparkSession and the real cluster (2 brokers, 3
partitions each, one store per broker)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from tests.support.time_bursts import produce_bursts
from tubemq_aio import Producer
from tubemq_aio.consumer.client_balanced import ClientBalancedConsumer
from tubemq_aio.spark import TubeMQDataSource
from tubemq_aio.testing import LocalCluster

TYPES = ("red", "green", "blue")


@dataclass(frozen=True)
class Sent:
    """One produced message as the broker acknowledged it."""

    key: str
    offset: int
    message_id: int
    body: bytes
    msg_type: str
    attributes: tuple[tuple[str, str], ...]


async def produce(cluster: LocalCluster, topic: str, count: int, prefix: str) -> list[Sent]:
    """Send ``count`` messages with attributes and rotating msg types."""
    sent = []
    async with Producer(cluster.master_addr, topics=[topic]) as producer:
        for i in range(count):
            body, attrs, kind = f"{prefix}-{i}".encode(), {"n": str(i), "p": prefix}, TYPES[i % 3]
            r = await producer.send(topic, body, attributes=attrs, msg_type=kind)
            sent.append(
                Sent(
                    r.partition_key,
                    r.append_offset,
                    r.message_id,
                    body,
                    kind,
                    tuple(sorted(attrs.items())),
                )
            )
    return sent


def reader(spark: SparkSession, cluster: LocalCluster, topic: str, **options: str) -> Any:
    """``spark.read`` of the tubemq source with the common options set."""
    spark.dataSource.register(TubeMQDataSource)
    r = spark.read.format("tubemq").option("master", cluster.master_addr).option("topic", topic)
    for name, value in options.items():
        r = r.option(name, value)
    return r


def rows_of(df: DataFrame) -> set[tuple[Any, ...]]:
    """The rows as comparable tuples (key, message id, body, msg type, attributes)."""
    return {
        (
            r.partition_key,
            r.message_id,
            bytes(r.body),
            r.msg_type,
            tuple(sorted(r.attributes.items())),
        )
        for r in df.collect()
    }


def expected(sent: list[Sent]) -> set[tuple[Any, ...]]:
    """What :func:`rows_of` should give for ``sent``."""
    return {(s.key, s.message_id, s.body, s.msg_type, s.attributes) for s in sent}


async def store_ends(cluster: LocalCluster, topic: str) -> dict[str, int]:
    """Every partition's store end now."""
    async with ClientBalancedConsumer(cluster.master_addr, group="probe_ends", topics=[topic]) as c:
        return {
            m.partition_key: (await c.offset_bounds(m.partition_key))[1]
            for m in await c.partitions()
        }


async def test_batch_read_returns_exactly_the_produced_messages(
    spark: SparkSession, cluster: LocalCluster, topic: str
) -> None:
    sent = await produce(cluster, topic, 60, "batch")
    df = reader(spark, cluster, topic, group=f"g_{topic}").load()
    assert df.columns == [
        "topic",
        "partition_key",
        "offset",
        "message_id",
        "msg_type",
        "msg_time",
        "attributes",
        "body",
    ]
    assert rows_of(df) == expected(sent)
    assert {r.topic for r in df.select("topic").collect()} == {topic}
    assert len({s.key for s in sent}) == 6  # every partition of both brokers took part

    only = reader(spark, cluster, topic, group=f"g_{topic}", msgTypes="red,blue").load()
    assert rows_of(only) == expected([s for s in sent if s.msg_type in ("red", "blue")])


async def test_a_batch_read_with_nothing_to_read_has_no_rows(
    spark: SparkSession, cluster: LocalCluster, topic: str
) -> None:
    # PySpark runs one task with a plain InputPartition(None) when the reader plans none: the
    # reader's type check failed it (AssertionError) instead of returning no rows.
    assert reader(spark, cluster, topic, group=f"g_{topic}").load().count() == 0
    await produce(cluster, topic, 3, "some")
    ends = json.dumps(await store_ends(cluster, topic))
    later = reader(spark, cluster, topic, group=f"g_{topic}", startingOffsets=ends).load()
    assert later.count() == 0


async def test_ending_offset_inside_a_batch_is_cut_exactly_and_replays_the_same(
    spark: SparkSession, cluster: LocalCluster, topic: str
) -> None:
    sent = await produce(cluster, topic, 60, "cut")
    # End every partition at the offset of its 4th message: the broker's batch runs past it.
    ends = {}
    for key in sorted({s.key for s in sent}):
        ends[key] = [s.offset for s in sent if s.key == key][3]
    want = expected([s for s in sent if s.offset < ends[s.key]])
    ending = json.dumps(ends)
    first = rows_of(reader(spark, cluster, topic, group=f"g_{topic}", endingOffsets=ending).load())
    assert first == want
    assert len(first) == 3 * len(ends)  # the three messages before the 4th, per partition

    # Store ends now, then more data: a replay of [earliest, end) gives the same rows although
    # the last broker batch of every partition now straddles the end.
    ends_now = await store_ends(cluster, topic)
    whole = rows_of(
        reader(spark, cluster, topic, group=f"g_{topic}", endingOffsets=json.dumps(ends_now)).load()
    )
    assert whole == expected(sent)
    more = await produce(cluster, topic, 30, "more")
    async with ClientBalancedConsumer(
        cluster.master_addr, group="probe_straddle", topics=[topic]
    ) as c:
        straddles = 0
        for key, end in ends_now.items():
            batch = await c.read_at(key, 0)
            straddles += batch.next_offset > end
        assert straddles > 0  # the replay below really has to cut
    for _ in range(2):
        again = reader(
            spark, cluster, topic, group=f"g_{topic}", endingOffsets=json.dumps(ends_now)
        )
        assert rows_of(again.load()) == whole
    everything = rows_of(reader(spark, cluster, topic, group=f"g_{topic}").load())
    assert everything == expected(sent + more)


def stream_of(spark: SparkSession, cluster: LocalCluster, topic: str, **options: str) -> DataFrame:
    """``spark.readStream`` of the tubemq source with the common options set."""
    spark.dataSource.register(TubeMQDataSource)
    stream = spark.readStream.format("tubemq").option("master", cluster.master_addr)
    stream = stream.option("topic", topic).option("group", f"g_{topic}")
    for name, value in options.items():
        stream = stream.option(name, value)
    return stream.load()


def run_stream(
    spark: SparkSession, cluster: LocalCluster, topic: str, checkpoint: str, **options: str
) -> tuple[StreamingQuery, str]:
    """Start a streaming query into a memory table (no restart); returns query and table."""
    table = f"t_{uuid.uuid4().hex[:8]}"
    writer = stream_of(spark, cluster, topic, **options).writeStream.format("memory")
    writer = writer.queryName(table).option("checkpointLocation", checkpoint)
    return writer.trigger(processingTime="0 seconds").start(), table


def run_available_now(
    spark: SparkSession, cluster: LocalCluster, topic: str, base: str, **options: str
) -> list[int]:
    """Run a query with ``Trigger.AvailableNow`` into Parquet under ``base`` (checkpointed),
    wait until it ends and return the input rows of its non-empty micro-batches."""
    df = stream_of(spark, cluster, topic, **options).drop("msg_time")
    writer = df.writeStream.format("parquet").option("path", f"{base}/out")
    writer = writer.option("checkpointLocation", f"{base}/cp").trigger(availableNow=True)
    query = writer.start()
    assert query.awaitTermination(240)
    assert query.exception() is None
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]


async def test_stream_bounded_by_max_offsets_per_trigger(
    spark: SparkSession, cluster: LocalCluster, topic: str, tmp_path: Any
) -> None:
    sent = await produce(cluster, topic, 60, "stream")
    query, table = run_stream(
        spark,
        cluster,
        topic,
        str(tmp_path / "cp"),
        startingOffsets="earliest",
        maxOffsetsPerTrigger="8",
    )
    try:
        deadline = time.monotonic() + 240
        while spark.table(table).count() < 60:
            assert query.exception() is None, query.exception()
            assert time.monotonic() < deadline, spark.table(table).count()
            await asyncio.sleep(0.5)
        await asyncio.sleep(1.0)
        progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    finally:
        query.stop()
    assert rows_of(spark.table(table)) == expected(sent)
    assert spark.table(table).count() == 60  # nothing twice
    assert all(p["numInputRows"] <= 8 for p in progress), [p["numInputRows"] for p in progress]
    assert len(progress) >= 60 // 8
    end = json.loads(progress[-1]["sources"][0]["endOffset"])
    assert list(end) == sorted(end)


async def test_available_now_reads_everything_once_and_restarts_from_checkpoint(
    spark: SparkSession, cluster: LocalCluster, topic: str, tmp_path: Any
) -> None:
    sent = await produce(cluster, topic, 40, "now")
    base = str(tmp_path)
    # PySpark 4.3 runs a Python source under AvailableNow as a single batch (Trigger.Once):
    # the engine passes ReadAllAvailable and the limit is not applied.
    run_available_now(
        spark, cluster, topic, base, startingOffsets="earliest", maxOffsetsPerTrigger="7"
    )
    out = spark.read.parquet(f"{base}/out")
    assert rows_of(out) == expected(sent)
    assert out.count() == 40

    more = await produce(cluster, topic, 25, "later")
    # The restart resumes from the checkpointed offsets (read back from JSON): startingOffsets
    # is ignored and only the new messages are added, once each.
    run_available_now(spark, cluster, topic, base, startingOffsets="earliest")
    out = spark.read.parquet(f"{base}/out")
    assert rows_of(out) == expected(sent + more)
    assert out.count() == 65


async def test_offset_no_longer_on_the_broker_fails_the_query(
    spark: SparkSession, cluster: LocalCluster, topic: str, tmp_path: Any
) -> None:
    sent = await produce(cluster, topic, 6, "lost")
    key = sent[0].key
    # An offset past the store's end (as after a re-created topic): the broker would clamp it
    # silently; the source refuses with failOnDataLoss (default true).
    query, _ = run_stream(
        spark, cluster, topic, str(tmp_path / "cp"), startingOffsets=json.dumps({key: 28 * 10**6})
    )
    try:
        with pytest.raises(StreamingQueryException, match="no longer on the broker"):
            query.awaitTermination(240)
    finally:
        query.stop()


async def test_partition_held_by_a_killed_reader_is_read_once_the_broker_lets_go(
    spark: SparkSession, cluster: LocalCluster, topic: str
) -> None:
    sent = await produce(cluster, topic, 12, "held")
    group = f"g_{topic}"
    key = sent[0].key
    # A reader of the query's group that dies without unregistering (like a task of a killed
    # driver): the broker keeps the partition registered until its timeout (30 s).
    script = (
        "import asyncio, os\n"
        "from tubemq_aio.consumer.client_balanced import ClientBalancedConsumer\n"
        "async def main():\n"
        f"    c = ClientBalancedConsumer({cluster.master_addr!r}, group={group!r},\n"
        f"                               topics=[{topic!r}])\n"
        "    await c.start()\n"
        f"    await c.read_at({key!r}, 0)\n"
        "    os._exit(0)\n"
        "asyncio.run(main())\n"
    )
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script)
    assert await asyncio.wait_for(proc.wait(), 60) == 0
    started = time.monotonic()
    rows = rows_of(reader(spark, cluster, topic, group=group).load())
    assert rows == expected(sent)
    print(f"read after the dead reader's registration expired: {time.monotonic() - started:.1f} s")


async def test_starting_timestamp_batch_and_stream_read_exactly_the_later_bursts(
    spark: SparkSession, cluster: LocalCluster, topic: str, tmp_path: Any
) -> None:
    """``startingTimestamp`` (docs/protocol/time.md): three bursts two msg_time minutes apart;
    a batch read and an AvailableNow stream from each pause hold exactly the later bursts."""
    bursts = await produce_bursts(cluster.master_addr, topic, tag="spark")
    when = bursts.pauses[0]
    df = reader(
        spark,
        cluster,
        topic,
        group=f"g_{topic}",
        startingTimestamp=str(int(when.timestamp() * 1000)),
    ).load()
    assert sorted(bytes(r.body) for r in df.select("body").collect()) == sorted(bursts.later(0))
    base = str(tmp_path)
    run_available_now(spark, cluster, topic, base, startingTimestamp=bursts.pauses[1].isoformat())
    out = spark.read.parquet(f"{base}/out")
    assert sorted(bytes(r.body) for r in out.select("body").collect()) == sorted(bursts.later(1))
