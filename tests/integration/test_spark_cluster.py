"""The source and sink on a Spark standalone cluster (a master and two one-core workers, each a
process of its own) with the package shipped by ``spark-submit --py-files``, and from a Spark
Connect client.

The executors and the submitted drivers run a Python that has every dependency but not
``tubemq_aio`` (:func:`~tubemq_aio.testing.spark_cluster.make_executor_python`), so a job works
only if the zip it ships does (a streaming job's driver also gets it on its ``PYTHONPATH``, see
``docs/spark.md``); the first test checks that the executors imported the copy Spark shipped.
One cluster serves the whole module; the jobs live in ``scripts/spark_cluster_job.py``, the
Connect client in ``scripts/spark_connect_client.py``.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from pyspark.sql import SparkSession

from tests.support.spark_jobs import (
    committed_batches,
    kill_during_batch,
    kill_group,
    log_end,
    produce,
    read_back,
)
from tubemq_aio import Consumer, Producer
from tubemq_aio.testing import LocalCluster
from tubemq_aio.testing.spark_cluster import (
    SparkConnectServer,
    SparkStandaloneCluster,
    make_executor_python,
    package_zip,
)

JOB = Path(__file__).parent / "scripts" / "spark_cluster_job.py"
CONNECT_CLIENT = Path(__file__).parent / "scripts" / "spark_connect_client.py"
#: Seconds a submitted job may take (JVM and executor start-up included).
JOB_TIMEOUT = 600.0
#: Seconds until the first task of a job holds (see ``spark_cluster_job.py``).
HOLD_TIMEOUT = 300.0


def error_lines(log: Path) -> str:
    """The distinct lines of a log that name an error (a Connect client's log is mostly the
    server's stack traces)."""
    lines = log.read_text(errors="replace").splitlines()
    found = dict.fromkeys(line.strip() for line in lines if "Error" in line and ":" in line)
    return "\n".join(list(found)[:20])


def held_tasks(marks: Path) -> list[Path]:
    """The marks left by held tasks (``task-<partition>-<attempt>-<pid>``)."""
    return sorted(marks.glob("task-*"))


@dataclass
class ShippedSpark:
    """The standalone cluster, the package zip its jobs ship, and a scratch directory."""

    cluster: SparkStandaloneCluster
    package: Path
    work: Path

    async def submit(
        self, log: Path, *args: str, conf: dict[str, str] | None = None, streaming: bool = False
    ) -> asyncio.subprocess.Process:
        """Start ``spark_cluster_job.py ARGS`` with ``spark-submit --py-files`` in a session of
        its own (so its whole process group can be killed); output to ``log``.

        A ``streaming`` job also gets the zip on the driver's ``PYTHONPATH``: PySpark 4.3 plans
        a Python streaming source in a driver-side process that does not see ``--py-files``.
        """
        argv = self.cluster.submit_command(JOB, args, py_files=[self.package], conf=conf)
        env = self.cluster.env
        if streaming:
            env["PYTHONPATH"] = str(self.package)
        with log.open("ab") as out:
            return await asyncio.create_subprocess_exec(
                *argv,
                env=env,
                cwd=self.work,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )

    async def run(self, log: Path, *args: str, streaming: bool = False) -> None:
        """Submit the job and wait until it exits 0."""
        job = await self.submit(log, *args, streaming=streaming)
        try:
            code = await asyncio.wait_for(job.wait(), JOB_TIMEOUT)
        finally:
            if job.returncode is None:
                await kill_group(job)
        assert code == 0, f"job {args[0]} exited {code}:\n{log_end(log)}"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shipped() -> AsyncIterator[ShippedSpark]:
    """A standalone cluster whose executors see ``tubemq_aio`` only through the shipped zip."""
    work = Path(tempfile.mkdtemp(prefix="tubemq-spark-cluster-"))
    python = make_executor_python(work / "executor-python")
    package = package_zip(work / "ship")
    cluster = SparkStandaloneCluster(python=str(python), work_dir=work / "spark")
    async with cluster:
        yield ShippedSpark(cluster, package, work)
    shutil.rmtree(work, ignore_errors=True)


async def produce_varied(master: str, topic: str, ids: range) -> Counter[tuple[str, str, str]]:
    """Send a message per id with varied bodies, attributes and types; return what was sent
    as ``(body hex, sorted attributes JSON, msg_type)`` counts."""
    sent: Counter[tuple[str, str, str]] = Counter()
    async with Producer(master, topics=[topic]) as producer:
        for i in ids:
            body, attributes, msg_type = f"m-{i}".encode() * (1 + i % 3), {"i": str(i)}, f"t{i % 4}"
            await producer.send(topic, body, attributes=attributes, msg_type=msg_type)
            sent[body.hex(), json.dumps(attributes, sort_keys=True), msg_type] += 1
    return sent


def as_sent(records: list[dict[str, Any]]) -> Counter[tuple[str, str, str]]:
    """Records of a job's report counted like :func:`produce_varied`'s result."""
    return Counter(
        (row["body"], json.dumps(row["attributes"], sort_keys=True), row["msg_type"])
        for row in records
    )


@pytest.mark.timeout(900)
async def test_submitted_job_runs_the_shipped_package_reads_and_writes_exactly(
    cluster: LocalCluster, topic: str, second_topic: str, shipped: ShippedSpark
) -> None:
    sent = await produce_varied(cluster.master_addr, topic, range(300))
    report = shipped.work / "batch-report.json"
    await shipped.run(
        shipped.work / "batch.log",
        "batch",
        cluster.master_addr,
        topic,
        second_topic,
        "200",
        str(report),
    )
    result = json.loads(report.read_text())

    # Driver and both executors imported the zip, without the compiled accelerator; the
    # executors their copy of it.
    origins = [result["driver"], *result["executors"]]
    assert len(result["executors"]) == 2
    for path, accelerated in origins:
        assert "tubemq_aio.zip/" in path, f"tubemq_aio imported from {path}, not the shipped zip"
        assert accelerated is False
    for path, _ in result["executors"]:
        assert not path.startswith(str(shipped.package)), f"{path}: not the copy Spark shipped"
    # The batch read returns every produced message once, field for field.
    assert as_sent(result["rows"]) == sent
    assert len({(row["partition_key"], row["offset"]) for row in result["rows"]}) == 300
    # The sink wrote every row once.
    written = await read_back(cluster.master_addr, second_topic, 200)
    assert sorted(m.body for m in written) == sorted(f"sink-{n}".encode() for n in range(200))
    assert all(m.attributes["n"] == m.body.decode()[5:] and m.msg_type == "sink" for m in written)


@pytest.mark.timeout(900)
async def test_streaming_job_killed_and_restarted_on_the_cluster_exactly_once(
    cluster: LocalCluster, topic: str, shipped: ShippedSpark, spark: SparkSession
) -> None:
    messages, per_trigger = 1500, 150
    work = Path(tempfile.mkdtemp(prefix="restart-", dir=shipped.work))
    out, checkpoint, log = str(work / "out"), str(work / "checkpoint"), work / "job.log"
    common = [cluster.master_addr, topic, "restart-job", out, checkpoint, str(per_trigger)]

    await produce(cluster.master_addr, topic, range(messages // 2), pause=0)
    first = await shipped.submit(log, "restart", *common, "run", streaming=True)
    producing = asyncio.create_task(
        produce(cluster.master_addr, topic, range(messages // 2, messages), pause=0.3)
    )
    # Kill the driver in the middle of a micro-batch, after two were committed.
    await kill_during_batch(first, checkpoint, log, 2, JOB_TIMEOUT)
    killed_after = committed_batches(checkpoint)
    await asyncio.wait_for(producing, 300)

    await shipped.run(log, "restart", *common, f"until:{messages}", streaming=True)
    assert committed_batches(checkpoint) > killed_after
    rows = spark.read.parquet(out).collect()
    counts = Counter(int(row["id"]) for row in rows)
    assert set(counts) == set(range(messages))
    assert max(counts.values()) == 1, "a message was written twice"
    assert len({(row["partition_key"], row["offset"]) for row in rows}) == messages


async def wait_for_marks(marks: Path, job: asyncio.subprocess.Process, log: Path) -> list[Path]:
    """The marks of held tasks, once there is one."""
    deadline = time.monotonic() + HOLD_TIMEOUT
    while not (found := held_tasks(marks)):
        assert job.returncode is None, f"the job ended early: {log_end(log)}"
        assert time.monotonic() < deadline, f"no task held: {log_end(log)}"
        await asyncio.sleep(0.2)
    return found


def lost_body(i: int) -> bytes:
    """Body ``i`` of the lost-worker test, padded to 1 KB."""
    return f"m-{i}:".encode().ljust(1024, b".")


async def wait_for_sent(master: str, topic: str, task: str, count: int) -> None:
    """Wait until ``topic`` holds ``count`` messages written by ``task`` (``partition:attempt``)."""
    seen = 0
    group = f"sent-check-{uuid.uuid4().hex[:8]}"
    async with Consumer(master, group=group, topics=[topic], consume_from="earliest") as consumer:
        async with asyncio.timeout(HOLD_TIMEOUT):
            async for message in consumer:
                seen += message.attributes.get("task") == task
                if seen >= count:
                    return


@pytest.mark.timeout(900)
async def test_worker_lost_mid_batch_source_exact_sink_at_least_once(
    cluster: LocalCluster, topic: str, second_topic: str, shipped: ShippedSpark
) -> None:
    messages = 3000
    async with Producer(cluster.master_addr, topics=[topic]) as producer:
        await asyncio.gather(*(producer.send(topic, lost_body(i)) for i in range(messages)))
    marks, log = shipped.work / "marks", shipped.work / "lost-worker.log"
    marks.mkdir()
    checkpoint = str(shipped.work / "lost-worker-checkpoint")
    args = ["lost-worker", cluster.master_addr, topic, second_topic, checkpoint, str(marks)]
    # Arrow batches of 100 rows: a held task's sink gets whole batches of its first rows.
    small_batches = {"spark.sql.execution.arrow.maxRecordsPerBatch": "100"}
    job = await shipped.submit(log, *args, conf=small_batches, streaming=True)
    try:
        held = (await wait_for_marks(marks, job, log))[0]
        _, partition, attempt, pid = held.name.split("-")
        victim = shipped.cluster.worker_of(int(pid))
        assert victim is not None, f"task process {pid} is on no worker"
        # Lose the node once the held task's sink has stored part of its rows.
        await wait_for_sent(cluster.master_addr, second_topic, f"{partition}:{attempt}", 100)
        await shipped.cluster.kill_worker(victim)
        (marks / "go").touch()
        await shipped.cluster.start_worker(victim)  # the next test gets both workers again
        code = await asyncio.wait_for(job.wait(), JOB_TIMEOUT)
    finally:
        if job.returncode is None:
            await kill_group(job)
    assert code == 0, log_end(log)

    got = await read_back(cluster.master_addr, second_topic, messages)
    everything = {lost_body(i) for i in range(messages)}
    # Sink: at least once, every message tagged with its micro-batch and writing task.
    assert {m.body for m in got} == everything
    assert {m.attributes["__spark_batch_id"] for m in got} == {"0"}
    attempts: dict[int, dict[int, list[bytes]]] = defaultdict(lambda: defaultdict(list))
    for m in got:
        task_partition, task_attempt = map(int, m.attributes["task"].split(":"))
        attempts[task_partition][task_attempt].append(m.body)
    lost = attempts[int(partition)]
    assert len(lost[int(attempt)]) >= 100, "the killed attempt's stored rows are gone"
    assert max(lost) > int(attempt), "the killed task was not run again"
    # Source: the attempt that finished each partition read its range exactly, so the killed
    # attempt's rows are the only repeats.
    final = Counter(body for a in attempts.values() for body in a[max(a)])
    assert set(final) == everything
    assert max(final.values()) == 1
    assert set(lost[int(attempt)]) <= set(lost[max(lost)])
    print(f"lost worker {victim}: {len(got) - messages} rows stored twice by the killed attempt")


async def run_connect_client(shipped: ShippedSpark, url: str, *args: str) -> Any:
    """Run ``spark_connect_client.py`` (with this interpreter, as a user's machine would);
    return its JSON report."""
    command, master, rest = args[0], args[1], args[2:]
    report, log = shipped.work / f"connect-{command}.json", shipped.work / "connect-client.log"
    argv = [sys.executable, str(CONNECT_CLIENT), command, url, master, str(shipped.package)]
    with log.open("ab") as out:
        client = await asyncio.create_subprocess_exec(
            *argv, *rest, str(report), stdout=out, stderr=out, cwd=shipped.work
        )
    try:
        code = await asyncio.wait_for(client.wait(), JOB_TIMEOUT)
    finally:
        if client.returncode is None:
            client.kill()
            await client.wait()
    assert code == 0, f"Connect client {command} exited {code}:\n{error_lines(log)}"
    return json.loads(report.read_text())


@pytest.mark.timeout(900)
async def test_spark_connect_client_reads_writes_and_restarts_a_stream(
    cluster: LocalCluster, topic: str, second_topic: str, shipped: ShippedSpark
) -> None:
    master = cluster.master_addr
    sent = await produce_varied(master, topic, range(200))
    # The client uploads the package, which is enough for batch reads and writes. A streaming
    # query sees no uploaded artifacts, neither in the server's planner nor in its tasks (see
    # docs/spark.md): for it the package is also "installed" on the server and the executors.
    installed = str(shipped.package)
    server = SparkConnectServer(
        shipped.cluster.master_url,
        python=shipped.cluster.python,
        conf={"spark.executorEnv.PYTHONPATH": installed},
        env={"PYTHONPATH": installed},
        work_dir=shipped.work / "connect",
    )
    out, checkpoint = str(shipped.work / "connect-out"), str(shipped.work / "connect-checkpoint")
    async with server:
        result = await run_connect_client(
            shipped, server.url, "batch", master, topic, second_topic, "100"
        )
        assert as_sent(result["rows"]) == sent
        # Batch tasks imported the uploaded copy, which comes before the installed one.
        assert len(result["executors"]) == 2
        for path in result["executors"]:
            assert "tubemq_aio.zip/" in path
            assert not path.startswith(installed), f"{path}: not the uploaded artifact"
        first = await run_connect_client(
            shipped, server.url, "stream", master, topic, out, checkpoint
        )
        assert as_sent(first) == sent
        # A second run of the query continues from its checkpoint: only the new messages.
        sent += await produce_varied(master, topic, range(200, 260))
        second = await run_connect_client(
            shipped, server.url, "stream", master, topic, out, checkpoint
        )
        assert as_sent(second) == sent
    written = await read_back(master, second_topic, 100)
    assert sorted(m.body for m in written) == sorted(f"connect-{n}".encode() for n in range(100))


@pytest.mark.timeout(600)
async def test_two_starts_at_once_start_one_cluster_and_a_stop_during_a_start_ends_it(
    tmp_path: Path,
) -> None:
    # The second start returned while the first was still starting the workers, and a stop
    # during the start stopped the master and left the workers the start went on to spawn.
    cluster = SparkStandaloneCluster(workers=1, work_dir=tmp_path / "spark")
    await asyncio.gather(cluster.start(), cluster.start())
    try:
        master = cluster._master
        assert master is not None
        assert master.running
        await cluster.start()
        assert cluster._master is master
    finally:
        await cluster.stop()
    assert not master.running
    starting = asyncio.ensure_future(cluster.start())
    await asyncio.sleep(1.0)  # the master is starting
    await cluster.stop()
    await starting
    assert cluster._master is None
    assert not any(proc is not None and proc.running for proc in cluster._workers)


@pytest.mark.timeout(600)
async def test_a_connect_server_starts_once_and_a_stop_during_its_start_ends_it(
    tmp_path: Path,
) -> None:
    server = SparkConnectServer("local[1]", work_dir=tmp_path / "connect")
    await asyncio.gather(server.start(), server.start())
    try:
        proc = server._proc
        assert proc is not None
        assert proc.running
        await server.start()  # running: nothing to do
        assert server._proc is proc
    finally:
        await server.stop()
    assert not proc.running
    starting = asyncio.ensure_future(server.start())
    await asyncio.sleep(1.0)  # spark-submit is starting
    proc = server._proc
    await server.stop()
    await starting
    assert proc is not None
    assert not proc.running
    assert server._proc is None
