"""Driving Spark jobs as processes of their own and checking what they wrote: shared by the
local-mode restart and sink tests and the Spark standalone-cluster tests."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
import uuid
from pathlib import Path

from tubemq_aio import Consumer, Producer
from tubemq_aio.models import Message

#: The streaming job the restart tests run (``tests/integration/scripts/spark_restart_job.py``).
JOB = str(Path(__file__).parents[1] / "integration" / "scripts" / "spark_restart_job.py")
#: Seconds a read-back may take (group join included).
READ_TIMEOUT = 120.0
#: Seconds to keep reading after the expected count, to catch duplicates.
DUPLICATE_WAIT = 3.0


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


async def read_back(master: str, topic: str, count: int) -> list[Message]:
    """Every message of ``topic`` from the earliest offset, until ``count`` have arrived."""
    got: list[Message] = []
    group = f"sink-check-{uuid.uuid4().hex[:8]}"
    async with Consumer(master, group=group, topics=[topic], consume_from="earliest") as consumer:
        async with asyncio.timeout(READ_TIMEOUT):
            async for message in consumer:
                got.append(message)
                if len(got) >= count:
                    break
        # Anything beyond ``count`` would be a duplicate: give it a moment to show up.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(DUPLICATE_WAIT):
                async for message in consumer:
                    got.append(message)
    return got
