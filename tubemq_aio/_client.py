"""What every TubeMQ client object shares: its connection pool, local address and lifecycle."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
import time
from types import TracebackType
from typing import Self

from tubemq_aio._io.pool import ConnectionPool
from tubemq_aio._io.settings import TransportSettings
from tubemq_aio._supervisor import Supervisor
from tubemq_aio._version import __version__
from tubemq_aio.config import ClientConfig
from tubemq_aio.errors import ClientClosedError
from tubemq_aio.protocol.client_id import CLIENT_VERSION_PREFIX, make_client_id

__all__ = [
    "AsyncLifecycle",
    "auth_stamp",
    "local_ip_towards",
    "new_client_id",
    "open_pool",
    "wall_ms",
]

log = logging.getLogger("tubemq_aio")


def open_pool(config: ClientConfig) -> ConnectionPool:
    """The connection pool a client uses: the loop-wide shared one when ``connection_reuse`` is
    on (each call adds a reference; close it once), else a private pool."""
    low_water = config.write_low_water
    settings = TransportSettings(
        connect_timeout=config.connect_timeout,
        idle_timeout=config.idle_timeout,
        max_in_flight=config.max_in_flight,
        write_high_water=config.write_high_water,
        write_low_water=config.write_high_water // 4 if low_water is None else low_water,
        max_frame_bytes=config.max_frame_bytes,
        sweep_interval=config.sweep_interval,
        read_coalescing=config.read_coalescing,
        close_timeout=config.connection_close_timeout,
        backoff_initial=config.connect_backoff_initial,
        backoff_max=config.connect_backoff_max,
        backoff_multiplier=config.connect_backoff_multiplier,
        backoff_jitter=config.connect_backoff_jitter,
        ssl_context=config.ssl_context,
        tls_server_hostname=config.tls_server_hostname,
        framing=config.framing,
    )
    return ConnectionPool.shared(settings) if config.connection_reuse else ConnectionPool(settings)


def local_ip_towards(host: str, port: int = 9) -> str:
    """The local IPv4 address the OS would use to reach ``host`` (a UDP connect sends nothing).

    Falls back to ``127.0.0.1`` when there is no route.
    """
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((host, port))
            address: str = probe.getsockname()[0]
            return address
    except OSError:
        return "127.0.0.1"


def new_client_id(local_ip: str, *, group: str | None = None, kind: str | None = None) -> str:
    """A fresh client id of this process: a producer id, or a consumer id with ``group`` and
    ``kind`` (``"Pull"``/``"Balance"``); see :mod:`tubemq_aio.protocol.client_id`."""
    return make_client_id(
        local_ip,
        os.getpid(),
        time.monotonic_ns(),
        random.getrandbits(31),
        CLIENT_VERSION_PREFIX + __version__,
        group=group,
        kind=kind,
    )


def wall_ms() -> int:
    """Wall-clock milliseconds since the epoch (what TubeMQ puts on the wire)."""
    return time.time_ns() // 1_000_000


def auth_stamp() -> tuple[int, int]:
    """``(timestamp_ms, nonce)`` for a fresh signed ``AuthenticateInfo``
    (docs/protocol/wire.md §6.2)."""
    return wall_ms(), random.getrandbits(31)


class AsyncLifecycle:
    """The start/close protocol every client follows (style principle 5).

    * ``start()`` runs :meth:`_start` in a task of its own. A failed or cancelled start closes
      the client for good (everything it opened is released) and re-raises; a ``close()``
      during ``start()`` stops the start, which then raises :class:`ClientClosedError`.
      Concurrent ``start()`` calls share one start.
    * ``close()`` runs the teardown (:meth:`_teardown`) in a task of its own and waits for it
      under :func:`asyncio.shield`: cancelling a ``close()`` (a timeout, a second Ctrl-C) does
      not cut the teardown short, and a second ``close()`` waits for the same teardown. If the
      teardown task itself is cancelled (the event loop shuts down), its mandatory part still
      cancels every background task and closes the connections, and a later ``close()`` runs
      the teardown again.
    * ``async with client:`` calls ``start()`` on entry and ``close()`` on exit.
    * A client belongs to the event loop that started it (its connections and tasks live
      there): a call from another loop raises :class:`ClientClosedError` saying so; a
      ``close()`` from another loop once the first one is closed just marks the client
      closed (what it held went with that loop).

    Subclasses call :meth:`_init_lifecycle` and implement :meth:`_start` and :meth:`_teardown`;
    every background task goes through :attr:`_supervisor`.
    """

    _kind = "client"
    _supervisor: Supervisor
    _pool: ConnectionPool | None

    def _init_lifecycle(self, task_prefix: str) -> None:
        self._supervisor = Supervisor(task_prefix, on_crash=self._on_crash)
        self._pool = None
        self._pool_released = False
        self._start_task: asyncio.Task[None] | None = None
        self._close_task: asyncio.Future[None] | None = None
        self._started = False
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop of the first start()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (or a failed :meth:`start` closed the client)."""
        return self._close_task is not None

    def _lifecycle_state(self) -> str:
        if self._close_task is not None:
            return "closed" if self._close_task.done() else "closing"
        return "running" if self._started else "starting" if self._start_task else "new"

    def _check_running(self) -> None:
        """Raise :class:`ClientClosedError` unless the client is started and usable from the
        running event loop."""
        if self._close_task is not None:
            raise ClientClosedError(f"this {self._kind} is closed")
        self._supervisor.raise_if_crashed()
        if not self._started:
            raise ClientClosedError(
                f"this {self._kind} is not started: call start() or use `async with`"
            )
        if self._loop is not asyncio.get_running_loop():
            raise self._other_loop()

    def _raise_if_other_loop(self, exc: BaseException) -> None:
        """Raise :meth:`_other_loop`'s error from ``exc`` when ``exc`` is the ``RuntimeError``
        a call from another event loop meets ("Event loop is closed", a future of another
        loop): only failing paths ask, so a call that succeeds pays nothing for it."""
        if isinstance(exc, RuntimeError) and self._loop is not asyncio.get_running_loop():
            raise self._other_loop() from exc

    def _other_loop(self) -> ClientClosedError:
        """The error of a call from an event loop other than the one that started the client."""
        gone = self._loop is not None and self._loop.is_closed()
        return ClientClosedError(
            f"this {self._kind} was started in another event loop"
            f"{' (closed since)' if gone else ''}: a client serves the loop that started it; "
            "create one per event loop (e.g. per asyncio.run)"
        )

    def _on_crash(self, name: str, exc: BaseException) -> None:
        """An essential background task crashed (already logged); subclasses wake waiters."""

    async def _start(self) -> None:
        """Open the pool (set :attr:`_pool` at once), register, spawn workers (subclasses)."""
        raise NotImplementedError

    async def _teardown(self) -> None:
        """The graceful part of closing: drain, release server-side state (subclasses).

        Cancelling the background tasks and closing the pool happen after it in any case.
        """

    async def start(self) -> None:
        """Start the client; see the class docstring for failure and cancellation.

        Raises:
            ClientClosedError: the client is closed, or was closed while starting.
            TubeMQError: the start failed (the client is closed).
        """
        if self._close_task is not None:
            raise ClientClosedError(f"this {self._kind} is closed")
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif self._loop is not loop:
            raise self._other_loop()
        if self._started:
            return
        task = self._start_task
        if task is None:
            task = asyncio.get_running_loop().create_task(
                self._start(), name=f"{self._supervisor.owner}-start"
            )
            self._start_task = task
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            await self._close_quietly()
            if current is not None and current.cancelling():
                raise
            raise ClientClosedError(f"this {self._kind} was closed while starting") from None
        except BaseException:
            await self._close_quietly()
            raise
        self._started = True
        self._on_started()

    def _on_started(self) -> None:
        """Called once the client is running (calls are accepted); subclasses start the
        background work that drives public calls here, not in :meth:`_start`."""

    async def _close_quietly(self) -> None:
        # A cancelled wait leaves the teardown running; the caller re-raises its own error.
        with contextlib.suppress(asyncio.CancelledError):
            await self.close()

    async def close(self) -> None:
        """Stop every background task, release server-side state and connections. Idempotent;
        a cancelled ``close()`` leaves the teardown running, and a second one waits for it.
        Called from the client's own work (a consumer's ``on_assigned`` / ``on_revoked``
        callback), it starts the teardown and returns at once: the teardown waits for that
        callback to return (it cannot wait for the teardown that waits for it).

        From an event loop other than the one that started the client: once that loop is
        closed, only marks the client closed (what it held went with that loop).

        Raises:
            ClientClosedError: called from another event loop while the one that started the
                client still runs (close it there).
        """
        loop = asyncio.get_running_loop()
        if self._loop is not None and self._loop is not loop:
            if not self._loop.is_closed():
                raise self._other_loop()  # its tasks and connections live there: close it there
            if self._close_task is None or self._close_task.get_loop() is not loop:
                done = self._close_task = loop.create_future()
                done.set_result(None)
            return
        task = self._close_task
        if task is None or task.cancelled():
            task = loop.create_task(self._close(), name=f"{self._supervisor.owner}-close")
            self._close_task = task
        current = asyncio.current_task()
        if current is task or current in self._supervisor.tasks:
            # Called by the teardown itself (a consumer's on_revoked at close) or by one of the
            # client's own tasks (a callback in the rebalance worker): the close waits for, or
            # ends, that task, so waiting here would wait for itself.
            return
        await asyncio.shield(task)

    async def _close(self) -> None:
        start = self._start_task
        try:
            if start is not None and not start.done():
                start.cancel()
                await asyncio.wait([start])
            if self._start_task is not None:
                await self._teardown()
        except Exception:
            log.exception("%s: closing failed; releasing what is left", self._supervisor.owner)
        finally:
            # Mandatory, also when this task is cancelled: nothing of the client may outlive it.
            tasks = self._supervisor.cancel()
            pool = self._pool
            try:
                if tasks:
                    await asyncio.wait(tasks)
            finally:
                if pool is not None:
                    if not self._pool_released:
                        # Exactly one reference per client, even when a teardown is re-run.
                        self._pool_released = True
                        await pool.close()
                    elif pool.closed:
                        await pool.close()  # finishes an interrupted close (else a no-op)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
