"""The producer's send window: ``limit`` slots for sends in flight, handed out in arrival order.

The shape of a capacity limiter (anyio's ``CapacityLimiter``): a caller takes a slot at once when
one is free and nobody is queued (:meth:`SendWindow.try_acquire`, no await: the hot path), or
queues for one (:meth:`SendWindow.acquire`); :meth:`SendWindow.release` hands the slot straight to
the first live waiter, so a newcomer never overtakes a queued caller.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

__all__ = ["SendWindow"]


class SendWindow:
    """Slots for sends in flight, first come first served.

    Args:
        limit: the number of slots (validated by the producer's config).
    """

    __slots__ = ("_drained", "_waiters", "borrowed", "limit")

    def __init__(self, limit: int) -> None:
        #: The number of slots.
        self.limit = limit
        #: Slots taken right now.
        self.borrowed = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._drained: asyncio.Future[None] | None = None

    def __repr__(self) -> str:
        return f"<SendWindow {self.borrowed}/{self.limit} waiting={len(self._waiters)}>"

    @property
    def waiting(self) -> int:
        """Callers queued for a slot."""
        return len(self._waiters)

    def try_acquire(self) -> bool:
        """Take a slot now if one is free and nobody is queued; whether it was taken."""
        if self.borrowed < self.limit and not self._waiters:
            self.borrowed += 1
            return True
        return False

    async def acquire(self) -> None:
        """Take a slot, waiting in arrival order when none is free; return holding it.

        A caller cancelled after a slot was handed to it passes the slot on.
        """
        if self.borrowed < self.limit and not self._waiters:
            self.borrowed += 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed over, but this caller is leaving
            else:
                with contextlib.suppress(ValueError):  # already dropped by _wake_one
                    self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        """Give a slot back: to the first live waiter, if any."""
        self.borrowed -= 1
        if self._waiters:
            self._wake_one()
        elif not self.borrowed and self._drained is not None:
            if not self._drained.done():
                self._drained.set_result(None)
            self._drained = None

    async def drained(self) -> None:
        """Wait until no slot is taken (returns at once when none is)."""
        if not self.borrowed:
            return
        if self._drained is None:
            self._drained = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._drained)

    def _wake_one(self) -> None:
        while self._waiters and self.borrowed < self.limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.borrowed += 1
                waiter.set_result(None)
                return
