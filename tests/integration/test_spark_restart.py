"""Exactly-once on restart: a streaming job killed with SIGKILL mid-run and started again from its
checkpoint writes every input message to its Parquet output exactly once.

The job (``scripts/spark_restart_job.py``) runs as a separate process group (driver, JVM and
Python workers), so the kill takes the whole driver down at an arbitrary point of a micro-batch.
The Parquet file sink's own log (``_spark_metadata``) decides which files belong to the output,
so the output is read back with Spark.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.support.spark_jobs import (
    batch_running,
    committed_batches,
    kill_during_batch,
    kill_group,
    produce,
    start_job,
)
from tubemq_aio.testing import LocalCluster

MESSAGES = 6000
#: ``maxOffsetsPerTrigger``: at most this many messages per micro-batch, so some 10 micro-batches
#: for the whole input.
MAX_PER_TRIGGER = 600
#: Micro-batches the first run must have committed before it is killed.
COMMITS_BEFORE_KILL = 3
#: Seconds allowed for the first run to commit that many micro-batches (JVM start included).
FIRST_RUN_TIMEOUT = 300.0
#: Seconds allowed for the second run to catch up and exit.
SECOND_RUN_TIMEOUT = 600.0


@pytest.mark.timeout(1500)
async def test_killed_driver_restarts_from_checkpoint_exactly_once(
    cluster: LocalCluster, topic: str, spark: SparkSession
) -> None:
    work = Path(tempfile.mkdtemp(prefix="tubemq-restart-"))
    out_dir, checkpoint, log = str(work / "out"), str(work / "checkpoint"), work / "job.log"
    common = [cluster.master_addr, topic, "restart-job", out_dir, checkpoint, str(MAX_PER_TRIGGER)]

    # First run: some input is there before the job starts, more arrives while it runs.
    await produce(cluster.master_addr, topic, range(MESSAGES // 3), pause=0)
    first = await start_job([*common, "run"], log)
    producing = asyncio.create_task(
        produce(cluster.master_addr, topic, range(MESSAGES // 3, MESSAGES), pause=0.5)
    )
    await kill_during_batch(first, checkpoint, log, COMMITS_BEFORE_KILL, FIRST_RUN_TIMEOUT)
    killed_after = committed_batches(checkpoint)
    assert batch_running(checkpoint), "the kill was meant to interrupt a micro-batch"
    await asyncio.wait_for(producing, 300)

    # Second run from the same checkpoint reads on until the output holds every message.
    second = await start_job([*common, f"until:{MESSAGES}"], log)
    try:
        code = await asyncio.wait_for(second.wait(), SECOND_RUN_TIMEOUT)
    finally:
        if second.returncode is None:
            await kill_group(second)
    assert code == 0, log.read_text()[-5000:]
    assert committed_batches(checkpoint) > killed_after
    print(
        f"killed during micro-batch {killed_after} (after {killed_after} commits); "
        f"{committed_batches(checkpoint)} micro-batches in all"
    )

    rows = spark.read.parquet(out_dir).collect()
    counts = Counter(int(row["id"]) for row in rows)
    missing = set(range(MESSAGES)) - set(counts)
    repeated = {i: n for i, n in counts.items() if n > 1}
    assert not missing, f"{len(missing)} messages lost, e.g. {sorted(missing)[:10]}"
    assert not repeated, f"{len(repeated)} messages repeated, e.g. {list(repeated.items())[:10]}"
    assert len(rows) == MESSAGES
    # Each (partition, offset) position appears once too.
    positions = Counter((row["partition_key"], row["offset"]) for row in rows)
    assert max(positions.values()) == 1
    shutil.rmtree(work, ignore_errors=True)  # kept for a look when the test fails
