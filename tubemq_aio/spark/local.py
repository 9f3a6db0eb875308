"""A local SparkSession on loopback that is ready for the ``tubemq`` data source.

For examples, tests and trying things out: ``local[N]`` bound to 127.0.0.1, no UI, Python
workers on this interpreter (so they import the same ``tubemq_aio`` and ``pyarrow``), and
:class:`~tubemq_aio.spark.TubeMQDataSource` registered.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

from tubemq_aio.spark.source import TubeMQDataSource

__all__ = ["local_session"]


def local_session(
    app_name: str,
    *,
    cores: int = 2,
    local_dir: str | None = None,
    log_level: str = "WARN",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Start (or get) a ``local[cores]`` session on loopback with ``tubemq`` registered.

    Args:
        app_name: the Spark application name.
        cores: worker threads of the local master.
        local_dir: Spark's scratch directory (``spark.local.dir``); default: Spark's own.
        log_level: the JVM log level (``WARN``, ``ERROR`` ...).
        conf: further Spark settings.

    Returns:
        The session.
    """
    # Workers must run this interpreter, or they miss the packages of this environment.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    settings = {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(cores),
    }
    if local_dir is not None:
        settings["spark.local.dir"] = local_dir
    settings.update(conf or {})
    builder = SparkSession.builder.master(f"local[{cores}]").appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(log_level)
    session.dataSource.register(TubeMQDataSource)
    return session
