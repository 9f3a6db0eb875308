"""Bookkeeping of one connection's calls: serials, pending map, deadlines, flow control.

:class:`PendingCalls` is the transport-free half of a connection (the other half,
:class:`~tubemq_aio._io.connection.Connection`, owns the transport and the wire). It is built on
:data:`~tubemq_aio._io.registry.RegistryBase` (the ``serialNo -> pending`` map, the serials, the
tick's writes and resolving answers: compiled when the accelerator is built) and adds the
in-flight bound's waiters, the ``pause_writing`` state, deadline expiry for the sweeper, and
failing everything on close.

A caller that finds no room (every in-flight slot busy, or the transport's write buffer above its
high mark because the peer stopped reading) waits on the slow path until its own deadline at the
latest; a waiter that gives up (deadline, cancellation) removes itself and passes on a wake-up it
may have received, so nothing is left behind.
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
from collections import deque
from collections.abc import Callable
from functools import partial

from tubemq_aio._io.decisions import MAX_SERIAL
from tubemq_aio._io.registry import RegistryBase, frame_other, settle_other
from tubemq_aio._io.settings import TransportSettings
from tubemq_aio._io.stats import TransportStats
from tubemq_aio.accelerator import twin
from tubemq_aio.errors import (
    ClientClosedError,
    RequestNotSentError,
    RequestTimeoutError,
    WriteTimeoutError,
)
from tubemq_aio.protocol.rpc import success_bounds

__all__ = ["PendingCalls", "future_factory", "loop_clock"]


def future_factory(loop: asyncio.AbstractEventLoop) -> Callable[[], asyncio.Future[bytes]]:
    """What makes the answer future of each call on ``loop``.

    On asyncio's own loops and uvloop's, with the accelerator built: the ``new`` of a compiled
    ``AnswerFutures`` (``_speedups/_answer_future.pxi``), whose futures a Task awaits as it
    does an ``asyncio.Future`` and whose wake-ups the connection batches per read (one
    ``call_soon`` for every call one read answers, instead of a ``call_soon``, a ``Handle``
    and a turn of the loop each). Otherwise asyncio's own future: on asyncio's own loops, whose
    ``create_future`` is a Python method that only builds ``asyncio.Future(loop=loop)``, that
    constructor bound to ``loop`` (a Python frame less per call, the same future); on any
    other loop its ``create_future``. Never ``asyncio.Future()`` without a loop: it looks up
    the running loop, and that lookup makes a ``getpid`` system call (asyncio checks the
    running loop's process) on every send; user plus system CPU per future measured 325 ns
    against 293 for the bound constructor (docs/benchmarks.md, "Regression or the machine?").
    """
    create = type(loop).create_future
    asyncios = create is asyncio.BaseEventLoop.create_future
    uvloops = sys.modules.get("uvloop.loop")
    if asyncios or (uvloops is not None and create is uvloops.Loop.create_future):
        batched = twin("AnswerFutures")
        if batched is not None:
            new: Callable[[], asyncio.Future[bytes]] = batched(loop).new
            return new
    if asyncios:
        return partial(asyncio.Future, loop=loop)
    return loop.create_future


def loop_clock(loop: asyncio.AbstractEventLoop) -> Callable[[], float]:
    """``loop.time`` as a callable: on asyncio's own loops, whose ``time`` is a Python method
    returning ``time.monotonic()``, that function itself (the same clock, a Python frame less
    per call); on other loops (uvloop) their own ``time``.
    """
    if type(loop).time is asyncio.BaseEventLoop.time:
        return time.monotonic
    return loop.time


class PendingCalls(RegistryBase):
    """Calls awaiting answers on one connection, and the waits that bound them.

    Must be created inside a running event loop.

    Args:
        label: ``host:port`` used in messages.
        settings: the in-flight bound.
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
        self._loop = loop = asyncio.get_running_loop()
        #: Makes a call's answer future (see :func:`future_factory`).
        self._new_future: Callable[[], asyncio.Future[bytes]] = future_factory(loop)
        #: The loop's clock (see :func:`loop_clock`).
        self._clock = loop_clock(loop)
        self._pending = {}
        #: Serials of pending calls whose plain SUCCESS answer is handed over whole (envelope
        #: included, see ``Connection.call``); each leaves the set when its entry leaves
        #: ``_pending``.
        self._raw = set()
        self._serial = 0
        #: The serial of the latest request handed to the transport (the connection sets it
        #: when it writes a tick's frames): the ones after it were never written.
        self._written = 0
        self._max_in_flight = settings.max_in_flight
        self._room_waiters = deque()
        self._paused = False
        self._resume_waiters: deque[asyncio.Future[None]] = deque()
        self._closed = None
        self._legacy = settings.framing == "legacy-length"
        #: The frames queued this tick (written by ``_flush``, or at once when their bytes
        #: reach the transport's high-water mark).
        self._wbuf = []
        self._tick_bytes = 0
        self._write_high = settings.write_high_water
        # The registry's rare shapes, handed to it (the compiled one cannot import them).
        self._frame_other = frame_other
        self._settle_other = settle_other
        self._success_bounds = success_bounds

    @property
    def in_flight(self) -> int:
        """Calls awaiting a response."""
        return len(self._pending)

    @property
    def waiting(self) -> int:
        """Callers waiting for room to send (an in-flight slot or a drained write buffer)."""
        return len(self._room_waiters) + len(self._resume_waiters)

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
        waiters, self._resume_waiters = self._resume_waiters, deque()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def silence_hint(self) -> str:
        """Text to add to a timeout's message when the peer's silence suggests a cause
        (overridden by the connection; empty here)."""
        return ""

    def any_expired(self, now: float) -> bool:
        """Whether a pending call's deadline is at or before ``now`` (loop time)."""
        return any(entry[1] <= now for entry in self._pending.values())

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
        hint = self.silence_hint() if expired else ""
        for serial in expired:
            fut, _, timeout = self._pending.pop(serial)
            self._raw.discard(serial)
            if self._room_waiters:
                self._wake_room()
            self.stats.timeouts += 1
            if not fut.done():
                fut.set_exception(
                    RequestTimeoutError(
                        f"no response from {self.label} within {timeout:g} s (serial {serial}); "
                        f"the request may or may not have been processed{hint}"
                    )
                )

    def _next_serial(self) -> int:
        serial = self._serial + 1 if self._serial < MAX_SERIAL else 1
        while serial in self._pending:  # only possible after a wrap with an ancient call pending
            serial = serial + 1 if serial < MAX_SERIAL else 1
        return serial

    def _check_open(self) -> None:
        if self._closed is not None:
            raise self._not_sent_error()

    def _not_sent_error(self) -> Exception:
        """The error of a call that found the connection closed before its request was written.

        A request never written was certainly not processed: a lost link reads as
        :class:`RequestNotSentError` (safe to retry), a link closed by its owner as closed.
        """
        closed = self._closed
        if isinstance(closed, ClientClosedError):
            return ClientClosedError(f"connection to {self.label} is closed")
        return RequestNotSentError(
            f"connection to {self.label} was lost before the request was written"
        )

    async def _wait_to_send(self, deadline: float, timeout: float) -> None:
        """Slow path: wait for writing to resume and for an in-flight slot, until ``deadline``.

        Raises:
            WriteTimeoutError: still no room at ``deadline`` (the request was not sent).
            RequestNotSentError: the connection was lost meanwhile (the request was not sent).
            ClientClosedError: the connection was closed by its owner.
        """
        loop = self._loop
        while True:
            self._check_open()
            if self._paused:
                waiters = self._resume_waiters
                reason = "the peer is not reading (write buffer full)"
            elif len(self._pending) >= self._max_in_flight:
                waiters = self._room_waiters
                reason = f"all {self._max_in_flight} in-flight slots stayed busy"
            else:
                return
            waiter: asyncio.Future[None] = loop.create_future()
            waiters.append(waiter)
            try:
                async with asyncio.timeout_at(deadline):
                    await waiter
            except TimeoutError:
                self._drop_waiter(waiters, waiter)
                if self._closed is not None:
                    raise self._not_sent_error() from None
                self.stats.timeouts += 1
                raise WriteTimeoutError(
                    f"no room to send to {self.label} within {timeout:g} s: {reason}; "
                    "the request was not sent"
                ) from None
            except BaseException:
                self._drop_waiter(waiters, waiter)
                raise

    def _drop_waiter(
        self, waiters: deque[asyncio.Future[None]], waiter: asyncio.Future[None]
    ) -> None:
        """Forget a waiter that gave up; pass on an in-flight wake-up it already received."""
        try:
            waiters.remove(waiter)
        except ValueError:
            if (
                waiters is self._room_waiters
                and waiter.done()
                and not waiter.cancelled()
                and waiter.exception() is None
                and self._closed is None
            ):
                self._wake_room()

    def _mark_closed(self, make_exc: Callable[[], BaseException]) -> None:
        if self._closed is not None:
            return
        self._closed = make_exc()
        # Keep the same dict object: callers hold a reference to it across their await.
        entries = list(self._pending.items())
        self._pending.clear()
        self._raw.clear()
        self.next_deadline = math.inf
        # Serials after the latest written one (modulo the wrap) never reached the socket: a
        # lost link fails them as not sent (safe to retry), not as "outcome unknown".
        written, unwritten = self._written, (self._serial - self._written) % MAX_SERIAL
        for serial, (fut, *_) in entries:
            if not fut.done():
                if 0 < (serial - written) % MAX_SERIAL <= unwritten:
                    fut.set_exception(self._not_sent_error())
                else:
                    fut.set_exception(make_exc())
        # Waiters for room never wrote their request: they raise _not_sent_error() themselves.
        for waiters in (self._room_waiters, self._resume_waiters):
            while waiters:
                waiter = waiters.popleft()
                if not waiter.done():
                    waiter.set_exception(self._not_sent_error())
