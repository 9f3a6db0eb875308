"""The example pipeline on a Spark standalone cluster (``make spark-cluster-example``).

Starts a local TubeMQ cluster and a Spark standalone cluster on loopback (a master and two
one-core workers, from the ``pyspark`` package), zips ``tubemq_aio`` and runs
``examples/spark_pipeline.py`` with::

    PYTHONPATH=tubemq_aio.zip spark-submit --master spark://127.0.0.1:PORT \\
        --py-files tubemq_aio.zip examples/spark_pipeline.py --submitted --master TUBEMQ_MASTER

The executors' Python has pyspark, pyarrow and protobuf but not ``tubemq_aio``: they import it
from the shipped zip, as on a cluster whose nodes never installed it. Exits with the job's code
(0 when its counts match what was produced).
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import tempfile
from pathlib import Path

from tubemq_aio.testing import LocalCluster
from tubemq_aio.testing.spark_cluster import (
    SparkStandaloneCluster,
    make_executor_python,
    package_zip,
)

PIPELINE = Path(__file__).with_name("spark_pipeline.py")
#: Seconds the submitted job may take.
JOB_TIMEOUT = 900


async def run(events: int, work: Path) -> int:
    """Start both clusters, submit the pipeline, stop everything; return the job's exit code."""
    print("starting a local TubeMQ cluster (master + broker) ...", flush=True)
    async with LocalCluster(brokers=1, topics=["demo"], topic_partitions=3) as tubemq:
        python = make_executor_python(work / "executor-python")
        package = package_zip(work / "ship")
        print("starting a Spark standalone cluster (master + 2 workers) ...", flush=True)
        async with SparkStandaloneCluster(python=str(python), work_dir=work / "spark") as spark:
            args = ["--submitted", "--master", tubemq.master_addr, "--events", str(events)]
            argv = spark.submit_command(
                PIPELINE, [*args, "--work-dir", str(work / "job")], py_files=[package]
            )
            print("$ " + " ".join(argv), flush=True)
            # PySpark plans a Python streaming source in a driver-side process that does not
            # see --py-files: the driver gets the zip on its PYTHONPATH too.
            env = {**spark.env, "PYTHONPATH": str(package)}
            job = await asyncio.to_thread(
                subprocess.run, argv, env=env, cwd=work, timeout=JOB_TIMEOUT, check=False
            )
            return job.returncode


def main() -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=3000, help="events to produce (3000)")
    parser.add_argument("--work-dir", help="logs, output and checkpoint (default: temp)")
    args = parser.parse_args()
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="tubemq-spark-cluster-example-"))
    work.mkdir(parents=True, exist_ok=True)
    code = asyncio.run(run(args.events, work))
    print(f"job exited with {code}; logs and output in {work}", flush=True)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
