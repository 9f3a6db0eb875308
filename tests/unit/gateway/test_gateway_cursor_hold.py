"""A broadcast read's hold on the cursor mutex ends even when its renewal loses its cancel.

On Python 3.11 ``asyncio.wait_for`` (used inside the Redis client) swallows a cancel that meets
an inner call finishing in the same loop turn. A renewal that missed the cancel of
``CursorHold.end`` used to renew the mutex for ever while ``end`` waited for it: the fetch
never returned and every other reader of the partition got ``busy`` until the test timed out.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from tubemq_aio.gateway.engine.cursor_hold import AttemptCost, CursorHold
from tubemq_aio.supervisor import Supervisor
from tubemq_aio.testing import wait_until


class _CancelLosingStore:
    """A lease store whose renewal swallows a cancel, as ``wait_for`` does on 3.11."""

    def __init__(self) -> None:
        self.renewals = 0
        self.unlocks = 0
        self.inside = asyncio.Event()
        self.lost_cancels = 0

    async def renew_lock(self, key: str, token: str, px: int) -> bool:
        self.renewals += 1
        self.inside.set()
        try:
            await asyncio.sleep(px / 1000)
        except asyncio.CancelledError:
            if self.lost_cancels:  # only the first cancel is lost, so a close still works
                raise
            self.lost_cancels += 1  # the answer "arrived" in the same turn: cancel dropped
        return True

    async def unlock(self, key: str, token: str) -> None:
        self.unlocks += 1


async def test_end_returns_and_the_renewal_stops_when_its_cancel_is_lost() -> None:
    store = _CancelLosingStore()
    tasks = Supervisor("test-cursor-hold")
    try:
        async with asyncio.timeout(30) as budget:
            hold = CursorHold(
                cast(Any, store), ("lock-key", "token"), budget, AttemptCost(), tasks, 600
            )
            renewal = hold._renewal
            assert renewal is not None
            await asyncio.wait_for(store.inside.wait(), 10)  # the renewal is at Redis now
            await asyncio.wait_for(hold.end(), 10)  # used to wait for ever
            await wait_until(renewal.done, 10, "the renewal to stop")
        assert store.lost_cancels == 1
        assert store.unlocks == 1
        assert store.renewals == 1  # no renewal after end(): the mutex is left to the unlock
        assert not hold.lapsed
    finally:
        await tasks.close()
