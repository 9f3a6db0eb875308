"""Gateway replicas as real processes (``python -m tubemq_aio.gateway``) for tests and demos."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

from tubemq_aio.testing._errors import ClusterError
from tubemq_aio.testing._ports import PortLease
from tubemq_aio.testing._process import JavaProcess, kill_pid, option_args, tail
from tubemq_aio.testing._service import AsyncService

__all__ = ["GatewayReplica", "GatewayReplicaError"]

_HOST = "127.0.0.1"


class GatewayReplicaError(ClusterError):
    """A gateway replica did not start or answer."""


async def _http_status(port: int, path: str, timeout: float) -> int:
    async with asyncio.timeout(timeout):
        reader, writer = await asyncio.open_connection(_HOST, port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {_HOST}\r\nConnection: close\r\n\r\n".encode())
        async with asyncio.timeout(timeout):
            line = await reader.readline()
        return int(line.split()[1])
    finally:
        writer.close()


class GatewayReplica(AsyncService):
    """One gateway replica (a uvicorn process) on a free loopback port.

    Args:
        config: the gateway TOML file.
        workers: uvicorn worker processes (each one is a replica).
        start_timeout: seconds to wait for ``/healthz`` (the lifespan has run by then).
        log_file: where stdout/stderr go (a temporary file if None).
        init_store: run ``tubemq-gateway init`` on the config's Redis first (what an operator
            does once per deployment; False to start a replica on the store as it is).

    Example::

        async with GatewayReplica(Path("gateway.toml")) as replica:
            print(replica.url)
    """

    def __init__(
        self,
        config: Path,
        *,
        workers: int = 1,
        start_timeout: float = 90.0,
        log_file: Path | None = None,
        init_store: bool = True,
    ) -> None:
        """Store the settings; nothing is started yet."""
        self.config = Path(config)
        self.workers = workers
        self.start_timeout = start_timeout
        self.init_store = init_store
        self._own_log = log_file is None
        if log_file is None:
            handle, name = tempfile.mkstemp(prefix="tubemq-gw-", suffix=".log")
            os.close(handle)
            log_file = Path(name)
        self.log_file = log_file
        self._lease = PortLease()
        #: The replica's port: reserved against other processes from here to :meth:`stop`.
        self.port = self._lease.take(1)[0]
        self._proc: JavaProcess | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://{_HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The server process id while it runs."""
        return self._proc.pid if self._proc is not None and self._proc.running else None

    async def start(self) -> None:
        """Start the replica and wait until it answers ``/healthz``; nothing when it runs, a
        start while another is under way waits for it, a stop waits for a start under way.

        Raises:
            GatewayReplicaError: it exited or did not answer within ``start_timeout``, or (a
                start after :meth:`stop`) another process reserved its port meanwhile.
        """
        async with self._lifecycle_lock():
            if self.pid is None:
                await self._start()

    async def _start(self) -> None:
        try:
            self._lease.claim([self.port])  # held already, unless stop() released it
        except OSError as exc:
            raise GatewayReplicaError(f"cannot start again on port {self.port}: {exc}") from exc
        if self.init_store:
            await self._init_store()
        options = {
            "--config": str(self.config),
            "--host": _HOST,
            "--port": str(self.port),
            "--workers": str(self.workers),
            "--log-level": "info",
        }
        argv = [sys.executable, "-m", "tubemq_aio.gateway", *option_args(options)]
        proc = JavaProcess("gateway", argv, self.log_file, Path(os.getcwd()))
        proc.spawn()
        self._proc = proc
        deadline = time.monotonic() + self.start_timeout
        while True:
            if not proc.running:
                raise GatewayReplicaError(
                    f"gateway exited with status {proc.returncode}",
                    self.log_file,
                    tail(self.log_file, 30),
                )
            try:
                if await _http_status(self.port, "/healthz", 1.0) == 200:
                    return
            except (OSError, TimeoutError, ValueError, IndexError):
                pass
            if time.monotonic() >= deadline:
                await proc.kill()
                raise GatewayReplicaError(
                    f"gateway did not answer within {self.start_timeout} s",
                    self.log_file,
                    tail(self.log_file, 30),
                )
            await asyncio.sleep(0.1)

    async def _init_store(self) -> None:
        """``python -m tubemq_aio.gateway init`` (a process: the core SDK imports no gateway)."""
        argv = ["-m", "tubemq_aio.gateway", "init", "--config", str(self.config)]
        proc = await asyncio.create_subprocess_exec(
            sys.executable, *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        try:
            async with asyncio.timeout(self.start_timeout):
                out, _ = await proc.communicate()
        except BaseException:
            proc.kill()
            await proc.wait()
            raise
        if proc.returncode != 0:
            raise GatewayReplicaError(
                f"gateway init exited with status {proc.returncode}",
                self.log_file,
                out.decode(errors="replace")[-2000:],
            )

    async def kill(self) -> None:
        """SIGKILL the replica (a crash)."""
        if self._proc is not None:
            await self._proc.kill()

    def freeze(self) -> None:
        """SIGSTOP the replica (a stalled process)."""
        if self._proc is not None and self._proc.pid is not None:
            kill_pid(self._proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT a frozen replica."""
        if self._proc is not None and self._proc.pid is not None:
            kill_pid(self._proc.pid, signal.SIGCONT)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop the replica and remove its temporary log."""
        await super().__aexit__(exc_type, exc, tb)
        self.cleanup()

    async def stop(self) -> None:
        """Stop the replica (SIGTERM, then SIGKILL) and release its port's reservation.
        Idempotent; waits for a start under way."""
        async with self._lifecycle_lock():
            await self._stop()

    async def _stop(self) -> None:
        if self._proc is not None:
            self.thaw()
            await self._proc.stop(timeout=15.0)
            self._proc = None
        self._lease.release()

    def cleanup(self) -> None:
        """Remove the log file if this object created it."""
        if self._own_log:
            self.log_file.unlink(missing_ok=True)

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the replica's log."""
        return tail(self.log_file, lines)
