"""A real ``redis-server`` on a free loopback port, for tests, demos and benchmarks.

:class:`RedisServer` runs the Debian ``redis-server`` binary as a child process with an
append-only file fsynced on every write (``--appendonly yes --appendfsync always``) and no RDB
snapshots, in its own temporary directory. ``kill()`` (SIGKILL) and ``restart()`` (same port and
directory, so the AOF is replayed) simulate a crash; ``flushall()`` simulates lost state.

It needs only the standard library: readiness and ``FLUSHALL`` speak the Redis protocol over a
plain socket (:mod:`._resp`). The process is owned like the TubeMQ JVMs
(:mod:`tubemq_aio.testing._process`): stopped on exit, killed at interpreter exit and when the
Python process dies.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

from tubemq_aio.testing._errors import ClusterError, ToolNotFoundError
from tubemq_aio.testing._ports import PortLease
from tubemq_aio.testing._process import JavaProcess, option_args, tail
from tubemq_aio.testing._redis_tls import client_context, client_url_options, tls_directives
from tubemq_aio.testing._resp import HOST as _HOST
from tubemq_aio.testing._resp import RespError, command
from tubemq_aio.testing._service import AsyncService
from tubemq_aio.testing._tls import TlsMaterial
from tubemq_aio.testing.polling import check_seconds

__all__ = ["RedisServer", "RedisServerError", "check_password"]


class RedisServerError(ClusterError):
    """``redis-server`` did not start, exited early, or did not answer in time."""


def check_password(name: str, secret: object) -> None:
    """A Redis password: None, or a non-empty printable string without spaces.

    Raises:
        ValueError: it is not (named ``name``).
    """
    if secret is None:
        return
    if not isinstance(secret, str) or not secret or not secret.isprintable() or " " in secret:
        raise ValueError(f"{name} must be printable, without spaces, and not empty")


def require_binary(binary: str) -> None:
    """Raise :class:`ToolNotFoundError` unless ``binary`` is on ``PATH``."""
    if shutil.which(binary) is None:
        raise ToolNotFoundError(f"{binary!r} not found on PATH (install the redis-server package)")


def working_dir(given: Path | None, prefix: str) -> Path:
    """``given`` (created if missing), or a new temporary directory named ``prefix…``."""
    if given is not None:
        given.mkdir(parents=True, exist_ok=True)
        return given
    return Path(tempfile.mkdtemp(prefix=prefix))


class RedisServer(AsyncService):
    """A ``redis-server`` child process on ``127.0.0.1`` with AOF ``appendfsync always``.

    Args:
        binary: the server program (name on ``PATH`` or a path).
        start_timeout: seconds to wait for the server to answer ``PING``.
        data_dir: directory for the AOF and the log; a temporary one (removed on stop) if None.
        extra_args: more ``--option value`` arguments appended to the command line.
        password: the server requires it (``requirepass``) and a replica of it uses it
            towards its primary (``masterauth``); None for none.
        tls: listen with TLS only, on :attr:`port`, with this material (see
            :func:`~tubemq_aio.testing.make_tls_material`; clients must show its pair too);
            None for plain TCP.

    Example::

        async with RedisServer() as redis:
            client = redis_py.Redis.from_url(redis.url)
    """

    def __init__(
        self,
        *,
        binary: str = "redis-server",
        start_timeout: float = 20.0,
        data_dir: Path | None = None,
        extra_args: tuple[str, ...] = (),
        password: str | None = None,
        tls: TlsMaterial | None = None,
    ) -> None:
        """Store the settings; nothing is started yet (see class docstring).

        Raises:
            ValueError: ``start_timeout`` is not finite seconds > 0, or ``password`` not None
                nor a printable string without spaces (an int failed the start with a raw
                ``TypeError``).
        """
        check_seconds("RedisServer", "start_timeout", start_timeout)
        check_password("password", password)
        self.binary = binary
        self.start_timeout = start_timeout
        self.extra_args = tuple(extra_args)
        self.password = password
        self.tls = tls
        self._client_tls = None if tls is None else client_context(tls)
        self._given_dir = data_dir
        self._dir: Path | None = None
        self._port: int | None = None
        self._lease = PortLease()
        self._proc: JavaProcess | None = None

    # ---- properties --------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The TCP port (fixed for the server's life, kept across :meth:`restart`; reserved
        against other processes from :meth:`start` to :meth:`stop`)."""
        if self._port is None:
            raise RedisServerError("the Redis server was never started")
        return self._port

    @property
    def url(self) -> str:
        """``redis://[:<password>@]127.0.0.1:<port>/0`` (``rediss://…?ssl_ca_certs=…`` with TLS)."""
        auth = "" if self.password is None else f":{quote(self.password, safe='')}@"
        if self.tls is not None:
            return f"rediss://{auth}{_HOST}:{self.port}/0?{client_url_options(self.tls)}"
        return f"redis://{auth}{_HOST}:{self.port}/0"

    @property
    def data_dir(self) -> Path:
        """The directory holding the AOF and ``redis.log``."""
        if self._dir is None:
            raise RedisServerError("the Redis server was never started")
        return self._dir

    @property
    def running(self) -> bool:
        """True while the server process is alive."""
        return self._proc is not None and self._proc.running

    @property
    def log_file(self) -> Path:
        """The server's log file."""
        return self.data_dir / "redis.log"

    # ---- life cycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the server on a free port and wait until it answers ``PING``; a start while
        another is under way waits for it, a stop waits for a start under way.

        Raises:
            ToolNotFoundError: ``redis-server`` is not installed.
            RedisServerError: it exited early or did not answer within ``start_timeout``,
                or (a start after :meth:`stop`) another process reserved its port meanwhile.
        """
        async with self._lifecycle_lock():
            if self.running:
                return
            await self._start()

    async def _start(self) -> None:
        require_binary(self.binary)
        if self._dir is None:
            self._dir = working_dir(self._given_dir, "tubemq-aio-redis-")
        if self._port is None:
            self._port = self._lease.take(1)[0]
        else:  # started again after stop(): the same port, if nobody took it meanwhile
            try:
                self._lease.claim([self._port])
            except OSError as exc:
                raise RedisServerError(f"cannot start again on port {self._port}: {exc}") from exc
        await self._spawn()

    async def _spawn(self) -> None:
        options = {
            "--bind": _HOST,
            "--port": str(self.port),
            "--dir": str(self.data_dir),
            "--appendonly": "yes",
            "--appendfsync": "always",
            "--save": "",
            "--daemonize": "no",
            "--protected-mode": "yes",
            "--logfile": str(self.log_file),
        }
        argv = [self.binary, *option_args(options), *self.extra_args]
        if self.password is not None:
            argv += ["--requirepass", self.password, "--masterauth", self.password]
        if self.tls is not None:  # later directives win: the plain port becomes 0
            for name, value in tls_directives(self.tls, self.port).items():
                argv += [f"--{name}", value]
        proc = JavaProcess("redis", argv, self.data_dir / "stdout.log", self.data_dir)
        proc.spawn()
        self._proc = proc
        try:
            await self._wait_ready()
        except BaseException:
            await proc.kill()
            raise

    async def _wait_ready(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.start_timeout
        while True:
            if not self._proc.running:
                raise RedisServerError(
                    f"redis-server exited with status {self._proc.returncode}",
                    self.log_file,
                    tail(self.log_file, 20),
                )
            try:
                ping = await command(
                    self.port, "PING", timeout=1.0, password=self.password, tls=self._client_tls
                )
                if ping == "PONG":
                    return
            except (OSError, TimeoutError, ConnectionError, RespError):
                pass
            if time.monotonic() >= deadline:
                raise RedisServerError(
                    f"redis-server did not answer PING within {self.start_timeout} s",
                    self.log_file,
                    tail(self.log_file, 20),
                )
            await asyncio.sleep(0.05)

    async def kill(self) -> None:
        """SIGKILL the server (a crash); the AOF stays for :meth:`restart`."""
        if self._proc is not None:
            await self._proc.kill()

    async def restart(self) -> None:
        """Start the server again on the same port and directory (the AOF is replayed).

        Stops it first (SIGTERM) if it is still running.

        Raises:
            RedisServerError: it did not come back.
        """
        if self._port is None:
            raise RedisServerError("the Redis server was never started")
        async with self._lifecycle_lock():
            if self._proc is not None and self._proc.running:
                await self._proc.stop()
            await self._spawn()

    async def flushall(self) -> None:
        """Delete every key (simulates a Redis that lost its data).

        Raises:
            RedisServerError: the server refused or did not answer.
        """
        try:
            reply = await command(
                self.port, "FLUSHALL", timeout=10.0, password=self.password, tls=self._client_tls
            )
        except (OSError, TimeoutError, ConnectionError, RespError) as exc:
            raise RedisServerError(f"FLUSHALL failed: {exc!r}") from exc
        if reply != "OK":
            raise RedisServerError(f"FLUSHALL answered {reply!r}")

    async def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL), release its port's reservation and remove a
        temporary directory. Idempotent; waits for a start under way."""
        async with self._lifecycle_lock():
            await self._stop()

    async def _stop(self) -> None:
        if self._proc is not None:
            await self._proc.stop(timeout=10.0)
            self._proc = None
        self._lease.release()
        if self._dir is not None and self._given_dir is None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __repr__(self) -> str:
        """Show port and state."""
        state = "running" if self.running else "stopped"
        return f"<RedisServer port={self._port} {state}>"
