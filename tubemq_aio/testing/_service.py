"""``async with`` for the testing tools that have ``start()`` and ``stop()``."""

from __future__ import annotations

from types import TracebackType
from typing import Self

__all__ = ["AsyncService"]


class AsyncService:
    """A local service used as ``async with``: started on entry, stopped on exit.

    A start that fails (or is cancelled) stops what it had started before the error propagates,
    so a half-started service leaves no process, port or task behind.
    """

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
