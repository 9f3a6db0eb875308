"""``async with`` for the testing tools that have ``start()`` and ``stop()``."""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Self

__all__ = ["AsyncService"]


class AsyncService:
    """A local service used as ``async with``: started on entry, stopped on exit.

    A start that fails (or is cancelled) stops what it had started before the error propagates,
    so a half-started service leaves no process, port or task behind.
    """

    #: The event loop and lock of :meth:`_lifecycle_lock` (made on first use, per loop).
    _lifecycle: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    def _lifecycle_lock(self) -> asyncio.Lock:
        """The lock a subclass holds around its start and its stop, so that they run one at a
        time: a stop called while a start awaits (or two starts at once) would otherwise find
        nothing to stop yet, and the start would leave its sockets open behind it. One lock per
        event loop (an ``asyncio.Lock`` belongs to the loop it first waited on)."""
        loop = asyncio.get_running_loop()
        if self._lifecycle is None or self._lifecycle[0] is not loop:
            self._lifecycle = (loop, asyncio.Lock())
        return self._lifecycle[1]

    async def start(self) -> None:
        """Start the service."""
        raise NotImplementedError

    async def stop(self) -> None:
        """Stop the service; safe after a failed or partial start, and when called twice."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        """Start the service (stopping it again if the start fails)."""
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop the service."""
        await self.stop()
