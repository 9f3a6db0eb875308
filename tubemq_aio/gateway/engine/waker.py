"""Long-poll wake-ups: one pub/sub listener task per replica, in-process events per scope.

Scripts publish ``<group>|<scope>`` on ``tgw:wake`` when a partition becomes ready (ack, nack,
release, reset, new partitions). Waiting fetches sleep on an :class:`asyncio.Event` of their
scope until then or until their own timer (the next eligible time or the poll deadline) fires,
so a lost message or a Redis outage only delays a long poll, never blocks it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from tubemq_aio.errors import ClientClosedError
from tubemq_aio.gateway.errors import TooManyWaitersError
from tubemq_aio.gateway.leases.cancel_guard import keeping_cancel
from tubemq_aio.gateway.leases.redis_client import RedisClient
from tubemq_aio.gateway.leases.redis_keys import WAKE_CHANNEL
from tubemq_aio.supervisor import Supervisor

__all__ = ["Waker"]

log = logging.getLogger("tubemq_aio.gateway")

_RESUBSCRIBE_WAIT = 1.0
#: Seconds one pub/sub read waits; bounds how long a stop takes.
_POLL = 1.0
#: Seconds a subscribe may take before the listener gives up and subscribes again.
_SUBSCRIBE_WAIT = 5.0


class Waker:
    """The replica's wake listener and its bounded set of waiters.

    Args:
        client: the Redis client (a pub/sub connection is taken from its pool; a cluster's
            messages reach every node, so any node's connection hears them).
        max_waiters: waiters allowed at once; more raise :class:`TooManyWaitersError`.
        tasks: the owner of the listener task (the engine's).
    """

    def __init__(self, client: RedisClient, *, max_waiters: int, tasks: Supervisor) -> None:
        self._client = client
        self._tasks = tasks
        self.max_waiters = max_waiters
        self.waiting = 0
        self.received = 0
        self._events: dict[str, asyncio.Event] = {}
        self._per_key: dict[str, int] = {}
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.draining = False

    async def start(self) -> None:
        """Start the listener task (under the owner given; ended by :meth:`close`; idempotent).

        Raises:
            ClientClosedError: :meth:`close` was called.
        """
        if self._stopping:
            raise ClientClosedError("the wake listener is closed")
        if self._task is None:
            self._task = self._tasks.spawn(self._listen(), "wake")

    async def close(self) -> None:
        """Stop the listener and wake every waiter."""
        task, self._task = self._task, None
        self._stopping = True
        if task is not None:
            task.cancel()
            # a cancel redis-py swallowed is raised again by keeping_cancel; the loop also
            # checks _stopping each poll period
            await asyncio.wait({task}, timeout=_POLL * 5)
            if not task.done():
                log.warning("wake listener did not stop in time")
        for event in self._events.values():
            event.set()
        self._events.clear()

    def drain(self) -> None:
        """The replica is shutting down: wake every waiter now and let no wait sleep from
        here on (long polls answer what they have instead of holding the shutdown)."""
        self.draining = True
        for event in self._events.values():
            event.set()

    def notify(self, key: str) -> None:
        """Wake the waiters of ``key`` (``<group>|<scope>``)."""
        event = self._events.pop(key, None)
        if event is not None:
            event.set()

    async def wait(self, key: str, timeout_ms: int) -> None:
        """Sleep until ``key`` is woken or ``timeout_ms`` passed.

        Raises:
            TooManyWaitersError: ``max_waiters`` already wait.
        """
        if self.draining:
            return
        if self.waiting >= self.max_waiters:
            raise TooManyWaitersError(f"{self.waiting} long polls already wait on this replica")
        event = self._events.setdefault(key, asyncio.Event())
        self.waiting += 1
        self._per_key[key] = self._per_key.get(key, 0) + 1
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0, timeout_ms) / 1000):
                    await event.wait()
        finally:
            self.waiting -= 1
            left = self._per_key.pop(key) - 1
            if left:
                self._per_key[key] = left
            else:  # nobody waits on the key any more (e.g. a broadcast client_id that never
                self._events.pop(key, None)  # comes back): leave nothing behind

    async def _listen(self) -> None:
        while not self._stopping:
            pubsub = self._client.pubsub(ignore_subscribe_messages=True)
            try:
                async with asyncio.timeout(_SUBSCRIBE_WAIT):
                    await keeping_cancel(pubsub.subscribe(WAKE_CHANNEL))
                while not self._stopping:
                    msg = await keeping_cancel(pubsub.get_message(timeout=_POLL))
                    if msg is None or msg.get("type") != "message":
                        continue
                    data = msg["data"]
                    self.received += 1
                    self.notify(data.decode() if isinstance(data, bytes) else str(data))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis down: retry; waiters still wake on their timers
                log.debug("wake listener: %r; resubscribing", exc)
                await asyncio.sleep(_RESUBSCRIBE_WAIT)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]
