"""A real local PySpark session for the Spark source and sink tests.

Import the fixture into a test module (``from spark_fixtures import spark``); it is
session-scoped, so the whole run shares one JVM (start-up costs ~10 s on this box). Python
workers run this interpreter, so they see the package installed in the venv. Every listener
binds to loopback and the web UI is off.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from tubemq_aio.spark.local import local_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A ``local[2]`` SparkSession shared by every Spark test of the run."""
    scratch = tempfile.mkdtemp(prefix="tubemq-spark-")
    session = local_session(
        "tubemq-aio-tests",
        local_dir=scratch,
        conf={
            "spark.driver.memory": "1g",
            "spark.sql.streaming.checkpointLocation": os.path.join(scratch, "checkpoints"),
            "spark.python.worker.reuse": "true",
        },
    )
    try:
        yield session
    finally:
        session.stop()
