"""One Redis round trip of the gateway's store: its timeout, its retries and the error mapping.

What a client sees of Redis trouble is decided here: an outage, a failover in progress or a
server not ready yet is :class:`StoreUnavailableError` (503 ``store_unavailable``,
retriable); anything else Redis refuses is a :class:`GatewayError` (a bug or a misconfigured
server). Every gateway call is idempotent, so a lost connection is retried once, which after
a Sentinel failover reaches the promoted primary; a server without the gateway's scripts (a
promoted replica or a new cluster node may lack a pipeline's scripts) gets them loaded again,
and the call is tried once more. Each cause has its own retry: after a Redis restart the
first attempt meets a dead pooled connection and the retry a server without the scripts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import redis.exceptions as rexc
from redis.commands.core import AsyncScript

from tubemq_aio.gateway.errors import GatewayError, StoreUnavailableError
from tubemq_aio.gateway.leases.cancel_guard import keeping_cancel
from tubemq_aio.gateway.leases.redis_client import RedisClient

__all__ = ["RoundTrips", "refusal_error"]

_T = TypeVar("_T")

#: Answers of a server that is there but cannot serve now: a cluster without an owner for the
#: slot or moving it (CLUSTERDOWN, MASTERDOWN, TRYAGAIN), a demoted primary (READONLY).
_NOT_NOW: tuple[type[BaseException], ...] = (
    rexc.ClusterError,
    rexc.TryAgainError,
    rexc.ReadOnlyError,
    rexc.SlotNotCoveredError,
)
#: A server that does not answer, or a connection redis-py closed under a running command
#: (an AttributeError from inside redis-py, see _closed_under_us).
_DOWN_OR_CLOSED: tuple[type[BaseException], ...] = (
    rexc.ConnectionError,
    rexc.TimeoutError,
    TimeoutError,
    OSError,
    AttributeError,
)


def refusal_error(exc: rexc.ResponseError) -> GatewayError:
    """What a Redis error answer means: not ready yet (``LOADING``: an AOF replay, ``BUSY``: a
    long script; 503) or a refused command (a bug or a misconfigured Redis)."""
    if str(exc).startswith(("LOADING", "BUSY")):
        return StoreUnavailableError(f"Redis not ready: {exc}")
    return GatewayError(f"Redis refused a gateway command: {exc}")


def _closed_under_us(exc: AttributeError) -> bool:
    """Whether redis-py met a connection it had closed itself mid-command (its cluster client
    closes a dead node's connections while a command on one is still running, which then
    fails on the missing writer): a lost connection, not a bug of ours."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and f"{os.sep}redis{os.sep}" in tb.tb_frame.f_code.co_filename


class RoundTrips:
    """Round trips on one Redis client (the base of the lease store).

    Args:
        client: a ``redis.asyncio.Redis`` or ``RedisCluster``.
        timeout: seconds for one attempt, the wait for room included.
        max_inflight: round trips in flight at most (None: the client's pool bounds them).

    Attributes:
        roundtrips: attempts made.
        failures: round trips that ended in :class:`StoreUnavailableError`.
    """

    def __init__(
        self, client: RedisClient, *, timeout: float, max_inflight: int | None = None
    ) -> None:
        self.client = client
        self.timeout = timeout
        self.roundtrips = 0
        self.failures = 0
        self._room = None if max_inflight is None else asyncio.Semaphore(max_inflight)

    def _all_scripts(self) -> Sequence[AsyncScript]:
        """The scripts to load again after ``NOSCRIPT`` (the store lists its own)."""
        return ()

    async def roundtrip(self, call: Callable[[], Awaitable[_T]]) -> _T:
        """Run one idempotent Redis call with this store's timeout, retries and error mapping.

        Raises:
            StoreUnavailableError: Redis is down, failing over or not ready.
            GatewayError: Redis refused the command.
            asyncio.CancelledError: the task was cancelled, also when redis-py swallowed it.
        """
        # One retry for a lost connection and one for missing scripts: a restarted Redis
        # gives both, one after the other (three round trips at most).
        lost = reloaded = False
        while True:
            self.roundtrips += 1
            try:
                async with asyncio.timeout(self.timeout):
                    # redis-py's command write awaits asyncio.wait_for, which on 3.11 can
                    # swallow a cancel (see keeping_cancel)
                    if self._room is None:
                        return await keeping_cancel(call())
                    async with self._room:
                        return await keeping_cancel(call())
            except _DOWN_OR_CLOSED as exc:
                if isinstance(exc, AttributeError) and not _closed_under_us(exc):
                    raise
                if lost:
                    self.failures += 1
                    raise StoreUnavailableError(f"Redis unavailable: {type(exc).__name__}") from exc
                lost = True
            except rexc.NoScriptError as exc:
                if reloaded:
                    raise GatewayError(f"Redis lost the gateway scripts: {exc}") from exc
                reloaded = True
                await self._load_scripts()
            except _NOT_NOW as exc:
                self.failures += 1
                raise StoreUnavailableError(f"Redis not ready: {type(exc).__name__}") from exc
            except rexc.ResponseError as exc:
                error = refusal_error(exc)
                self.failures += isinstance(error, StoreUnavailableError)
                raise error from exc

    async def _load_scripts(self) -> None:
        with contextlib.suppress(rexc.RedisError, OSError, TimeoutError):
            async with asyncio.timeout(self.timeout):
                for script in self._all_scripts():
                    await self.client.script_load(script.script)
