"""The engine of :meth:`Producer.send_many`: many messages, one task, one outcome each.

Each message still takes one slot of the send window and travels as its own request (the broker
protocol has no batched send), but the first attempt of every message is started from this one
task without a coroutine switch, and the answers are collected in order: a future already
answered costs no task wake-up. A message that finds its connection full waits for room in this
task: behind this call's own oldest request when it has one on the wire (its answer frees a
place), else on the connection itself (``Connection.start_when_room``, when other callers filled
it). Everything unusual goes through the producer's own single-send code, in a child task this
call owns: a message whose connection is not open, the retries after a first attempt that
certainly did not store the message (connect failure, lost before writing, broker 503/419), and
every message when telemetry is on (one span per message). So retries, back-off, blocking, the
window and the counters behave as for :meth:`Producer.send`.

The call has one deadline (its ``timeout`` from its start): every wait and attempt of every
message ends by it, and a message whose turn comes after it is not sent (``WriteTimeoutError``),
so the call takes ``timeout`` at most, however long the list and however small the window.

What the call shares with its producer is one :class:`SendPath`: the attempts collaborator,
the window, the counters, the single send and the closed check.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from tubemq_aio._io.connection import Connection
from tubemq_aio.errors import (
    ClientClosedError,
    SendWindowFullError,
    TubeMQError,
    WriteTimeoutError,
)
from tubemq_aio.producer._attempts import NO_AVOID, Failed, SendAttempts, SendCounts, Started
from tubemq_aio.producer._outgoing import Outgoing
from tubemq_aio.producer._waits import MIN_ATTEMPT, slot_by, window_stayed_full
from tubemq_aio.producer._window import SendWindow
from tubemq_aio.protocol.message import EncodedMessage
from tubemq_aio.protocol.producer_meta import Partition
from tubemq_aio.protocol.producer_send import SendResult

__all__ = ["SendMany", "SendPath"]

#: A first attempt on the wire: (index, connection, serial, answer future, partition, start).
_Started = tuple[int, Connection, int, "asyncio.Future[bytes]", Partition, float]
#: Messages issued between two yields to the event loop.
_YIELD_EVERY = 512


def _closed() -> ClientClosedError:
    return ClientClosedError("the producer was closed before this message was sent")


@dataclass(frozen=True, slots=True)
class SendPath:
    """What a ``send_many`` call shares with its producer (built once when it starts).

    Attributes:
        attempts: the two halves of an attempt (and the transport and session behind them).
        window: the send window; every message takes a slot.
        counts: the producer's send counters.
        single: the single-send code for a message already holding its slot (retries after a
            failed first attempt, or the whole send): ``single(message, first_failure)``;
            it books the message itself and releases its slot.
        closed: whether ``close()`` has begun.
    """

    attempts: SendAttempts
    window: SendWindow
    counts: SendCounts
    single: Callable[[Outgoing, Failed | None], Awaitable[SendResult]]
    closed: Callable[[], bool]


class SendMany:
    """One ``send_many`` call (used once).

    Args:
        path: the producer's send path (started).
        first: the call's first message; the others are it with their own body (the topic is
            published).
        bodies: the validated bodies.
        encoded: their encodings, or the bodies themselves when plain
            (:func:`~tubemq_aio.producer._encode_many.encode_all`).
        timeout: the call's seconds, every message and its retries included (``first.timeout``
            or the producer's ``send_timeout``).
        deadline: when the call ends (``time.monotonic`` seconds): its start plus ``timeout``.
        traced: telemetry is on: every message goes through the single send (one span each).
    """

    def __init__(
        self,
        path: SendPath,
        first: Outgoing,
        bodies: list[bytes],
        encoded: Sequence[EncodedMessage | bytes],
        timeout: float,
        deadline: float,
        traced: bool,
    ) -> None:
        self._attempts = path.attempts
        self._single = path.single
        self._closed = path.closed
        self._window = path.window
        self._counts = path.counts
        self._rpc = path.attempts.rpc
        self._timeout = timeout
        self._deadline = deadline
        self._traced = traced
        self._first = first
        self._bodies = bodies
        self._encoded = encoded
        self._outcomes: list[SendResult | TubeMQError | None] = [None] * len(bodies)
        self._started: deque[_Started] = deque()  # first attempts awaiting their answer, in order
        self._children: dict[int, asyncio.Task[SendResult]] = {}
        self._running: set[int] = set()  # children whose coroutine began: they own their slot
        self._issued = 0  # messages handed a window slot (or ended before needing one)

    async def run(self) -> list[SendResult | TubeMQError]:
        """Send every message; return each one's result or error, in order.

        Raises:
            asyncio.CancelledError: the call was cancelled (see :meth:`Producer.send_many`).
        """
        try:
            await self._issue()
            while self._started:
                await self._settle_first()
            for index, task in list(self._children.items()):
                await self._collect(index, task)
        except BaseException:
            await self._abandon()
            raise
        outcomes = self._outcomes
        assert None not in outcomes
        return outcomes  # type: ignore[return-value]

    # ---- issuing -------------------------------------------------------------------------------

    async def _issue(self) -> None:
        attempts, window, closed = self._attempts, self._window, self._closed
        rpc = self._rpc
        topic, key = self._first.topic, self._first.key
        deadline = self._deadline
        # The wire timeout stays the call's (the broker's hint); each attempt gets what is left.
        timeout_ms = rpc.wire_timeout(self._timeout)
        traced = self._traced
        now = time.monotonic()
        for index, encoded in enumerate(self._encoded):
            if closed():
                self._refuse_rest(index)
                return
            if now >= deadline:
                self._refuse_rest(index, self._too_late)
                return
            if index and not index % _YIELD_EVERY:
                # Let the queued frames leave and answers come in while a long list is issued.
                await asyncio.sleep(0)
                now = time.monotonic()
                if closed():
                    self._refuse_rest(index)
                    return
            if not window.try_acquire():
                try:
                    await self._make_room()  # returns holding a slot
                except SendWindowFullError:
                    self._refuse_rest(index, self._window_stayed_full)
                    return
                now = time.monotonic()
                if closed() or now >= deadline:
                    window.release()
                    self._refuse_rest(index, _closed if closed() else self._too_late)
                    return
            self._issued = index + 1
            if traced:
                self._spawn(index, None)
                continue
            attempt_timeout = max(deadline - now, MIN_ATTEMPT)
            try:
                partition, started = attempts.begin(
                    topic, key, NO_AVOID, now, encoded, timeout_ms, attempt_timeout
                )
                while isinstance(started, bytes) and self._started:
                    # No room on the connection: this call's oldest request not yet answered
                    # frees some when it is, for less than a task per message waiting for room
                    # (the answered ones before it are booked on the way: they free none). The
                    # request built goes out if its connection has room then, else it is built
                    # again (maybe for another partition).
                    await self._settle_answered()
                    if self._started:
                        await self._settle_first()
                    now = time.monotonic()
                    if closed():
                        break
                    attempt_timeout = max(deadline - now, MIN_ATTEMPT)
                    conn = rpc.ready(partition.broker)
                    written = None if conn is None else conn.start(started, attempt_timeout)
                    if written is not None:
                        started = written
                        break
                    partition, started = attempts.begin(
                        topic, key, NO_AVOID, now, encoded, timeout_ms, attempt_timeout
                    )
            except TubeMQError as exc:
                self._finish(index, exc)
                continue
            except BaseException:
                # Cancelled while it waited for room (or an unexpected error): this message
                # was not written. Its slot goes back and _abandon counts it with the messages
                # never issued (it used to keep the slot for good).
                window.release()
                self._issued = index
                raise
            if isinstance(started, bytes):
                conn = None if closed() else rpc.ready(partition.broker)
                if conn is None:  # no open connection: the single send connects (or refuses)
                    self._spawn(index, None)
                    continue
                # Full with other callers' requests: wait for room in this task.
                written = await self._start_when_room(index, conn, started, partition, now)
                if written is not None:
                    self._started.append((index, *written, partition, now))
                now = time.monotonic()
                continue
            self._started.append((index, started[0], started[1], started[2], partition, now))

    async def _start_when_room(
        self, index: int, conn: Connection, payload: bytes, partition: Partition, now: float
    ) -> Started | None:
        """Write message ``index`` once ``conn`` has room; None when it ended meanwhile (booked)
        or went on to the single-send code (a retriable failure: the link was lost)."""
        try:
            return await conn.start_when_room(payload, max(self._deadline - now, MIN_ATTEMPT))
        except TubeMQError as exc:
            try:
                last = self._attempts.failed(exc, partition, now)
            except TubeMQError as final:  # no room in time, or the producer closed the link
                self._finish(index, final)
                return None
            self._spawn(index, (last, partition, now))
            return None
        except BaseException:
            # Cancelled before it was written: its slot goes back and _abandon counts it with
            # the messages never issued.
            self._window.release()
            self._issued = index
            raise

    async def _make_room(self) -> None:
        """Free a window slot, first by collecting this call's own answers; return holding one."""
        window = self._window
        while True:
            if self._started:
                await self._settle_first()
            elif self._children:
                await asyncio.wait(self._children.values(), return_when=asyncio.FIRST_COMPLETED)
                for index, task in list(self._children.items()):
                    if task.done():
                        await self._collect(index, task)
            else:  # every slot is another caller's: wait for one until the call's deadline
                await slot_by(window, self._deadline, self._timeout)
                return
            if window.try_acquire():
                return

    def _refuse_rest(self, start: int, error: Callable[[], TubeMQError] = _closed) -> None:
        """The messages from ``start`` on are not sent: each gets ``error()`` (by default,
        the producer is closing)."""
        for index in range(start, len(self._encoded)):
            self._outcomes[index] = error()
            self._counts.failed += 1
        self._issued = len(self._encoded)

    def _window_stayed_full(self) -> SendWindowFullError:
        return window_stayed_full(self._window.limit, self._timeout)

    def _too_late(self) -> WriteTimeoutError:
        return WriteTimeoutError(
            f"send_many's timeout ({self._timeout} s) passed before this message's turn: it "
            "was not sent"
        )

    # ---- outcomes ------------------------------------------------------------------------------

    async def _settle_first(self) -> None:
        """Wait for the oldest first attempt's answer and book it (it stays queued until then,
        so a cancellation meanwhile abandons it with the rest)."""
        attempts = self._attempts
        index, _, _, future, partition, now = self._started[0]
        try:
            answer = await future
        except TubeMQError as exc:
            self._started.popleft()
            try:
                last = attempts.failed(exc, partition, now)
            except TubeMQError as final:
                self._finish(index, final)
                return
        else:
            self._started.popleft()
            try:
                outcome = attempts.fast.answered(answer, partition)
            except TubeMQError as final:
                self._finish(index, final)
                return
            if isinstance(outcome, SendResult):
                self._finish(index, outcome)
                return
            last = outcome
        self._spawn(index, (last, partition, now))  # retried by the single-send code

    async def _settle_answered(self) -> None:
        """Book this call's first attempts that are answered already, oldest first (no wait)."""
        started = self._started
        while started and started[0][3].done():
            await self._settle_first()

    def _finish(self, index: int, outcome: SendResult | TubeMQError) -> None:
        """Book a message that ended in this task (it held a slot)."""
        self._window.release()
        self._outcomes[index] = outcome
        if isinstance(outcome, SendResult):
            self._counts.sent += 1
        else:
            self._counts.failed += 1

    def _spawn(self, index: int, first_failure: Failed | None) -> None:
        """Hand a message, holding its slot, to the single-send code in a child task."""
        self._children[index] = asyncio.get_running_loop().create_task(
            self._child(index, first_failure), name=f"tubemq-producer-send-many-{index}"
        )

    async def _child(self, index: int, first_failure: Failed | None) -> SendResult:
        self._running.add(index)  # from here on, the single-send code releases the slot
        message = self._first if index == 0 else self._first.with_body(self._bodies[index])
        # The single send's deadline is its start (or its first attempt's) plus its timeout:
        # the call's deadline, when the timeout is what the call has left from there.
        began = time.monotonic() if first_failure is None else first_failure[2]
        message = message.with_timeout(max(self._deadline - began, MIN_ATTEMPT))
        return await self._single(message, first_failure)

    async def _collect(self, index: int, task: asyncio.Task[SendResult]) -> None:
        """Wait for a child (it counted itself) and keep its outcome."""
        try:
            self._outcomes[index] = await task
        except TubeMQError as exc:
            self._outcomes[index] = exc
        del self._children[index]

    async def _abandon(self) -> None:
        """The call is cancelled (or failed unexpectedly): forget the first attempts still
        awaiting an answer, cancel the children, count every message that did not end."""
        window = self._window
        lost = 0
        while self._started:
            _, conn, serial, future, *_ = self._started.popleft()
            conn.abandon(serial)
            if future.done() and not future.cancelled():
                # Failed (a lost link fails them all at once) or answered before the call
                # looked: nobody will, so asyncio would log its error as never retrieved.
                future.exception()
            window.release()
            lost += 1
        children = self._children
        for task in children.values():
            task.cancel()
        try:
            if children:
                await asyncio.gather(*children.values(), return_exceptions=True)
        finally:
            # A child cancelled before its first step never ran: its slot and count are ours.
            for index in children:
                if index not in self._running:
                    window.release()
                    lost += 1
            lost += len(self._encoded) - self._issued
            if self._closed():
                self._counts.failed += lost
            else:
                self._counts.cancelled += lost
