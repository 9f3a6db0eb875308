"""A counting bound with FIFO waiters (cheaper than ``asyncio.Semaphore`` on the fast path)."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

__all__ = ["Gate"]


class Gate:
    """Limits how many units of something are outstanding; takers wait for room.

    ``count`` and ``limit`` are public so the hot path can check ``count < limit`` and take a unit
    inline; the coroutine :meth:`acquire` is only needed when that check fails.

    Args:
        limit: the largest number of outstanding units.
    """

    __slots__ = ("count", "limit", "waiters")

    def __init__(self, limit: int) -> None:
        self.count = 0
        self.limit = limit
        self.waiters: deque[asyncio.Future[None]] = deque()

    def free(self) -> bool:
        """Whether a unit can be taken now without overtaking a waiter."""
        return self.count < self.limit and not self.waiters

    async def acquire(self, check: Callable[[], None]) -> None:
        """Take one unit, waiting in FIFO order while the gate is full.

        Args:
            check: called before each attempt; raises to abort the wait (e.g. connection closed).
        """
        check()
        if self.count < self.limit and not self.waiters:
            self.count += 1
            return
        loop = asyncio.get_running_loop()
        while True:
            waiter: asyncio.Future[None] = loop.create_future()
            self.waiters.append(waiter)
            try:
                await waiter
            except BaseException:
                # A waiter woken and cancelled in the same tick must pass its wake-up on.
                if waiter in self.waiters:
                    self.waiters.remove(waiter)
                elif waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                    self._wake_one()
                raise
            check()
            if self.count < self.limit:
                self.count += 1
                if self.count < self.limit:
                    self._wake_one()
                return

    def release(self, units: int = 1) -> None:
        """Give back ``units`` and wake a waiter if there is room."""
        self.count -= units
        if self.waiters:
            self._wake_one()

    def fail_waiters(self, make_exc: Callable[[], BaseException]) -> None:
        """Wake every waiter with an exception (the gate's owner closed)."""
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_exception(make_exc())

    def _wake_one(self) -> None:
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def __repr__(self) -> str:
        return f"Gate({self.count}/{self.limit}, waiting={len(self.waiters)})"
