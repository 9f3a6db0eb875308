"""The producer's send window: ``limit`` slots for sends in flight, handed out in arrival order.

The shape of a capacity limiter (anyio's ``CapacityLimiter``): a caller takes a slot at once when
one is free and nobody is queued (:meth:`WindowSlots.try_acquire`, no await: the hot path), or
queues for one (:meth:`SendWindow.acquire`); :meth:`WindowSlots.release` hands the slot straight
to the first live waiter, so a newcomer never overtakes a queued caller.

The two calls of every send (``try_acquire``, ``release``) and the state they touch are
:class:`WindowSlots`, the pure reference of a compiled twin of the same name in the accelerator
(``_speedups/_window.pxi``; compared in ``tests/unit/test_speedups_registry.py``);
:class:`SendWindow` is built on whichever is in use and adds the waits.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import TYPE_CHECKING

from tubemq_aio.accelerator import twin_or

__all__ = ["SendWindow", "WindowSlots"]


class WindowSlots:
    """The slot count of a :class:`SendWindow` and its two non-waiting calls (pure reference).

    The fields are set by :class:`SendWindow`, never here, so the compiled twin and this class
    have the same layout to fill.
    """

    __slots__ = ("_drained", "_waiters", "borrowed", "limit")

    #: The number of slots.
    limit: int
    #: Slots taken right now.
    borrowed: int
    _waiters: deque[asyncio.Future[None]]
    _drained: asyncio.Future[None] | None

    def try_acquire(self) -> bool:
        """Take a slot now if one is free and nobody is queued; whether it was taken."""
        if self.borrowed < self.limit and not self._waiters:
            self.borrowed += 1
            return True
        return False

    def release(self) -> None:
        """Give a slot back: to the first live waiter, if any."""
        self.borrowed -= 1
        if self._waiters:
            self._wake_one()
        elif not self.borrowed and self._drained is not None:
            if not self._drained.done():
                self._drained.set_result(None)
            self._drained = None

    def _wake_one(self) -> None:
        while self._waiters and self.borrowed < self.limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.borrowed += 1
                waiter.set_result(None)
                return


if TYPE_CHECKING:
    _WindowBase = WindowSlots
else:
    _WindowBase = twin_or(WindowSlots)


class SendWindow(_WindowBase):
    """Slots for sends in flight, first come first served.

    Args:
        limit: the number of slots (validated by the producer's config).
    """

    __slots__ = ()

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.borrowed = 0
        self._waiters = deque()
        self._drained = None

    def __repr__(self) -> str:
        return f"<SendWindow {self.borrowed}/{self.limit} waiting={len(self._waiters)}>"

    @property
    def waiting(self) -> int:
        """Callers queued for a slot."""
        return len(self._waiters)

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

    async def drained(self) -> None:
        """Wait until no slot is taken (returns at once when none is)."""
        if not self.borrowed:
            return
        if self._drained is None:
            self._drained = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._drained)
