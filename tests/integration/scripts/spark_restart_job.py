"""The streaming job of the restart test, run as its own OS process (so it can be SIGKILLed).

``python spark_restart_job.py MASTER TOPIC GROUP OUT_DIR CHECKPOINT_DIR MAX_PER_TRIGGER MODE``

It reads ``TOPIC`` with the ``tubemq`` source from the earliest offset, keeps the ``id`` of each
JSON body with its partition key and offset, and appends them to Parquet at ``OUT_DIR`` with a
checkpoint at ``CHECKPOINT_DIR``. ``MODE`` is ``run`` (micro-batches until killed, or until
``RUN_LIMIT`` seconds pass) or ``until:N`` (micro-batches until the committed output holds ``N``
rows, then exit 0; 2 if that takes longer than ``RUN_LIMIT``).

The second run uses ordinary micro-batches rather than ``Trigger.AvailableNow``, so the test
does not depend on how the source implements that trigger.
"""

from __future__ import annotations

import os
import sys
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tubemq_aio.spark.local import local_session

#: Seconds a ``run`` job may live if nobody kills it.
RUN_LIMIT = 900
#: Columns of the job's Parquet output.
OUTPUT_SCHEMA = "id LONG, partition_key STRING, offset LONG"
#: Seconds between two looks at the output of an ``until:N`` job.
POLL = 2


def main(argv: list[str]) -> int:
    """Run the job on a ``local[2]`` session; return the exit code."""
    checkpoint = argv[4]
    scratch = os.path.join(os.path.dirname(os.path.abspath(checkpoint)), "spark-local")
    return run(local_session("tubemq-restart-job", local_dir=scratch), argv)


def run(spark: SparkSession, argv: list[str]) -> int:
    """Run the job on ``spark`` (``tubemq`` registered) with the arguments of the module
    docstring; stop the session and return the exit code."""
    master, topic, group, out_dir, checkpoint, max_per_trigger, mode = argv
    rows = (
        spark.readStream.format("tubemq")
        .option("master", master)
        .option("topic", topic)
        .option("group", group)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", max_per_trigger)
        .load()
        .select(
            F.get_json_object(F.col("body").cast("string"), "$.id").cast("long").alias("id"),
            "partition_key",
            "offset",
        )
    )
    query = (
        rows.writeStream.format("parquet").option("checkpointLocation", checkpoint).start(out_dir)
    )
    wanted = int(mode.split(":", 1)[1]) if mode.startswith("until:") else None
    deadline = time.monotonic() + RUN_LIMIT
    done = False
    while not done and query.isActive and time.monotonic() < deadline:
        query.awaitTermination(POLL)
        if wanted is not None and query.isActive and os.path.isdir(out_dir):
            # The file sink's log lists the committed files only.
            done = spark.read.schema(OUTPUT_SCHEMA).parquet(out_dir).count() >= wanted
    failure = query.exception()
    query.stop()
    spark.stop()
    if failure is not None:
        print(f"query failed: {failure}", file=sys.stderr, flush=True)
        return 1
    return 0 if done or wanted is None else 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
