"""The Spark Connect client of the cluster tests, run as its own process.

``python spark_connect_client.py COMMAND URL MASTER PACKAGE ARGS...``; each command connects
to the Connect server at ``URL`` (``sc://host:port``), uploads ``PACKAGE`` (the zipped
``tubemq_aio``) with ``addArtifacts(pyfile=True)`` so the server's Python workers can import
it, registers ``tubemq`` and writes what it saw as JSON to the file named last:

* ``batch URL MASTER PACKAGE IN_TOPIC OUT_TOPIC SINK_ROWS REPORT``: where two executor tasks
  imported ``tubemq_aio`` from, every row of a bounded read of ``IN_TOPIC``; then ``SINK_ROWS``
  rows (body ``connect-<n>``) written to ``OUT_TOPIC``.
* ``stream URL MASTER PACKAGE IN_TOPIC OUT_DIR CHECKPOINT REPORT``: one ``Trigger.AvailableNow``
  run of ``IN_TOPIC`` into Parquet at ``OUT_DIR`` with ``CHECKPOINT``, then the output's rows.

A separate process because a Connect session cannot live beside a classic one (and marks the
interpreter as Connect-only once created).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from spark_cluster_job import as_records, from_earliest

import tubemq_aio
from tubemq_aio.spark import TubeMQDataSource

#: Seconds the streaming run may take.
QUERY_LIMIT = 300


def connect(url: str, package: str) -> SparkSession:
    """A Connect session with the package uploaded and ``tubemq`` registered."""
    spark = SparkSession.builder.remote(url).getOrCreate()
    spark.addArtifacts(package, pyfile=True)
    spark.dataSource.register(TubeMQDataSource)
    return spark


def package_origin(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A ``mapInArrow`` function: where this executor imports ``tubemq_aio`` from."""
    for _ in batches:
        pass
    yield pa.RecordBatch.from_pydict({"path": [tubemq_aio.__file__]})


def batch(spark: SparkSession, master: str, in_topic: str, out_topic: str, rows: str) -> object:
    """Read ``in_topic`` whole, write ``rows`` rows to ``out_topic``; return the rows read and
    where two executor tasks imported ``tubemq_aio`` from."""
    tasks = spark.range(2).repartition(2).mapInArrow(package_origin, "path string")
    origins = [row["path"] for row in tasks.collect()]
    read = spark.read.format("tubemq").option("master", master).option("topic", in_topic)
    records = as_records(read.option("group", f"{in_topic}-connect").load().collect())
    (
        spark.range(int(rows))
        .select(F.concat(F.lit("connect-"), F.col("id").cast("string")).alias("body"))
        .write.format("tubemq")
        .option("master", master)
        .option("topic", out_topic)
        .mode("append")
        .save()
    )
    return {"rows": records, "executors": origins}


def stream(
    spark: SparkSession, master: str, in_topic: str, out_dir: str, checkpoint: str
) -> object:
    """Run the query once to the end of what is there; return the Parquet output's rows."""
    query = (
        from_earliest(spark, master, in_topic, f"{in_topic}-connect-stream")
        .writeStream.format("parquet")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start(out_dir)
    )
    if not query.awaitTermination(QUERY_LIMIT):
        query.stop()
        raise TimeoutError(f"the streaming run took longer than {QUERY_LIMIT} s")
    failure = query.exception()
    if failure is not None:
        raise RuntimeError(f"query failed: {failure}")
    return as_records(spark.read.parquet(out_dir).collect())


def main(argv: list[str]) -> int:
    """Run ``argv[0]``; return the exit code."""
    command, url, master, package, *args = argv
    spark = connect(url, package)
    try:
        if command == "batch":
            result = batch(spark, master, *args[:3])
        elif command == "stream":
            result = stream(spark, master, *args[:3])
        else:
            print(f"unknown command {command!r}", file=sys.stderr)
            return 64
    finally:
        spark.stop()
    Path(args[-1]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
