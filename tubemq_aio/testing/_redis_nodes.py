"""What the replicated Redis test tools share: a parent directory, readiness polls, log tails.

:class:`RedisNodeSet` is the base of :class:`~tubemq_aio.testing.RedisSentinelSet` and
:class:`~tubemq_aio.testing.RedisClusterSet`: every process of a set lives in one temporary
directory, removed on a clean stop and kept (its path logged) when the ``async with`` body
failed, so the servers' logs can be read after a failing test.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import TracebackType

from tubemq_aio.testing._process import tail
from tubemq_aio.testing._resp import Reply, RespError, command
from tubemq_aio.testing._service import AsyncService
from tubemq_aio.testing.polling import check_seconds
from tubemq_aio.testing.redis import RedisServerError, require_binary, working_dir

__all__ = ["RedisNodeSet", "info_fields", "query"]

log = logging.getLogger("tubemq_aio.testing")


async def query(
    port: int,
    *args: str,
    timeout: float = 2.0,
    password: str | None = None,
    tls: ssl.SSLContext | None = None,
) -> Reply | None:
    """One command's reply (after ``AUTH password`` if given), or None when the server is down,
    refuses or does not answer."""
    try:
        return await command(port, *args, timeout=timeout, password=password, tls=tls)
    except (OSError, TimeoutError, ConnectionError, RespError):
        return None


def info_fields(text: Reply | None) -> dict[str, str]:
    """The ``name:value`` lines of an ``INFO`` (or ``CLUSTER INFO``) reply."""
    if not isinstance(text, str):
        return {}
    out: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep:
            out[name.strip()] = value.strip()
    return out


class RedisNodeSet(AsyncService):
    """Several Redis processes under one directory (a base class; see the module docstring).

    Args:
        binary: the ``redis-server`` program.
        start_timeout: seconds the whole set may take to become ready.
        data_dir: the parent directory (a temporary one if None; never removed if given).

    Attributes:
        kept_dir: the temporary directory kept because the ``async with`` body failed.
    """

    def __init__(self, *, binary: str, start_timeout: float, data_dir: Path | None) -> None:
        """Store the settings; nothing is started yet."""
        check_seconds(type(self).__name__, "start_timeout", start_timeout)
        self.binary = binary
        self.start_timeout = start_timeout
        self._given_dir = data_dir
        self._dir: Path | None = None
        self._keep = False
        self.kept_dir: Path | None = None

    @property
    def data_dir(self) -> Path:
        """The parent directory of every node's files and logs."""
        if self._dir is None:
            raise RedisServerError("the Redis set was never started")
        return self._dir

    def _prepare(self) -> Path:
        require_binary(self.binary)
        if self._dir is None:
            self._dir = working_dir(self._given_dir, "tubemq-aio-redisset-")
        return self._dir

    async def _poll(
        self, what: str, check: Callable[[], Awaitable[bool]], timeout: float, log_file: Path
    ) -> None:
        """Poll ``check`` every 50 ms until it is true or ``timeout`` seconds passed (a check
        still running then is cut short).

        Raises:
            RedisServerError: ``what`` did not happen in time (with ``log_file``'s tail).
            ConfigError: ``timeout`` is not a finite number of seconds > 0.
        """
        check_seconds(what, "timeout", timeout)
        try:
            async with asyncio.timeout(timeout) as budget:
                while True:
                    if await check():
                        return
                    await asyncio.sleep(0.05)
        except TimeoutError:
            if not budget.expired():
                raise
            raise RedisServerError(
                f"{what} did not happen within {timeout:g} s", log_file, tail(log_file, 30)
            ) from None

    def _remove_dir(self) -> None:
        if self._dir is None:
            return
        if self._keep or self._given_dir is not None:
            if self._keep:
                self.kept_dir = self._dir
                log.warning("Redis set failed; its logs are kept in %s", self._dir)
        else:
            shutil.rmtree(self._dir, ignore_errors=True)
        self._dir = None

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop every process; keep the directory when the body raised."""
        self._keep = exc is not None and not isinstance(exc, asyncio.CancelledError)
        await self.stop()
