"""``async with`` for the testing tools that have ``start()`` and ``stop()``."""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Self

__all__ = ["AsyncService", "check_serving_loop", "loop_ended"]


def loop_ended(own: asyncio.AbstractEventLoop | None, what: str) -> bool:
    """Whether a service started on ``own`` must start afresh on the running loop: True when
    ``own`` has ended (``asyncio.run`` returned: its sockets served nobody since), False when it
    is the running loop or None.

    Raises:
        RuntimeError: ``own`` is another loop that still exists; ``what`` answers only while
            that loop runs.
    """
    if own is None or own is asyncio.get_running_loop():
        return False
    if not own.is_closed():
        raise RuntimeError(
            f"{what} runs on another event loop, and answers only while that loop runs: stop "
            f"it there, or start one {what} per event loop"
        )
    return True


def check_serving_loop(own: asyncio.AbstractEventLoop | None, what: str) -> None:
    """Refuse to hand out an address nobody answers at: a service serves on the loop it was
    started on (``own``), so a client on another loop while ``own`` does not run (a
    session-scoped pytest fixture's service used by a test on a loop of its own) connected and
    then waited for answers that never came.

    Raises:
        RuntimeError: called from a running loop while ``own`` is set and does not run.
    """
    if own is None or own.is_running():
        return
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # plain code outside any loop: an address to print or pass on
        return
    raise RuntimeError(
        f"{what} was started on another event loop, which is not running now, so it answers "
        "nothing: run the test on the loop of its fixture (pytest-asyncio: loop_scope, see "
        "docs/testing.md), or start one on this loop"
    )


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
