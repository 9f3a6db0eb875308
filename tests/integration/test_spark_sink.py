"""The Spark sink against a real local[2] SparkSession and the real cluster.

The tests are synchronous: PySpark writes must run on the thread that registered the data
source (from another thread the JVM does not find ``tubemq``); the read-back runs in
``asyncio.run``.

Rows written with ``df.write.format("tubemq")`` / ``df.writeStream.format("tubemq")`` are read
back with a tubemq-aio :class:`Consumer` and compared field by field.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from tests.support.spark_jobs import read_back
from tubemq_aio.spark import TubeMQDataSource
from tubemq_aio.testing import LocalCluster


@pytest.fixture
def tubemq_spark(spark: SparkSession) -> SparkSession:
    """The shared session with the ``tubemq`` data source registered."""
    spark.dataSource.register(TubeMQDataSource)
    return spark


def write_json_files(directory: str, files: int, per_file: int) -> None:
    """``files`` JSON-lines files of ``{"file": f, "i": i}`` rows, named in order."""
    Path(directory).mkdir(parents=True)
    for f in range(files):
        lines = (json.dumps({"file": f, "i": i}) for i in range(per_file))
        Path(directory, f"part-{f}.json").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_batch_write_is_read_back_exactly(
    cluster: LocalCluster, topic: str, tubemq_spark: SparkSession
) -> None:
    rows = 600
    df = tubemq_spark.range(rows).select(
        F.concat(F.lit("payload-"), F.col("id").cast("string")).cast("binary").alias("body"),
        F.create_map(
            F.lit("index"), F.col("id").cast("string"), F.lit("src"), F.lit("spark")
        ).alias("attributes"),
        F.when(F.col("id") % 3 == 0, "fizz").otherwise("plain").alias("msg_type"),
        F.concat(F.lit("user-"), (F.col("id") % 7).cast("string")).alias("key"),
    )
    writer = (
        df.repartition(2)
        .write.format("tubemq")
        .option("master", cluster.master_addr)
        .option("topic", topic)
        .option("maxInFlight", "32")
        .mode("append")
    )
    writer.save()

    got = asyncio.run(read_back(cluster.master_addr, topic, rows))
    assert len(got) == rows
    by_body = {m.body: m for m in got}
    assert set(by_body) == {f"payload-{i}".encode() for i in range(rows)}
    for i in range(rows):
        message = by_body[f"payload-{i}".encode()]
        assert dict(message.attributes) == {"index": str(i), "src": "spark"}
        assert message.msg_type == ("fizz" if i % 3 == 0 else "plain")
        assert message.topic == topic
    # Same key, same partition: routing by the key column.
    partitions_of_key: dict[str, set[str]] = {}
    for message in got:
        user = f"user-{int(message.attributes['index']) % 7}"
        partitions_of_key.setdefault(user, set()).add(message.partition_key)
    assert all(len(keys) == 1 for keys in partitions_of_key.values())


def test_string_bodies_per_row_topic_and_msg_time(
    cluster: LocalCluster, topic: str, tubemq_spark: SparkSession
) -> None:
    rows = 50
    when = datetime(2026, 11, 22, 7, 45)
    schema = StructType([StructField("i", LongType()), StructField("topic", StringType())])
    df = tubemq_spark.createDataFrame([(i, topic) for i in range(rows)], schema).select(
        F.concat(F.lit("text-"), F.col("i").cast("string")).alias("body"),
        F.col("topic"),
        F.lit(when).alias("msg_time"),
    )
    df.write.format("tubemq").option("master", cluster.master_addr).mode("append").save()

    got = asyncio.run(read_back(cluster.master_addr, topic, rows))
    assert sorted(m.body for m in got) == sorted(f"text-{i}".encode() for i in range(rows))
    assert {m.msg_time for m in got} == {when}
    assert all(not m.attributes for m in got)


@pytest.mark.timeout(600)
def test_streaming_write_tags_each_message_with_its_batch_id(
    cluster: LocalCluster, topic: str, tubemq_spark: SparkSession
) -> None:
    files, per_file = 3, 40
    work = tempfile.mkdtemp(prefix="tubemq-sink-stream-")
    source_dir = os.path.join(work, "in")
    write_json_files(source_dir, files, per_file)
    stream = (
        tubemq_spark.readStream.schema("file INT, i INT")
        .option("maxFilesPerTrigger", 1)
        .json(source_dir)
        .select(
            F.to_json(F.struct("file", "i")).alias("body"),
            F.lit("from-stream").alias("msg_type"),
        )
        .writeStream.format("tubemq")
        .option("master", cluster.master_addr)
        .option("topic", topic)
        .option("checkpointLocation", os.path.join(work, "checkpoint"))
        .option("taskAttribute", "__spark_task")
        .trigger(availableNow=True)
    )

    def run() -> None:
        query = stream.start()
        try:
            query.awaitTermination(300)
        finally:
            query.stop()
        assert query.exception() is None

    run()

    total = files * per_file
    got = asyncio.run(read_back(cluster.master_addr, topic, total))
    assert len(got) == total
    batch_of_file: dict[int, set[str]] = {}
    for message in got:
        row: dict[str, Any] = json.loads(message.body)
        assert message.msg_type == "from-stream"
        batch_of_file.setdefault(row["file"], set()).add(message.attributes["__spark_batch_id"])
        partition, attempt = message.attributes["__spark_task"].split(":")
        assert int(partition) >= 0
        assert attempt == "0"
    # One file per micro-batch: each file's rows carry one batch id, every file its own.
    assert all(len(ids) == 1 for ids in batch_of_file.values())
    assert sorted(next(iter(ids)) for ids in batch_of_file.values()) == ["0", "1", "2"]


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("offset", 1, "'offset' is not written by the tubemq sink"),
        ("msg_type", 7, "'msg_type' has type int"),
    ],
)
def test_bad_columns_fail_on_the_driver_naming_the_column(
    cluster: LocalCluster,
    topic: str,
    tubemq_spark: SparkSession,
    name: str,
    value: int,
    expected: str,
) -> None:
    df = tubemq_spark.range(3).select(
        F.col("id").cast("string").alias("body"), F.lit(value).alias(name)
    )
    writer = (
        df.write.format("tubemq")
        .option("master", cluster.master_addr)
        .option("topic", topic)
        .mode("append")
    )
    with pytest.raises(PySparkException) as caught:
        writer.save()
    text = str(caught.value)
    assert "SinkSchemaError" in text
    assert expected in text


def test_a_refused_row_fails_the_write_with_the_typed_error(
    cluster: LocalCluster, topic: str, tubemq_spark: SparkSession
) -> None:
    df = tubemq_spark.range(20).select(
        F.col("id").cast("string").alias("body"),
        F.create_map(F.lit("note"), F.when(F.col("id") == 13, "a,b").otherwise("ok")).alias(
            "attributes"
        ),
    )
    writer = (
        df.coalesce(1)
        .write.format("tubemq")
        .option("master", cluster.master_addr)
        .option("topic", topic)
        .option("maxInFlight", "1")
        .mode("append")
    )
    with pytest.raises(PySparkException) as caught:
        writer.save()
    assert "InvalidMessageError" in str(caught.value)
    # Rows before the refused one were stored and stay (at-least-once: nothing is taken back).
    got = asyncio.run(read_back(cluster.master_addr, topic, 13))
    assert sorted(int(m.body) for m in got) == list(range(13))
