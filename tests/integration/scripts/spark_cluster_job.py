"""The jobs of the standalone-cluster tests, run by ``spark-submit`` with the package shipped.

``spark-submit ... --py-files tubemq_aio.zip spark_cluster_job.py COMMAND ARGS...``:

* ``batch MASTER IN_TOPIC OUT_TOPIC SINK_ROWS REPORT``: writes to the JSON file ``REPORT`` where
  the driver and every executor imported ``tubemq_aio`` from and whether the compiled
  accelerator loaded, and every row of a bounded read of ``IN_TOPIC``; then writes ``SINK_ROWS``
  rows (body ``sink-<n>``, attribute ``n``) to ``OUT_TOPIC`` with the sink.
* ``lost-worker MASTER IN_TOPIC OUT_TOPIC CHECKPOINT MARK_DIR``: a streaming query (one
  ``Trigger.AvailableNow`` run) from ``IN_TOPIC`` to ``OUT_TOPIC`` whose tasks each pass
  ``SLICE`` rows on, then leave a file ``task-<partition>-<attempt>-<pid>`` in ``MARK_DIR`` and
  hold until ``MARK_DIR/go`` exists: the test kills a worker while its tasks hold.
* ``restart ARGS...``: the job of ``spark_restart_job.py`` on this cluster.

The session comes from ``spark-submit`` (master, shipped files); nothing here names the cluster.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

import tubemq_aio
from tubemq_aio.accelerator import compiled
from tubemq_aio.spark import TubeMQDataSource

#: Rows a held task passes on before it holds: enough to get through the buffers between the
#: Python workers and the JVM (64 KB each at 1 KB a row), so its sink sends some of them.
SLICE = 300
#: Seconds a task holds at most before it gives up waiting for ``go``.
HOLD_LIMIT = 300.0
#: Seconds the streaming query may run.
QUERY_LIMIT = 600


def session(name: str) -> SparkSession:
    """The submitted application's session, with ``tubemq`` registered."""
    spark = SparkSession.builder.appName(name).getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.dataSource.register(TubeMQDataSource)
    return spark


def package_origin(_: object) -> Iterator[tuple[str, bool]]:
    """Where this Python process imports ``tubemq_aio`` from, and if the accelerator loaded."""
    yield tubemq_aio.__file__ or "", compiled() is not None


def batch(
    spark: SparkSession, master: str, in_topic: str, out_topic: str, sink_rows: int
) -> dict[str, object]:
    """Read ``in_topic`` whole, write ``sink_rows`` rows to ``out_topic``; return the report."""
    cores = spark.sparkContext.defaultParallelism
    origins = spark.sparkContext.parallelize(range(cores), cores).mapPartitions(package_origin)
    rows = (
        spark.read.format("tubemq")
        .option("master", master)
        .option("topic", in_topic)
        .option("group", f"{in_topic}-batch")
        .load()
        .collect()
    )
    (
        spark.range(sink_rows)
        .select(
            F.concat(F.lit("sink-"), F.col("id").cast("string")).alias("body"),
            F.create_map(F.lit("n"), F.col("id").cast("string")).alias("attributes"),
            F.lit("sink").alias("msg_type"),
            F.col("id").cast("string").alias("key"),
        )
        .repartition(cores)
        .write.format("tubemq")
        .option("master", master)
        .option("topic", out_topic)
        .mode("append")
        .save()
    )
    return {
        "driver": [tubemq_aio.__file__, compiled() is not None],
        "executors": origins.collect(),
        "rows": as_records(rows),
    }


def as_records(rows: list[Row]) -> list[dict[str, object]]:
    """Rows of the source as JSON-ready records (body in hex)."""
    return [
        {
            "body": row["body"].hex(),
            "attributes": dict(row["attributes"] or {}),
            "msg_type": row["msg_type"],
            "partition_key": row["partition_key"],
            "offset": row["offset"],
        }
        for row in rows
    ]


def hold_after_first_slice(mark_dir: str) -> object:
    """A ``mapInArrow`` function: pass ``SLICE`` rows on, leave a mark, hold until ``go``."""

    def hold(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task = TaskContext.get()
        assert task is not None
        passed = 0
        for batch in batches:
            yield batch
            passed += batch.num_rows
            if passed >= SLICE and not Path(mark_dir, "go").exists():
                name = f"task-{task.partitionId()}-{task.attemptNumber()}-{os.getpid()}"
                Path(mark_dir, name).touch()
                deadline = time.monotonic() + HOLD_LIMIT
                while not Path(mark_dir, "go").exists():
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"no go in {mark_dir} after {HOLD_LIMIT} s")
                    time.sleep(0.1)

    return hold


def from_earliest(spark: SparkSession, master: str, topic: str, group: str) -> DataFrame:
    """A streaming read of ``topic`` from its earliest offsets."""
    return (
        spark.readStream.format("tubemq")
        .option("master", master)
        .option("topic", topic)
        .option("group", group)
        .option("startingOffsets", "earliest")
        .load()
    )


def lost_worker(
    spark: SparkSession, master: str, in_topic: str, out_topic: str, checkpoint: str, marks: str
) -> int:
    """Copy ``in_topic`` to ``out_topic`` in one ``AvailableNow`` run with held tasks."""
    stream = from_earliest(spark, master, in_topic, f"{in_topic}-copy").select(
        "body", "attributes", "msg_type"
    )
    held = stream.mapInArrow(hold_after_first_slice(marks), stream.schema)  # type: ignore[arg-type]
    query = (
        held.writeStream.format("tubemq")
        .option("master", master)
        .option("topic", out_topic)
        .option("taskAttribute", "task")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    finished = query.awaitTermination(QUERY_LIMIT)
    failure = query.exception()
    query.stop()
    if failure is not None:
        print(f"query failed: {failure}", file=sys.stderr, flush=True)
        return 1
    return 0 if finished else 2


def main(argv: list[str]) -> int:
    """Run ``argv[0]`` with the rest of ``argv``; return the exit code."""
    command, args = argv[0], argv[1:]
    spark = session(f"tubemq-cluster-{command}")
    if command == "restart":
        import spark_restart_job  # beside this file, so on the driver's path

        return spark_restart_job.run(spark, args)
    try:
        if command == "batch":
            master, in_topic, out_topic, sink_rows, report = args
            result = batch(spark, master, in_topic, out_topic, int(sink_rows))
            Path(report).write_text(json.dumps(result))
            return 0
        if command == "lost-worker":
            return lost_worker(spark, *args)
        print(f"unknown command {command!r}", file=sys.stderr)
        return 64
    finally:
        spark.stop()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
