"""The shipped example pipeline (``examples/spark_pipeline.py``) on the test cluster: its Parquet
output counts exactly the produced events per type per minute."""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import pytest
from pyspark.sql import SparkSession

from tubemq_aio.testing import LocalCluster

EXAMPLE = Path(__file__).parents[2] / "examples" / "spark_pipeline.py"


def load_example() -> ModuleType:
    """Import the example script as a module."""
    spec = importlib.util.spec_from_file_location("spark_pipeline", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(900)
def test_example_pipeline_counts_every_event(
    cluster: LocalCluster, topic: str, spark: SparkSession
) -> None:
    example = load_example()
    work = tempfile.mkdtemp(prefix="tubemq-spark-example-")
    table, expected = example.run_pipeline(spark, cluster.master_addr, topic, work, 1200)
    assert table == expected
    assert sum(table.values()) == 1200
    assert {msg_type for _, msg_type in table} == set(example.TYPES)
    assert len({minute for minute, _ in table}) == 5
    shutil.rmtree(work, ignore_errors=True)
