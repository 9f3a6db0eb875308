"""What the Spark harness (:mod:`tubemq_aio.testing.spark_cluster`) runs its processes with.

The Spark home of the ``pyspark`` package, the environment of its JVMs, an executor Python that
cannot import this package, the package zipped for ``--py-files``, readiness waits and the
ending of a process with everything it started.
"""

from __future__ import annotations

import asyncio
import json
import site
import subprocess
import time
import urllib.request
import venv
import zipfile
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from tubemq_aio.testing._errors import SparkClusterError, ToolNotFoundError
from tubemq_aio.testing._process import JavaProcess, kill_pid, pid_alive, tail

__all__ = [
    "HOST",
    "Probe",
    "descendants",
    "end_tree",
    "java_env",
    "make_executor_python",
    "master_state",
    "package_zip",
    "parents",
    "port_open",
    "spark_home",
    "wait_ready",
]

#: Every Spark process binds to loopback.
HOST = "127.0.0.1"
_PACKAGE = "tubemq_aio"


def spark_home() -> Path:
    """The Spark distribution inside the installed ``pyspark`` package.

    Raises:
        ToolNotFoundError: ``pyspark`` is not installed or has no ``bin/spark-class``.
    """
    try:
        import pyspark
    except ImportError as exc:
        raise ToolNotFoundError(
            "pyspark is missing: the spark extra (pip install '.[spark]' in a clone)"
        ) from exc
    home = Path(pyspark.__file__).parent
    if not (home / "bin" / "spark-class").is_file():
        raise ToolNotFoundError(f"no bin/spark-class in the pyspark package at {home}")
    return home


def package_zip(dest_dir: Path) -> Path:
    """Zip this package's Python sources into ``dest_dir/tubemq_aio.zip`` for ``--py-files``.

    Compiled modules are left out: Python cannot import them from a zip, and the package falls
    back to its pure-Python code without them.

    Returns:
        The zip file.
    """
    root = Path(__file__).resolve().parents[1]
    dest_dir.mkdir(parents=True, exist_ok=True)
    target = dest_dir / f"{_PACKAGE}.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(root.rglob("*")):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            if path.suffix in (".py", ".typed", ".json", ".xml", ".proto"):
                archive.write(path, Path(_PACKAGE) / path.relative_to(root))
    return target


def make_executor_python(dest: Path, hidden: str = _PACKAGE) -> Path:
    """Make a virtualenv that has this environment's packages except ``hidden``.

    Its site-packages links every entry of the current one but those naming ``hidden`` (the
    package, its metadata and an editable install's path hooks), so a Spark job run with it
    imports ``hidden`` only from what the job ships.

    Returns:
        The virtualenv's ``python``.
    """
    venv.EnvBuilder(with_pip=False, symlinks=True, clear=True).create(dest)
    python = dest / "bin" / "python"
    target = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    for source_dir in map(Path, site.getsitepackages()):
        for entry in source_dir.iterdir():
            if hidden in entry.name or (target / entry.name).exists():
                continue
            (target / entry.name).symlink_to(entry)
    return python


def java_env(base: Mapping[str, str], python: str, work_dir: Path) -> dict[str, str]:
    """``base`` without Python and Spark variables, plus Spark home, an empty conf directory,
    loopback, and ``python`` for the driver and the Python workers."""
    env = {k: v for k, v in base.items() if not k.startswith(("PYTHON", "SPARK_", "PYSPARK_"))}
    home = spark_home()
    conf_dir = work_dir / "conf"  # empty: no spark-defaults.conf or spark-env.sh of the machine
    conf_dir.mkdir(parents=True, exist_ok=True)
    env.update(
        SPARK_HOME=str(home),
        SPARK_CONF_DIR=str(conf_dir),
        SPARK_LOCAL_IP=HOST,
        SPARK_LOCAL_HOSTNAME=HOST,
        SPARK_LOG_DIR=str(work_dir / "logs"),
        SPARK_DAEMON_MEMORY="512m",
        PYSPARK_PYTHON=python,
        PYSPARK_DRIVER_PYTHON=python,
    )
    return env


async def port_open(port: int) -> bool:
    """Whether something accepts connections on ``127.0.0.1:port``."""
    try:
        async with asyncio.timeout(1.0):
            _, writer = await asyncio.open_connection(HOST, port)
    except (OSError, TimeoutError):
        return False
    writer.close()
    return True


#: A readiness check: True once the process is ready.
Probe = Callable[[], Awaitable[bool]]


async def wait_ready(proc: JavaProcess, ready: Probe, what: str, timeout: float) -> None:
    """Poll ``ready`` until it holds; SIGKILL ``proc`` and raise when it exits or time runs out."""
    deadline = time.monotonic() + timeout
    try:
        while not await ready():
            if not proc.running:
                raise SparkClusterError(
                    f"{what} exited with status {proc.returncode}",
                    proc.out_file,
                    tail(proc.out_file, 30),
                )
            if time.monotonic() >= deadline:
                late = f"{what} was not ready within {timeout} s"
                raise SparkClusterError(late, proc.out_file, tail(proc.out_file, 30))
            await asyncio.sleep(0.2)
    except BaseException:
        await proc.kill()
        raise


def parents() -> dict[int, int]:
    """Every live process's parent, from ``/proc``."""
    parent_of = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent_of[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return parent_of


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid``."""
    children: dict[int, list[int]] = {}
    for child, parent in parents().items():
        children.setdefault(parent, []).append(child)
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


async def end_tree(proc: JavaProcess, *, kill: bool) -> None:
    """Kill (or stop) ``proc``, then SIGKILL what is left of its descendants: PySpark's Python
    daemons lead process groups of their own, so ending the JVM's group does not reach them."""
    offspring = descendants(proc.pid) if proc.pid is not None else []
    await (proc.kill() if kill else proc.stop())
    for pid in offspring:
        if pid_alive(pid):
            kill_pid(pid)


def master_state(webui_port: int) -> dict[str, object]:
    """The standalone master's ``/json/`` state (workers, applications)."""
    with urllib.request.urlopen(f"http://{HOST}:{webui_port}/json/", timeout=2.0) as answer:
        state: dict[str, object] = json.loads(answer.read())
    return state
