"""What every TubeMQ client object shares: its connection pool, local address and lifecycle."""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import time
from collections.abc import Awaitable
from types import TracebackType
from typing import Self

from tubemq_aio._io.pool import ConnectionPool
from tubemq_aio._io.settings import TransportSettings
from tubemq_aio.config import ClientConfig

__all__ = [
    "AsyncLifecycle",
    "auth_stamp",
    "local_ip_towards",
    "open_pool",
    "spawn_owned",
    "wall_ms",
]

log = logging.getLogger("tubemq_aio")


def open_pool(config: ClientConfig) -> ConnectionPool:
    """The connection pool a client uses: the loop-wide shared one when ``connection_reuse`` is
    on (each call adds a reference; close it once), else a private pool."""
    settings = TransportSettings(
        connect_timeout=config.connect_timeout,
        idle_timeout=config.idle_timeout,
        max_in_flight=config.max_in_flight,
        ssl_context=config.ssl_context,
        tls_server_hostname=config.tls_server_hostname,
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


def wall_ms() -> int:
    """Wall-clock milliseconds since the epoch (what TubeMQ puts on the wire)."""
    return time.time_ns() // 1_000_000


def auth_stamp() -> tuple[int, int]:
    """``(timestamp_ms, nonce)`` for a fresh signed ``AuthenticateInfo`` (notes §6.2)."""
    return wall_ms(), random.getrandbits(31)


def spawn_owned(owner: list[asyncio.Task[None]], coro: Awaitable[None], name: str) -> None:
    """Start a named background task owned by a client (``owner`` is cancelled on close).

    A task that dies with an exception is logged, so a bug never ends a loop silently.
    """
    task = asyncio.ensure_future(coro)
    task.set_name(name)
    task.add_done_callback(_log_crash)
    owner.append(task)


def _log_crash(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.error("background task %s crashed", task.get_name(), exc_info=exc)


class AsyncLifecycle:
    """``async with client:`` calls ``start()`` on entry and ``close()`` on exit."""

    async def start(self) -> None:
        """Start the client (implemented by subclasses)."""
        raise NotImplementedError

    async def close(self) -> None:
        """Close the client (implemented by subclasses)."""
        raise NotImplementedError

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
