"""Bookkeeping of one connection's calls: serials, pending map, deadlines, flow control.

:class:`PendingCalls` is the transport-free half of a connection (the other half,
:class:`~tubemq_aio._io.connection.Connection`, owns the transport and the wire). It holds the
``serialNo -> pending`` map, the in-flight bound and its waiters, the async/oneway gates, the
``pause_writing`` state, deadline expiry for the sweeper, and failing everything on close.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Callable

from tubemq_aio._io._gate import Gate
from tubemq_aio._io.decisions import MAX_SERIAL
from tubemq_aio._io.settings import TransportSettings
from tubemq_aio._io.stats import TransportStats
from tubemq_aio.errors import ClientClosedError, ConnectionLostError, RequestTimeoutError

__all__ = ["PendingCalls"]

# (future, deadline, timeout, is_async): a tuple is the cheapest record to build per request.
_Pending = tuple["asyncio.Future[bytes]", float, float, bool]


class PendingCalls:
    """Calls awaiting answers on one connection, and the waits that bound them.

    Must be created inside a running event loop.

    Args:
        label: ``host:port`` used in messages.
        settings: the in-flight and gate bounds.
        stats: counters shared with the owning pool (a new object when None).
    """

    def __init__(
        self, label: str, settings: TransportSettings, stats: TransportStats | None = None
    ) -> None:
        self.label = label
        self.stats = stats if stats is not None else TransportStats()
        #: A loop time not after the earliest pending deadline; the sweeper's cheap test.
        self.next_deadline = math.inf
        #: Loop time of the latest bytes sent or received (for idle reaping).
        self.last_activity = 0.0
        self._loop = asyncio.get_running_loop()
        self._pending: dict[int, _Pending] = {}
        self._serial = 0
        self._max_in_flight = settings.max_in_flight
        self._room_waiters: deque[asyncio.Future[None]] = deque()
        self._async = Gate(settings.max_async_outstanding)
        self._oneway = Gate(settings.max_oneway_outstanding)
        self._paused = False
        self._resume_waiters: list[asyncio.Future[None]] = []
        self._closed: BaseException | None = None

    @property
    def in_flight(self) -> int:
        """Calls awaiting a response."""
        return len(self._pending)

    @property
    def async_outstanding(self) -> int:
        """Outstanding ``call_async`` calls (bounded by ``max_async_outstanding``)."""
        return self._async.count

    @property
    def oneway_outstanding(self) -> int:
        """Oneway frames queued but not yet handed to the transport."""
        return self._oneway.count

    @property
    def is_closed(self) -> bool:
        """Whether the connection is closed or closing (no new calls accepted)."""
        return self._closed is not None

    @property
    def writing_paused(self) -> bool:
        """Whether the transport asked us to stop writing (its buffer is above the high mark)."""
        return self._paused

    def pause_writing(self) -> None:
        """The transport buffer passed the high-water mark: make senders wait."""
        self._paused = True

    def resume_writing(self) -> None:
        """The transport buffer drained below the low-water mark: let senders go on."""
        self._paused = False
        waiters, self._resume_waiters = self._resume_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def expire(self, now: float) -> None:
        """Fail every call whose deadline has passed; recompute :attr:`next_deadline`.

        Args:
            now: the loop time of the sweep.
        """
        expired: list[int] = []
        earliest = math.inf
        for serial, entry in self._pending.items():
            deadline = entry[1]
            if deadline <= now:
                expired.append(serial)
            elif deadline < earliest:
                earliest = deadline
        self.next_deadline = earliest
        for serial in expired:
            fut, _, timeout, is_async = self._pending.pop(serial)
            if self._room_waiters:
                self._wake_room()
            if is_async:
                self._async.release()
            self.stats.timeouts += 1
            if not fut.done():
                fut.set_exception(
                    RequestTimeoutError(
                        f"no response from {self.label} within {timeout:g} s (serial {serial}); "
                        "the request may or may not have been processed"
                    )
                )

    def _next_serial(self) -> int:
        serial = self._serial + 1 if self._serial < MAX_SERIAL else 1
        while serial in self._pending:  # only possible after a wrap with an ancient call pending
            serial = serial + 1 if serial < MAX_SERIAL else 1
        return serial

    def _register(self, serial: int, timeout: float, is_async: bool) -> asyncio.Future[bytes]:
        """Add the pending entry for ``serial`` (from :meth:`_next_serial`, frame encoded)."""
        self._serial = serial
        fut: asyncio.Future[bytes] = self._loop.create_future()
        deadline = self._loop.time() + timeout
        self._pending[serial] = (fut, deadline, timeout, is_async)
        if deadline < self.next_deadline:
            self.next_deadline = deadline
        self.stats.requests_sent += 1
        return fut

    def _wake_room(self) -> None:
        waiters = self._room_waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _check_open(self) -> None:
        if self._closed is not None:
            raise self._closed_error()

    def _closed_error(self) -> Exception:
        closed = self._closed
        if isinstance(closed, ClientClosedError):
            return ClientClosedError(f"connection to {self.label} is closed")
        return ConnectionLostError(f"connection to {self.label} is closed: {closed}")

    async def _wait_to_send(self, needs_slot: bool) -> None:
        """Slow path: wait for an in-flight slot (when ``needs_slot``) and for writing to resume."""
        loop = self._loop
        while True:
            self._check_open()
            if self._paused:
                waiter: asyncio.Future[None] = loop.create_future()
                self._resume_waiters.append(waiter)
                await waiter
                continue
            if needs_slot and len(self._pending) >= self._max_in_flight:
                waiter = loop.create_future()
                self._room_waiters.append(waiter)
                try:
                    await waiter
                except BaseException:
                    if waiter in self._room_waiters:
                        self._room_waiters.remove(waiter)
                    elif waiter.done() and not waiter.cancelled() and self._closed is None:
                        self._wake_room()  # pass the wake-up on
                    raise
                continue
            return

    def _mark_closed(self, make_exc: Callable[[], BaseException]) -> None:
        if self._closed is not None:
            return
        self._closed = make_exc()
        # Keep the same dict object: callers hold a reference to it across their await.
        entries = list(self._pending.values())
        self._pending.clear()
        self.next_deadline = math.inf
        for fut, *_ in entries:
            if not fut.done():
                fut.set_exception(make_exc())
        self._async.count = 0
        for gate in (self._async, self._oneway):
            gate.fail_waiters(make_exc)
        while self._room_waiters:
            waiter = self._room_waiters.popleft()
            if not waiter.done():
                waiter.set_exception(make_exc())
        waiters, self._resume_waiters = self._resume_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(make_exc())
