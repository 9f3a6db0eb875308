"""A real local PySpark session for the Spark source and sink tests.

Import the fixture into a test module (``from spark_fixtures import spark``); it is
session-scoped, so the whole run shares one JVM (start-up costs ~10 s on this box). Python
workers run this interpreter, so they see the package installed in the venv. Every listener
binds to loopback and the web UI is off.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A ``local[2]`` SparkSession shared by every Spark test of the run."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    scratch = tempfile.mkdtemp(prefix="tubemq-spark-")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("tubemq-aio-tests")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.local.dir", scratch)
        .config("spark.sql.streaming.checkpointLocation", os.path.join(scratch, "checkpoints"))
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    try:
        yield session
    finally:
        session.stop()
