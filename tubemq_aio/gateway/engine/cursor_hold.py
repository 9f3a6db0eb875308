"""Pieces of one fetch attempt: what it cost, and a broadcast read's hold on the cursor mutex."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Awaitable
from typing import TypeVar

from tubemq_aio.gateway.errors import GatewayError
from tubemq_aio.gateway.leases.lease_store import LeaseStore
from tubemq_aio.gateway.tubemq.broker_call import BrokerCall
from tubemq_aio.supervisor import Supervisor

__all__ = ["AttemptCost", "CursorHold"]

_T = TypeVar("_T")


@dataclasses.dataclass(slots=True)
class AttemptCost:
    """Broker RPCs and Redis round trips of one fetch attempt (fetches run concurrently).

    Attributes:
        on_redis: the attempt is waiting on a Redis round trip (see :meth:`redis`).
        broker: the attempt's broker calls, and whether a request of them may still reach the
            broker (then its lease is left to lapse, not released).
    """

    rpcs: int = 0
    trips: int = 0
    on_redis: bool = False
    broker: BrokerCall = dataclasses.field(default_factory=BrokerCall)

    async def redis(self, call: Awaitable[_T]) -> _T:
        """Await one Redis round trip of the attempt and count it.

        :attr:`on_redis` is set while it runs and stays set when it is cancelled, so a read
        whose time budget ran out can tell a stalled Redis (a failover, an outage) from a slow
        broker and report it as what it is.
        """
        self.trips += 1
        self.on_redis = True
        try:
            result = await call
        except Exception:
            self.on_redis = False
            raise
        self.on_redis = False
        return result


class CursorHold:
    """Broadcast: the group's cursor mutex of one partition, held for one read.

    A renewal task keeps it alive every third of its life while the read runs; when a renewal
    fails (the mutex lapsed or Redis did not answer) the read's time budget ends at once, so a
    reader that may have lost the mutex stops moving the broker cursor. The booking is fenced
    too: ``record`` books only while this token still holds the mutex.

    The renewal also stops on its own once :meth:`end` was called, not only when cancelled: on
    Python 3.11 ``asyncio.wait_for`` (which the Redis client uses) swallows a cancel that meets
    an inner call completing in the same loop turn, and a renewal that missed its cancel would
    otherwise keep the mutex alive for ever, stalling every other reader of the partition.
    """

    def __init__(
        self,
        store: LeaseStore,
        fence: tuple[str, str],
        budget: asyncio.Timeout,
        cost: AttemptCost,
        tasks: Supervisor,
        lock_ms: int,
    ) -> None:
        self.store = store
        self.fence = fence
        self.lapsed = False
        self._budget = budget
        self._cost = cost
        self._lock_ms = lock_ms
        self._ended = False
        self._renewal: asyncio.Task[None] | None = tasks.spawn(
            self._renew(), "cursor-renewal", essential=False
        )

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self._lock_ms / 3000)
            if self._ended:  # a cancel from end() was lost on the way (see the class doc)
                return
            self._cost.trips += 1
            # Answered by five sixths of the mutex's life (sent at a third, given half of it),
            # so before it could lapse, or treated as lapsed. Half rather than a third: a loaded
            # replica's late answer otherwise cut reads short again and again.
            try:
                async with asyncio.timeout(self._lock_ms / 2000):
                    kept = await self.store.renew_lock(*self.fence, self._lock_ms)
            except (GatewayError, TimeoutError):
                kept = False
            if self._ended:
                return
            if not kept:
                self.lapsed = True
                with contextlib.suppress(RuntimeError):  # the read may have ended meanwhile
                    self._budget.reschedule(asyncio.get_running_loop().time())
                return

    async def end(self, *, unlock: bool = True) -> None:
        """Stop renewing and drop the mutex (idempotent). The unlock runs even when the caller
        is cancelled while the renewal stops: skipped, it would leave the mutex held until it
        lapses, stalling every other reader of the partition. The wait for the renewal to stop
        is bounded by the mutex's life: one that missed its cancel stops at its next turn.

        Args:
            unlock: False when Redis is not answering: the mutex is left to lapse rather than
                the caller kept waiting on an unlock that cannot arrive.
        """
        if self._ended:
            return
        self._ended = True
        renewal, self._renewal = self._renewal, None
        try:
            if renewal is not None:
                renewal.cancel()
                # its own cancel is not raised here
                await asyncio.wait({renewal}, timeout=self._lock_ms / 1000)
        finally:
            if unlock:
                with contextlib.suppress(Exception):
                    self._cost.trips += 1
                    await asyncio.shield(self.store.unlock(*self.fence))
