"""The Spark harness's pieces that need no JVM: the shipped zip, the executor Python that cannot
import the package, the JVM environment, process trees, and misuse of the cluster object."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from tubemq_aio.testing import SparkClusterError
from tubemq_aio.testing._spark_env import descendants, java_env
from tubemq_aio.testing.spark_cluster import (
    SparkConnectServer,
    SparkStandaloneCluster,
    make_executor_python,
    package_zip,
    spark_home,
)

IMPORT_CHECK = "import tubemq_aio, pyarrow, google.protobuf; print(tubemq_aio.__file__)"


def test_zip_holds_the_sources_and_no_compiled_or_cached_files(tmp_path: Path) -> None:
    names = zipfile.ZipFile(package_zip(tmp_path)).namelist()
    assert "tubemq_aio/__init__.py" in names
    assert "tubemq_aio/spark/source.py" in names
    assert "tubemq_aio/py.typed" in names
    assert not [n for n in names if n.endswith((".so", ".pyc", ".c", ".pyx"))]


def test_executor_python_imports_the_package_only_from_the_zip(tmp_path: Path) -> None:
    python = make_executor_python(tmp_path / "venv")
    package = package_zip(tmp_path / "ship")
    without_path = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # as java_env
    bare = subprocess.run(
        [str(python), "-c", IMPORT_CHECK],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=without_path,
    )
    assert bare.returncode != 0
    assert "No module named 'tubemq_aio'" in bare.stderr
    shipped = subprocess.run(
        [str(python), "-c", IMPORT_CHECK],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(package)},
        check=True,
    )
    assert shipped.stdout.strip() == f"{package}/tubemq_aio/__init__.py"


def test_jvm_environment_drops_python_and_spark_settings_of_the_caller(tmp_path: Path) -> None:
    base = {"PATH": "/bin", "PYTHONPATH": "/x", "SPARK_CONF_DIR": "/etc/x", "PYSPARK_PYTHON": "p"}
    env = java_env(base, "/venv/bin/python", tmp_path)
    assert "PYTHONPATH" not in env
    assert env["PATH"] == "/bin"
    assert env["PYSPARK_PYTHON"] == env["PYSPARK_DRIVER_PYTHON"] == "/venv/bin/python"
    assert env["SPARK_CONF_DIR"] == str(tmp_path / "conf")
    assert not list((tmp_path / "conf").iterdir())
    assert env["SPARK_LOCAL_IP"] == env["SPARK_LOCAL_HOSTNAME"] == "127.0.0.1"
    assert Path(env["SPARK_HOME"]) == spark_home()


def test_descendants_reach_grandchildren() -> None:
    script = "import subprocess, sys; subprocess.run(['sleep', '30'])"
    child = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 30
        while not (found := descendants(child.pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(found) == 1
        assert Path(f"/proc/{found[0]}/cmdline").read_bytes().startswith(b"sleep\x0030")
    finally:
        for pid in descendants(child.pid):
            subprocess.run(["kill", "-9", str(pid)], check=False)
        child.kill()
        child.wait()


def test_cluster_refuses_bad_sizes_and_use_before_start(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        SparkStandaloneCluster(workers=0, work_dir=tmp_path)
    with pytest.raises(ValueError, match="at least 1"):
        SparkStandaloneCluster(cores=0, work_dir=tmp_path)
    cluster = SparkStandaloneCluster(work_dir=tmp_path)
    with pytest.raises(SparkClusterError, match="not started"):
        _ = cluster.master_url
    with pytest.raises(SparkClusterError, match="not started"):
        cluster.submit_command("job.py")
    assert "not started" in repr(cluster)
    assert cluster.worker_of(1) is None
    with pytest.raises(SparkClusterError, match="not started"):
        _ = SparkConnectServer(work_dir=tmp_path).url


async def test_stop_before_start_is_harmless(tmp_path: Path) -> None:
    cluster = SparkStandaloneCluster(work_dir=tmp_path)
    await cluster.stop()
    await cluster.stop()
    server = SparkConnectServer(work_dir=tmp_path)
    await server.stop()
