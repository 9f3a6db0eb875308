"""Exactly-once on restart: a streaming job killed with SIGKILL mid-run and started again from its
checkpoint writes every input message to its Parquet output exactly once.

The job (``spark_restart_job.py``) runs as a separate process group (driver, JVM and Python
workers), so the kill takes the whole driver down at an arbitrary point of a micro-batch. The
Parquet file sink's own log (``_spark_metadata``) decides which files belong to the output, so
the output is read back with Spark.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from spark_fixtures import spark

from tubemq_aio import Producer
from tubemq_aio.testing import LocalCluster

__all__ = ["spark"]  # the fixture, re-exported so pytest finds it here

JOB = str(Path(__file__).with_name("spark_restart_job.py"))
MESSAGES = 6000
#: ``maxOffsetsPerTrigger``: at most this many messages per micro-batch, so some 20 micro-batches
#: for the whole input.
MAX_PER_TRIGGER = 300
#: Micro-batches the first run must have committed before it is killed.
COMMITS_BEFORE_KILL = 3
#: Seconds allowed for the first run to commit that many micro-batches (JVM start included).
FIRST_RUN_TIMEOUT = 300.0
#: Seconds allowed for the second run to catch up and exit.
SECOND_RUN_TIMEOUT = 600.0


def logged_batches(checkpoint: str, log: str) -> int:
    """Entries of a checkpoint log: ``offsets`` (micro-batches planned: their offset ranges are
    written before they run) or ``commits`` (micro-batches finished)."""
    directory = Path(checkpoint, log)
    if not directory.is_dir():
        return 0
    return sum(1 for p in directory.iterdir() if p.name.isdigit())


def committed_batches(checkpoint: str) -> int:
    """Micro-batches the query has committed."""
    return logged_batches(checkpoint, "commits")


def batch_running(checkpoint: str) -> bool:
    """Whether a micro-batch is planned but not committed (running right now)."""
    return logged_batches(checkpoint, "offsets") > committed_batches(checkpoint)


def group_members(pgid: int) -> list[int]:
    """Live processes of process group ``pgid`` (zombies excluded)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


async def start_job(args: list[str], log: Path) -> asyncio.subprocess.Process:
    """Start the job in a new session (its own process group), output to ``log``."""
    with log.open("ab") as out:
        return await asyncio.create_subprocess_exec(
            sys.executable, JOB, *args, stdout=out, stderr=out, start_new_session=True
        )


async def kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the job's whole process group and wait until none of it is left."""
    os.killpg(proc.pid, signal.SIGKILL)
    await asyncio.wait_for(proc.wait(), 30)
    async with asyncio.timeout(30):
        while group_members(proc.pid):
            for pid in group_members(proc.pid):
                os.kill(pid, signal.SIGKILL)
            await asyncio.sleep(0.2)


async def kill_during_batch(
    job: asyncio.subprocess.Process, checkpoint: str, log: Path, commits: int, timeout: float
) -> None:
    """Kill ``job``'s process group in the middle of a micro-batch (its range is in the offset
    log, not committed) once ``commits`` micro-batches are committed; fail with the log's end if
    it ends first or ``timeout`` seconds pass."""
    try:
        deadline = time.monotonic() + timeout
        while committed_batches(checkpoint) < commits or not batch_running(checkpoint):
            assert job.returncode is None, f"the job ended early: {log_end(log)}"
            assert time.monotonic() < deadline, f"no progress: {log_end(log)}"
            await asyncio.sleep(0.3)
    finally:
        await kill_group(job)


def log_end(log: Path) -> str:
    """The last 3 000 characters of a job's log."""
    return log.read_text(errors="replace")[-3000:]


async def produce(master: str, topic: str, ids: range, pause: float) -> None:
    """Send a JSON body ``{"id": i}`` per id, in chunks of 200 with ``pause`` s between them."""
    async with Producer(master, topics=[topic]) as producer:
        for chunk_start in range(ids.start, ids.stop, 200):
            chunk = range(chunk_start, min(chunk_start + 200, ids.stop))
            await asyncio.gather(
                *(producer.send(topic, json.dumps({"id": i}).encode()) for i in chunk)
            )
            await asyncio.sleep(pause)


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
