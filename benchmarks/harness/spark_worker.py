"""The Spark rows of the benchmark: our source and sink next to PySpark's own floor, one session.

``python -m benchmarks.harness.spark_worker --master H:P --topic T --rows N ...`` starts one
``local[2]`` SparkSession and runs, in interleaved rounds (order reversed every other round),
each case once per round, printing **one JSON line per run** on stdout:

* ``read``: ``spark.read.format(...).load().write.format("noop")`` of the whole pre-filled
  topic ``T`` (variant ``aio``) and of ``tubemq_floor`` with as many rows on as many
  partitions (variant ``floor``: ready-made Arrow batches, no network). Variant ``client``:
  our read path alone, without Spark, on the same topic and with as many ranges at a time as
  Spark runs tasks (:mod:`~benchmarks.harness.spark_client`, a child process): what the
  broker and our client deliver here with no Spark at all.
* ``stream``: the same through ``readStream`` with ``Trigger.AvailableNow`` into ``noop`` (a
  fresh checkpoint per run; rows counted from the query's progress).
* ``sink``: ``df.write.format("tubemq")`` of ``N`` cached rows with ``size``-byte bodies to
  ``--sink-topic`` (variant ``aio``), the same rows into ``tubemq_floor``'s sink, which drops
  them (variant ``floor``: Spark's own cost of handing rows to a Python sink), and
  ``producer``: our ``Producer`` alone (the benchmark's produce worker, W = the sink's
  ``maxInFlight``) sending ``N`` messages to the same topic.

Round 0 is the session's cold first run of every case (Python worker start-up) and is reported
as such. ``cpu_seconds`` is the CPU of this process tree (driver, Spark JVM, Python workers)
over the run, or of the child for ``client`` and ``producer``; ``server_cpu_seconds`` that of
the processes given with ``--server-pids`` (the cluster's master and brokers).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import psutil

from benchmarks.harness.env import REPO
from benchmarks.harness.proc import option_args


def tree_cpu() -> float:
    """CPU seconds of this process and all its descendants, ended ones included.

    Each live process counts its own user + system time and that of the children it has
    reaped (``children_user``/``children_system``); a descendant that ended was reaped by its
    parent (or, orphaned, by init, which is not counted). So a Python worker that exits between
    two samples moves its time into its parent's total instead of dropping out of the sum,
    which made the sum go backwards.
    """
    total = 0.0
    me = psutil.Process()
    for proc in [me, *me.children(recursive=True)]:
        try:
            t = proc.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def pids_cpu(pids: Sequence[int]) -> float:
    """User + system CPU seconds of ``pids`` (those still running)."""
    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.harness.spark_worker")
    p.add_argument("--master", required=True)
    p.add_argument("--topic", required=True, help="pre-filled topic read by the source")
    p.add_argument("--rows", type=int, required=True, help="messages in --topic")
    p.add_argument("--sink-topic", help="topic of the sink and producer cases (omit: no sink)")
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--partitions", type=int, default=4, help="partitions of the floor source")
    p.add_argument("--sink-partitions", type=int, default=2, help="tasks of the sink write")
    p.add_argument("--sink-rows", type=int, help="rows per sink write (default --rows)")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--cases", default="read,stream,sink", help="read,stream,sink")
    p.add_argument("--variants", default="aio,floor,client", help="aio,floor,client")
    p.add_argument("--server-pids", default="", help="comma list: the cluster's processes")
    p.add_argument("--cores", type=int, default=2)
    return p.parse_args(argv)


class SparkBench:
    """One session, the cases of one run."""

    def __init__(self, ns: argparse.Namespace) -> None:
        from benchmarks.harness.spark_floor import FloorDataSource
        from tubemq_aio.spark.local import local_session

        self.ns = ns
        self.scratch = tempfile.mkdtemp(prefix="tubemq-spark-bench-")
        self.spark = local_session(
            "tubemq-aio-bench",
            cores=ns.cores,
            local_dir=self.scratch,
            log_level="ERROR",
            conf={"spark.driver.memory": "2g", "spark.python.worker.reuse": "true"},
        )
        self.spark.dataSource.register(FloorDataSource)
        self._sink_df: Any = None

    def _reader(self, variant: str, stream: bool) -> Any:
        ns = self.ns
        r = self.spark.readStream if stream else self.spark.read
        if variant == "floor":
            return (
                r.format("tubemq_floor")
                .option("rows", str(ns.rows))
                .option("partitions", str(ns.partitions))
                .option("size", str(ns.size))
            )
        return (
            r.format("tubemq")
            .option("master", ns.master)
            .option("topic", ns.topic)
            .option("startingOffsets", "earliest")
        )

    def read(self, variant: str) -> int:
        """Batch read into ``noop``; returns the rows (the topic's size, checked once)."""
        self._reader(variant, stream=False).load().write.format("noop").mode("overwrite").save()
        return int(self.ns.rows)

    def stream(self, variant: str) -> int:
        """``Trigger.AvailableNow`` into ``noop``; returns the rows the query reported."""
        checkpoint = tempfile.mkdtemp(prefix="ckpt-", dir=self.scratch)
        query = (
            self._reader(variant, stream=True)
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(1800)
        if query.isActive:
            query.stop()
            raise RuntimeError("stream did not finish within 1800 s")
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        return sum(int(p.get("numInputRows", 0)) for p in query.recentProgress)

    def _sink_input(self) -> Any:
        if self._sink_df is None:
            from pyspark.sql import functions as F

            rows = self.ns.sink_rows or self.ns.rows
            body = F.expr(f"cast(repeat('x', {int(self.ns.size)}) as binary)")
            df = self.spark.range(rows, numPartitions=self.ns.sink_partitions)
            self._sink_df = df.select(body.alias("body")).cache()
            self._sink_df.count()
        return self._sink_df

    def sink(self, variant: str) -> int:
        """``df.write.format("tubemq")`` of the cached rows."""
        df = self._sink_input()
        (
            df.write.format("tubemq")
            .option("master", self.ns.master)
            .option("topic", self.ns.sink_topic)
            .mode("append")
            .save()
        )
        return int(self.ns.sink_rows or self.ns.rows)

    def sink_floor(self) -> int:
        """The same cached rows into ``tubemq_floor``'s sink, which drops them."""
        self._sink_input().write.format("tubemq_floor").mode("append").save()
        return int(self.ns.sink_rows or self.ns.rows)

    def client(self) -> dict[str, Any]:
        """Our read path alone, without Spark (its own JSON line, as ``producer``)."""
        options = option_args(
            ("--master", self.ns.master), ("--topic", self.ns.topic), ("--parallel", self.ns.cores)
        )
        argv = [sys.executable, "-m", "benchmarks.harness.spark_client", *options]
        return _child(argv)

    def producer(self, variant: str) -> dict[str, Any]:
        """Our produce worker alone on the sink topic (its own JSON line)."""
        rows = self.ns.sink_rows or self.ns.rows
        options = option_args(
            ("--master", self.ns.master),
            ("--topic", self.ns.sink_topic),
            ("--count", rows),
            ("--size", self.ns.size),
            ("--concurrency", 256),
            ("--warmup-seconds", 0),
            ("--loop", "asyncio"),
        )
        argv = [sys.executable, "-m", "benchmarks.harness.aio_worker", "produce", *options]
        return _child(argv)

    def check_count(self) -> int:
        """Rows of one (untimed) batch read of ours, to check ``--rows``."""
        return int(self._reader("aio", stream=False).load().count())

    def close(self) -> None:
        """Stop the session."""
        self.spark.stop()


def _child(argv: list[str]) -> dict[str, Any]:
    """Run a worker in a child process; its last JSON line."""
    out = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=REPO, timeout=1800)
    lines = [x for x in out.stdout.splitlines() if x.startswith("{")]
    if not lines:
        raise RuntimeError(f"{argv[2]}: exit {out.returncode}: {out.stderr[-500:]}")
    rec: dict[str, Any] = json.loads(lines[-1])
    return rec


def _emit(record: dict[str, Any]) -> None:
    print(json.dumps(record), flush=True)


def _timed(fn: Callable[[str], int], variant: str) -> tuple[int, float, float]:
    c0, t0 = tree_cpu(), time.perf_counter()
    rows = fn(variant)
    return rows, time.perf_counter() - t0, tree_cpu() - c0


def run_plan(cases: Sequence[str], variants: Sequence[str]) -> list[tuple[str, str]]:
    """The (case, variant) runs of one round, in order (reversed every other round)."""
    plan: list[tuple[str, str]] = []
    for case in cases:
        if case == "sink":
            plan += [("sink", "aio")]
            plan += [("sink", "floor")] if "floor" in variants else []
            plan += [("producer", "aio")]
        elif case == "read":
            plan += [(case, v) for v in variants]
        else:  # stream: our client alone has no streaming counterpart
            plan += [(case, v) for v in variants if v != "client"]
    return plan


def run_case(bench: SparkBench, case: str, variant: str) -> dict[str, Any]:
    """One run: rows, seconds, rows/s and CPU (raises on failure)."""
    rec: dict[str, Any] = {}
    if case == "producer" or (case == "read" and variant == "client"):
        child = bench.producer(variant) if case == "producer" else bench.client()
        rows = int(child.get("messages", child.get("rows", 0)))
        seconds = float(child["seconds"])
        rec["cpu_seconds"] = child.get("cpu_seconds")
        if "errors" in child:
            rec["errors"] = child["errors"]
    else:
        if case == "sink" and variant == "floor":
            fn: Callable[[str], int] = lambda _variant: bench.sink_floor()  # noqa: E731
        else:
            fn = {"read": bench.read, "stream": bench.stream, "sink": bench.sink}[case]
        rows, seconds, cpu = _timed(fn, variant)
        rec["cpu_seconds"] = round(cpu, 3)
    rec.update(rows=rows, seconds=round(seconds, 3), ok=rows > 0)
    rec["rows_per_s"] = round(rows / seconds, 1) if seconds > 0 else None
    return rec


def main(argv: Sequence[str] | None = None) -> int:
    """Run the rounds; one JSON line per run on stdout, progress on stderr."""
    ns = _args(argv)
    os.environ.setdefault("PYTHONPATH", str(REPO))
    cases = [c for c in ns.cases.split(",") if c]
    if not ns.sink_topic:
        cases = [c for c in cases if c != "sink"]
    variants = [v for v in ns.variants.split(",") if v]
    servers = [int(p) for p in ns.server_pids.split(",") if p.strip()]
    bench = SparkBench(ns)
    try:
        plan = run_plan(cases, variants)
        for rnd in range(ns.rounds):
            for case, variant in plan if rnd % 2 == 0 else list(reversed(plan)):
                rec: dict[str, Any] = {"round": rnd, "case": case, "variant": variant}
                s0 = pids_cpu(servers)
                try:
                    rec.update(run_case(bench, case, variant))
                except Exception as exc:  # one failed run is recorded, the rest still run
                    rec.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:500])
                if servers:
                    rec["server_cpu_seconds"] = round(pids_cpu(servers) - s0, 3)
                _emit(rec)
                print(f"[spark] {rec}", file=sys.stderr, flush=True)
        if "read" in cases and "aio" in variants:
            _emit({"case": "check", "variant": "aio", "rows": bench.check_count()})
    finally:
        bench.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
