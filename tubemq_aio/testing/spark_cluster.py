"""A Spark standalone cluster and a Spark Connect server on loopback, from the ``pyspark`` package.

For tests and examples that need Spark beyond ``local[N]``: a master and worker JVMs as separate
processes (:class:`SparkStandaloneCluster`), a Connect server (:class:`SparkConnectServer`), a
Python for the executors that does not see this package (:func:`make_executor_python`) and the
package zipped for ``--py-files`` (:func:`package_zip`), so a job proves that what it ships is
what its executors run.

Every process leads its own process group and dies with this Python process. Killing or
stopping one ends its whole process tree (a worker's executors, and their Python daemons, which
lead groups of their own), so :meth:`SparkStandaloneCluster.kill_worker` is losing a node and
nothing outlives :meth:`~SparkStandaloneCluster.stop`. Needs ``java`` on ``PATH`` (or
``JAVA_HOME``) and ``pyspark`` installed.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path

from tubemq_aio.testing._errors import SparkClusterError, ToolNotFoundError
from tubemq_aio.testing._ports import PortLease
from tubemq_aio.testing._process import JavaProcess, option_args, tail
from tubemq_aio.testing._service import AsyncService
from tubemq_aio.testing._spark_env import (
    HOST,
    Probe,
    end_tree,
    java_env,
    make_executor_python,
    master_state,
    package_zip,
    parents,
    port_open,
    spark_home,
    wait_ready,
)

__all__ = [
    "CONNECT_SERVER_CLASS",
    "SparkConnectServer",
    "SparkStandaloneCluster",
    "make_executor_python",
    "package_zip",
    "spark_home",
]

#: The Spark Connect server's main class (in the ``spark-connect`` jar of ``pyspark``).
CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


class SparkStandaloneCluster(AsyncService):
    """A standalone master and ``workers`` worker JVMs on 127.0.0.1, each its own process group.

    Args:
        workers: Number of workers.
        cores: Cores each worker offers.
        memory: Memory each worker offers to executors (``1g``).
        python: Interpreter of the executors' Python workers (``PYSPARK_PYTHON``); default this one.
        work_dir: Logs and the workers' scratch space; default a new temporary directory.
        start_timeout: Seconds allowed for the master, and then for all workers, to be ready.
    """

    def __init__(
        self,
        *,
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        python: str | None = None,
        work_dir: Path | None = None,
        start_timeout: float = 120.0,
    ) -> None:
        """Store the settings; nothing starts before :meth:`start`."""
        if workers < 1 or cores < 1:
            raise ValueError("workers and cores must be at least 1")
        self.cores = cores
        self.memory = memory
        self.python = python or sys.executable
        self.work_dir = work_dir or Path(tempfile.mkdtemp(prefix="tubemq-aio-spark-"))
        self.start_timeout = start_timeout
        self._worker_count = workers
        self._master: JavaProcess | None = None
        self._workers: list[JavaProcess | None] = [None] * workers
        self._ports: list[int] = []
        #: Every port of the master and of each worker start, reserved until :meth:`stop`.
        self._lease = PortLease()

    @property
    def master_url(self) -> str:
        """``spark://127.0.0.1:port``, for ``--master``."""
        return f"spark://{HOST}:{self._port(0)}"

    @property
    def webui_url(self) -> str:
        """The master's web UI (its ``/json/`` tells the workers and applications)."""
        return f"http://{HOST}:{self._port(1)}"

    @property
    def env(self) -> dict[str, str]:
        """Environment for ``spark-submit`` against this cluster (Spark home, Python, loopback)."""
        return java_env(os.environ, self.python, self.work_dir)

    def _port(self, index: int) -> int:
        if not self._ports:
            raise SparkClusterError("the Spark cluster is not started")
        return self._ports[index]

    def _spark_class(self, name: str, *args: str) -> list[str]:
        return [str(spark_home() / "bin" / "spark-class"), name, *args]

    def worker_of(self, pid: int) -> int | None:
        """Index of the worker that ``pid`` (an executor or Python worker) descends from."""
        workers = {proc.pid: index for index, proc in enumerate(self._workers) if proc is not None}
        parent_of = parents()
        seen: set[int] = set()
        while pid not in workers:
            if pid in seen or pid not in parent_of:
                return None
            seen.add(pid)
            pid = parent_of[pid]
        return workers[pid]

    async def start(self) -> None:
        """Start the master, then every worker, and wait until the master counts them alive.

        Raises:
            ToolNotFoundError: no ``pyspark`` or no ``java``.
            SparkClusterError: a process exited or was not ready within ``start_timeout``.

        Nothing when it runs; a start while another is under way waits for it, and a stop waits
        for a start under way.
        """
        async with self._lifecycle_lock():
            if self._master is None:
                await self._start()

    async def _start(self) -> None:
        if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
            raise ToolNotFoundError("java not found on PATH and JAVA_HOME not set")
        self._ports = self._lease.take(2)
        options = {"--host": HOST, "--port": str(self._port(0)), "--webui-port": str(self._port(1))}
        argv = self._spark_class("org.apache.spark.deploy.master.Master", *option_args(options))
        env = {**self.env, "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}
        master = JavaProcess(
            "spark-master", argv, self.work_dir / "master.log", self.work_dir, env=env
        )
        self._master = master
        master.spawn()
        await self._wait(master, lambda: port_open(self._port(1)), "the master's web UI")
        await self._start_workers(range(self._worker_count))

    async def start_worker(self, index: int) -> None:
        """Start worker ``index`` (again, after :meth:`kill_worker`) and wait until registered.

        A restarted worker gets new ports: the master refuses a worker at the address of one it
        still counts alive (until ``spark.worker.timeout`` passes without a heartbeat).
        """
        await self._start_workers([index])

    async def _start_workers(self, indexes: Sequence[int]) -> None:
        waits = []
        for index in indexes:
            proc = self._workers[index]
            if proc is not None and proc.running:
                continue
            scratch = self.work_dir / f"worker{index}"
            scratch.mkdir(parents=True, exist_ok=True)
            port, webui_port = self._lease.take(2)
            options = {
                "--host": HOST,
                "--port": str(port),
                "--webui-port": str(webui_port),
                "--cores": str(self.cores),
                "--memory": self.memory,
                "--work-dir": str(scratch),
            }
            worker = "org.apache.spark.deploy.worker.Worker"
            argv = self._spark_class(worker, *option_args(options), self.master_url)
            log = self.work_dir / f"worker{index}.log"
            proc = JavaProcess(f"spark-worker{index}", argv, log, scratch, env=self.env)
            self._workers[index] = proc
            proc.spawn()
            ready = partial(self._worker_alive, port)
            waits.append(asyncio.ensure_future(self._wait(proc, ready, f"worker {index}")))
        try:
            await asyncio.gather(*waits)
        except BaseException:
            for wait in waits:  # a cancelled wait kills its worker
                wait.cancel()
            await asyncio.gather(*waits, return_exceptions=True)
            raise

    async def kill_worker(self, index: int) -> None:
        """SIGKILL worker ``index`` with its executors and Python workers (a lost node)."""
        proc = self._workers[index]
        if proc is not None and proc.pid is not None:
            await end_tree(proc, kill=True)

    async def alive_workers(self) -> int:
        """Workers the master counts alive (a killed one stays so until its heartbeat times out)."""
        return sum(1 for w in await self._worker_states() if w.get("state") == "ALIVE")

    async def _worker_states(self) -> list[dict[str, object]]:
        state = await asyncio.to_thread(master_state, self._port(1))
        workers = state.get("workers", [])
        return [w for w in workers if isinstance(w, dict)] if isinstance(workers, list) else []

    async def _worker_alive(self, port: int) -> bool:
        try:
            workers = await self._worker_states()
        except OSError:
            return False
        return any(w.get("port") == port and w.get("state") == "ALIVE" for w in workers)

    def submit_command(
        self,
        app: str | Path,
        args: Sequence[str] = (),
        *,
        py_files: Sequence[str | Path] = (),
        conf: Mapping[str, str] | None = None,
    ) -> list[str]:
        """The ``spark-submit`` command line of ``app`` on this cluster (client deploy mode).

        The driver binds to loopback and keeps its scratch files under :attr:`work_dir`; run the
        command with :attr:`env`.

        Args:
            app: The Python file to run.
            args: Its arguments.
            py_files: Zips, wheels or ``.py`` files to ship with ``--py-files``.
            conf: Further Spark settings.
        """
        settings = {
            "spark.driver.host": HOST,
            "spark.driver.bindAddress": HOST,
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.local.dir": str(self.work_dir / "driver"),
            **(conf or {}),
        }
        argv = [str(spark_home() / "bin" / "spark-submit"), "--master", self.master_url]
        if py_files:
            argv += ["--py-files", ",".join(map(str, py_files))]
        for key, value in settings.items():
            argv += ["--conf", f"{key}={value}"]
        return [*argv, str(app), *args]

    async def _wait(self, proc: JavaProcess, ready: Probe, what: str) -> None:
        await wait_ready(proc, ready, what, self.start_timeout)

    def log_tails(self, lines: int = 30) -> str:
        """The last ``lines`` lines of every process's log, for a failure message."""
        procs = [self._master, *self._workers]
        live = [p for p in procs if p is not None]
        return "\n".join(f"--- {p.name} ({p.out_file})\n{tail(p.out_file, lines)}" for p in live)

    async def stop(self) -> None:
        """Stop the workers, then the master (SIGTERM, SIGKILL after 15 s), and release the
        ports' reservations; safe to call twice."""
        async with self._lifecycle_lock():
            await self._stop()

    async def _stop(self) -> None:
        for proc in [*self._workers, self._master]:
            if proc is not None:
                await end_tree(proc, kill=False)
        self._master = None
        self._lease.release()

    def __repr__(self) -> str:
        """Show the master URL, or that the cluster is not started."""
        where = self.master_url if self._ports else "not started"
        return f"<SparkStandaloneCluster {where} workers={self._worker_count}>"


class SparkConnectServer(AsyncService):
    """A Spark Connect server (``SparkConnectServer`` run by ``spark-submit``) on 127.0.0.1.

    Args:
        master: The Spark master it runs its queries on (``local[2]``, a cluster's URL).
        python: Interpreter of its Python workers; default this one.
        conf: Further Spark settings (``--conf``).
        env: Further environment variables of the server, e.g. a ``PYTHONPATH`` that lets its
            driver-side Python processes import a package (PySpark 4.3 plans a Python streaming
            source in one that sees neither ``--py-files`` nor a session's uploaded artifacts).
        work_dir: Log and scratch space; default a new temporary directory.
        start_timeout: Seconds allowed until it accepts connections.
    """

    def __init__(
        self,
        master: str = "local[2]",
        *,
        python: str | None = None,
        conf: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        work_dir: Path | None = None,
        start_timeout: float = 180.0,
    ) -> None:
        """Store the settings; nothing starts before :meth:`start`."""
        self.master = master
        self.python = python or sys.executable
        self.conf = dict(conf or {})
        self.env = dict(env or {})
        self.work_dir = work_dir or Path(tempfile.mkdtemp(prefix="tubemq-aio-connect-"))
        self.start_timeout = start_timeout
        self._proc: JavaProcess | None = None
        self._port: int | None = None
        self._lease = PortLease()

    @property
    def url(self) -> str:
        """``sc://127.0.0.1:port``, for ``SparkSession.builder.remote``."""
        if self._port is None:
            raise SparkClusterError("the Spark Connect server is not started")
        return f"sc://{HOST}:{self._port}"

    @property
    def log_file(self) -> Path:
        """The server's stdout and stderr."""
        return self.work_dir / "connect.log"

    async def start(self) -> None:
        """Start the server and wait until its gRPC port accepts connections.

        Raises:
            ToolNotFoundError: no ``pyspark``.
            SparkClusterError: it exited or was not ready within ``start_timeout``.

        Nothing when it runs; a start while another is under way waits for it, and a stop waits
        for a start under way.
        """
        async with self._lifecycle_lock():
            if self._proc is None:
                await self._start()

    async def _start(self) -> None:
        self._port = self._lease.take(1)[0]
        settings = {
            "spark.connect.grpc.binding.address": HOST,
            "spark.connect.grpc.binding.port": str(self._port),
            "spark.driver.host": HOST,
            "spark.driver.bindAddress": HOST,
            "spark.ui.enabled": "false",
            "spark.local.dir": str(self.work_dir / "scratch"),
            **self.conf,
        }
        argv = [str(spark_home() / "bin" / "spark-submit"), "--master", self.master]
        for key, value in settings.items():
            argv += ["--conf", f"{key}={value}"]
        argv += ["--class", CONNECT_SERVER_CLASS, "spark-internal"]
        self.work_dir.mkdir(parents=True, exist_ok=True)
        env = {**java_env(os.environ, self.python, self.work_dir), **self.env}
        proc = JavaProcess("spark-connect", argv, self.log_file, self.work_dir, env=env)
        self._proc = proc
        proc.spawn()
        port = self._port
        await wait_ready(proc, lambda: port_open(port), "Spark Connect", self.start_timeout)

    async def stop(self) -> None:
        """Stop the server (SIGTERM, SIGKILL after 15 s) and release its port's reservation;
        safe to call twice."""
        async with self._lifecycle_lock():
            await self._stop()

    async def _stop(self) -> None:
        if self._proc is not None:
            await end_tree(self._proc, kill=False)
        self._proc = None
        self._lease.release()

    def __repr__(self) -> str:
        """Show the URL, or that the server is not started."""
        where = f"sc://{HOST}:{self._port}" if self._proc is not None else "not started"
        return f"<SparkConnectServer {where} master={self.master}>"
