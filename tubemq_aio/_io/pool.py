"""Connection pool keyed by (host, port, tls): shared per event loop, or private per client.

TubeMQ's Java client offers both: ``TubeSingleSessionFactory`` shares one connection per address
across every client of the process (reference-counted), ``TubeMultiSessionFactory`` gives each its
own (docs/protocol/wire.md §7.1). :meth:`ConnectionPool.shared` and the constructor mirror that.
Only clients with identical transport settings share (same TLS context object, host name rule,
timeouts and limits): a client never gets another one's TLS trust or limits. The registry of
shared pools holds them weakly, so a pool (and the event loop it references) lives only as long
as a client holds it: nothing survives a closed loop whose clients are gone.

Every task of the pool (a connect attempt per address, the
:class:`~tubemq_aio._io.sweeper.DeadlineSweeper`'s sweep, the idle reaper) belongs to the pool's
own :class:`~tubemq_aio._supervisor.Supervisor`: a pool may be shared by several clients, so no
client's supervisor can own them. The clients own the pool (each holds a reference and releases
it in the mandatory part of its close), and the last :meth:`ConnectionPool.close` cancels and
awaits every task. A crash of the sweeper or the reaper breaks the pool: it is logged, every
connection is aborted (pending calls fail) and every later connection request raises
:class:`~tubemq_aio.errors.ClientClosedError` caused by it. What to reap and when to retry a
failed address are pure decisions (:mod:`tubemq_aio._io.decisions`); this module only applies
them.
"""

from __future__ import annotations

import asyncio
import random
import weakref
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

from tubemq_aio._io.connection import Connection
from tubemq_aio._io.decisions import (
    BackoffPolicy,
    BackoffState,
    IdleView,
    after_link_closed,
    idle_connections,
    record_failure,
    seconds_until_allowed,
)
from tubemq_aio._io.settings import TransportSettings
from tubemq_aio._io.stats import TransportStats
from tubemq_aio._io.sweeper import DeadlineSweeper, cancel_and_wait
from tubemq_aio._supervisor import Supervisor
from tubemq_aio.checks import Checks
from tubemq_aio.errors import ClientClosedError, ConfigError, ConnectError, WriteTimeoutError

__all__ = ["Address", "ConnectionPool"]

#: (id of the event loop, the transport settings): the key of a shared pool.
_SharedKey = tuple[int, TransportSettings]


class Address(NamedTuple):
    """Where a connection goes: the pool key.

    Attributes:
        host: host name or IP address.
        port: TCP port.
        tls: whether to speak TLS (TubeMQ serves TLS on separate ports, §7.3).
    """

    host: str
    port: int
    tls: bool = False

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 literal
        return f"{host}:{self.port}{'/tls' if self.tls else ''}"


class ConnectionPool:
    """At most one connection per :class:`Address`, opened on demand and reaped when idle.

    Args:
        settings: transport settings (defaults when None).
        stats: counters to update (a new object when None).
        rand: source of uniform [0, 1) numbers for the backoff jitter (tests pass a constant).
    """

    #: Shared pools by (id of their loop, settings). Weak values: the clients own the pools, and
    #: a live pool keeps its loop alive, so the loop id of a live entry cannot be reused.
    _shared: ClassVar[weakref.WeakValueDictionary[_SharedKey, ConnectionPool]] = (
        weakref.WeakValueDictionary()
    )

    def __init__(
        self,
        settings: TransportSettings | None = None,
        *,
        stats: TransportStats | None = None,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.settings = settings if settings is not None else TransportSettings()
        self.stats = stats if stats is not None else TransportStats()
        s = self.settings
        self._policy = BackoffPolicy(
            s.backoff_initial, s.backoff_max, s.backoff_multiplier, s.backoff_jitter
        )
        self._rand = rand
        self._conns: dict[Address, Connection] = {}
        self._connecting: dict[Address, asyncio.Task[Connection]] = {}
        self._backoff: dict[Address, BackoffState] = {}
        self._last_error: dict[Address, str] = {}
        self._seen: set[Address] = set()
        self._supervisor = Supervisor(f"tubemq-pool-{id(self):x}", on_crash=self._on_crash)
        self._sweeper = DeadlineSweeper(s.sweep_interval, self._supervisor)
        self._reaper: asyncio.Task[None] | None = None
        self._closed = False
        self._finished = False  # close() ran to its end
        self._refs = 1
        self._shared_loop: asyncio.AbstractEventLoop | None = None
        self._shared_key: _SharedKey | None = None

    @classmethod
    def shared(cls, settings: TransportSettings | None = None) -> ConnectionPool:
        """Return the running loop's shared pool for these settings, creating it on first use.

        Clients share a pool only when their settings are equal (the same ``ssl_context`` object,
        host name rule, timeouts and limits); others get a shared pool of their own. Each call
        adds a reference; call :meth:`close` once per call.
        """
        settings = settings if settings is not None else TransportSettings()
        loop = asyncio.get_running_loop()
        key = (id(loop), settings)
        pool = cls._shared.get(key)
        if pool is None or pool._closed or pool._shared_loop is not loop:
            pool = cls(settings)
            pool._shared_loop = loop
            pool._shared_key = key
            cls._shared[key] = pool
        else:
            pool._refs += 1
        return pool

    # ---- state -------------------------------------------------------------------------------

    @property
    def is_shared(self) -> bool:
        """Whether this is a loop-wide shared pool."""
        return self._shared_loop is not None

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has released the last reference."""
        return self._closed

    @property
    def connections(self) -> dict[Address, Connection]:
        """A snapshot of the open connections."""
        return dict(self._conns)

    @property
    def background_tasks(self) -> list[asyncio.Task[Any]]:
        """The tasks of this pool still running: connects, sweeper, reaper (for tests and
        diagnostics)."""
        return self._supervisor.tasks

    @property
    def supervisor(self) -> Supervisor:
        """The owner of the pool's tasks (its :attr:`~Supervisor.crash` breaks the pool)."""
        return self._supervisor

    def __repr__(self) -> str:
        kind = f"shared refs={self._refs}" if self.is_shared else "private"
        conns = ", ".join(repr(c) for c in self._conns.values())
        return (
            f"<ConnectionPool {kind} connections=[{conns}] connecting={len(self._connecting)} "
            f"closed={self._closed}>"
        )

    # ---- connections -------------------------------------------------------------------------

    def ready(self, address: Address) -> Connection | None:
        """Return the open connection to ``address`` if there is one (no I/O, no await)."""
        conn = self._conns.get(address)
        return conn if conn is not None and not conn.is_closed else None

    def retry_in(self, address: Address) -> float:
        """Seconds before a connect to ``address`` is allowed again (0.0: now; no I/O)."""
        if self.ready(address) is not None or address in self._connecting:
            return 0.0
        return seconds_until_allowed(self._backoff.get(address), self._loop_time())

    async def connection(self, address: Address, timeout: float | None = None) -> Connection:
        """Return a ready connection to ``address``, connecting if needed.

        Concurrent callers for one address share a single connect attempt. After failed attempts
        no new one is made before the backoff delay has passed.

        Args:
            address: where to connect.
            timeout: seconds this caller waits for the connect at most (``None``: until the
                connect ends, ``connect_timeout`` at most); the connect goes on for the others
                when it gives up.

        Raises:
            ConnectError: the connect failed, timed out, or the address is in backoff (the
                message says when the next attempt is allowed).
            WriteTimeoutError: the connect did not end within ``timeout`` (it goes on).
            ClientClosedError: the pool is closed.
            ConfigError: a TLS address but no ``ssl_context`` in the settings.
        """
        conn = self._conns.get(address)
        if conn is not None and not conn.is_closed:
            return conn
        if self._closed:
            raise ClientClosedError("the connection pool is closed")
        self._supervisor.raise_if_crashed()
        task = self._connecting.get(address)
        if task is None:
            loop = asyncio.get_running_loop()
            state = self._backoff.get(address)
            wait = seconds_until_allowed(state, loop.time())
            if wait > 0 and state is not None:
                raise ConnectError(
                    f"{address}: {state.failures} connect attempt(s) failed "
                    f"(last: {self._last_error.get(address, '?')}); next attempt allowed in "
                    f"{wait:.3f} s"
                )
            # Not essential: a failed connect is the waiters' outcome, not a crash of the pool.
            task = self._supervisor.spawn(
                self._connect(address),
                f"connect-{address}",
                essential=False,
                expected=(ConnectError, ConfigError, ClientClosedError),
            )
            self._connecting[address] = task
        try:
            if timeout is None:
                return await asyncio.shield(task)
            return await _connected_within(task, address, timeout)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if self._closed and task.cancelled() and not (current and current.cancelling()):
                raise ClientClosedError("the connection pool was closed while connecting") from None
            raise

    async def _connect(self, address: Address) -> Connection:
        settings = self.settings
        loop = asyncio.get_running_loop()
        ssl_context = None
        server_hostname = None
        if address.tls:
            if settings.ssl_context is None:
                Checks("ConnectionPool").fail(
                    f"{address} needs TLS but settings.ssl_context is None"
                )
            ssl_context = settings.ssl_context
            # Verify each peer against the host we dial (the Java client checks no host name at
            # all, §7.3: not a standard to copy); a context with check_hostname off opts out.
            server_hostname = settings.tls_server_hostname or address.host
        conn = Connection(
            str(address),
            settings,
            self.stats,
            on_close=lambda c: self._forget(address, c),
        )
        try:
            async with asyncio.timeout(settings.connect_timeout):
                await loop.create_connection(
                    lambda: conn,
                    address.host,
                    address.port,
                    ssl=ssl_context,
                    server_hostname=server_hostname,
                )
        except (OSError, TimeoutError) as exc:
            text = str(exc) or f"timed out after {settings.connect_timeout:g} s"
            self._backoff[address] = record_failure(
                self._backoff.get(address), loop.time(), self._policy, self._rand()
            )
            self._last_error[address] = text
            self.stats.connect_failures += 1
            raise ConnectError(f"cannot connect to {address}: {text}") from exc
        finally:
            self._connecting.pop(address, None)
        if self._closed or self._supervisor.crash is not None:
            await conn.close()  # a broken pool (no sweeper) hands out no new connection
            self._supervisor.raise_if_crashed()
            raise ClientClosedError("the connection pool was closed while connecting")
        if conn.is_closed:  # dropped by the peer before create_connection returned
            raise ConnectError(f"cannot connect to {address}: the peer closed the connection")
        if address in self._seen:
            self.stats.reconnects += 1
        self._seen.add(address)
        # The backoff state is cleared by the first answer on this link, not by the connect:
        # a peer that accepts and drops at once must keep backing off (after_link_closed).
        self._conns[address] = conn
        self._sweeper.add(conn)
        if self._reaper is None:
            self._reaper = self._supervisor.spawn(self._reap_loop(), "reaper")
        return conn

    def _forget(self, address: Address, conn: Connection) -> None:
        if self._conns.get(address) is conn:
            del self._conns[address]
        self._sweeper.discard(conn)
        before = self._backoff.get(address)
        after = after_link_closed(
            before,
            answered=conn.answered,
            closed_locally=conn.closed_locally,
            now=self._loop_time(),
            policy=self._policy,
            rand=self._rand(),
        )
        if after is None:
            self._backoff.pop(address, None)
            self._last_error.pop(address, None)
        elif after is not before:
            self._backoff[address] = after
            self._last_error[address] = "the connection was closed before any answer"
            self.stats.connect_failures += 1

    @staticmethod
    def _loop_time() -> float:
        try:
            return asyncio.get_running_loop().time()
        except RuntimeError:  # closed after its loop stopped: nothing will use the state
            return 0.0

    # ---- idle reaping ------------------------------------------------------------------------

    async def reap(self, now: float) -> list[Address]:
        """Close the connections that have been idle for ``idle_timeout`` at loop time ``now``.

        Returns:
            The addresses whose connection was closed.
        """
        # Callers waiting for room count as busy: their own deadlines end their wait.
        views = [
            IdleView(a, c.last_activity, c.in_flight + c.waiting) for a, c in self._conns.items()
        ]
        idle = idle_connections(views, now, self.settings.idle_timeout)
        closing: list[Connection] = []
        reaped: list[Address] = []
        for key in idle:
            assert isinstance(key, Address)
            conn = self._conns.pop(key, None)
            if conn is not None:
                # Closed now, not when the close task first runs: a client that remembers
                # this connection (RpcClient) must see it closed before sending on it again.
                conn.begin_close()
                self._sweeper.discard(conn)
                closing.append(conn)
                reaped.append(key)
        self.stats.connections_reaped += len(closing)
        if closing:
            await asyncio.gather(*(c.close() for c in closing))
        return reaped

    async def _reap_loop(self) -> None:
        loop = asyncio.get_running_loop()
        s = self.settings
        interval = min(max(s.idle_timeout / 4, s.sweep_interval), 30.0)
        while True:
            await asyncio.sleep(interval)
            await self.reap(loop.time())

    # ---- crashes and closing -----------------------------------------------------------------

    def _on_crash(self, name: str, exc: BaseException) -> None:
        # Without its sweeper no deadline expires: fail what is pending now rather than hang.
        # Later requests get ClientClosedError from connection() (raise_if_crashed).
        for conn in list(self._conns.values()):
            conn.abort()

    async def close(self) -> None:
        """Release this reference; the last one closes every connection and background task.

        Pending calls fail with :class:`~tubemq_aio.errors.ClientClosedError`. Resumable: when
        the last close is cancelled half-way, every task and connection has been told to stop
        already, and calling :meth:`close` again finishes the job.
        """
        if not self._closed:
            if self._shared_key is not None:
                self._refs -= 1
                if self._refs > 0:
                    return
                if self._shared.get(self._shared_key) is self:
                    del self._shared[self._shared_key]
            self._closed = True
        elif self._finished:
            return
        tasks = self._supervisor.cancel()  # connects, sweeper, reaper; no new one starts
        conns = list(self._conns.values())
        try:
            await cancel_and_wait(tasks)
        finally:
            self._reaper = None
            self._sweeper.clear()
            # Connections go even when this close is cancelled: abort what a graceful
            # close cannot finish (close() after abort() only waits for the loss report).
            try:
                if conns:
                    await asyncio.gather(*(c.close() for c in conns))
            except BaseException:
                for conn in conns:
                    conn.abort()
                raise
            self._conns.clear()
            self._finished = True


async def _connected_within(
    task: asyncio.Task[Connection], address: Address, timeout: float
) -> Connection:
    """Await the shared connect ``task`` for ``timeout`` seconds at most (it goes on after).

    Raises:
        ConnectError: it failed.
        WriteTimeoutError: it had not ended within ``timeout`` (nothing was sent; not a connect
            failure: the attempt goes on, and its own end says how it went).
    """
    scope = asyncio.timeout(timeout)
    try:
        async with scope:
            return await asyncio.shield(task)
    except TimeoutError:
        if not scope.expired():
            raise
        raise WriteTimeoutError(
            f"no connection to {address} within the call's {timeout:g} s (the connect attempt "
            f"goes on); the request was not sent"
        ) from None
