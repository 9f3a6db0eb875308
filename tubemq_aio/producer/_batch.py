"""The engine of :meth:`Producer.send_many`: many messages, one task, one outcome each.

Each message still takes one slot of the send window and travels as its own request (the broker
protocol has no batched send), but the first attempt of every message is started from this one
task without a coroutine switch, and the answers are collected in order: a future already
answered costs no task wake-up. Everything unusual goes through the producer's own single-send
code, in a child task this call owns: a message whose connection is not open or has no room, the
retries after a first attempt that certainly did not store the message (connect failure, lost
before writing, broker 503/419), and every message when telemetry is on (one span per message).
So retries, back-off, blocking, the window and the counters behave as for :meth:`Producer.send`.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from tubemq_aio._io.connection import Connection
from tubemq_aio.errors import ClientClosedError, InvalidMessageError, TubeMQError
from tubemq_aio.producer._session import ProducerSession
from tubemq_aio.protocol.message import EncodedMessage, encode_message, plain_message
from tubemq_aio.protocol.producer_meta import Partition
from tubemq_aio.protocol.producer_rpc import SendResult
from tubemq_aio.telemetry import live

if TYPE_CHECKING:
    from tubemq_aio.producer.producer import Producer

__all__ = ["NO_AVOID", "SendMany", "encode_all"]

#: A first attempt on the wire: (index, connection, serial, answer future, partition, start).
_Started = tuple[int, Connection, int, "asyncio.Future[bytes]", Partition, float]
#: A first attempt that certainly did not store its message: (error, partition, start).
_Failure = tuple[TubeMQError, Partition, float]
#: Messages issued between two yields to the event loop.
_YIELD_EVERY = 512
#: No partition to avoid (the first attempt of a send).
NO_AVOID: frozenset[str] = frozenset()


def encode_all(
    bodies: list[bytes],
    max_size: int,
    attributes: Mapping[str, str] | None,
    msg_type: str | None,
    msg_time: datetime | str | None,
) -> list[EncodedMessage]:
    """Encode every message of a ``send_many`` call before any is sent.

    Raises:
        InvalidMessageError: a message is too large for the topic or otherwise invalid (its
            index is named; nothing was sent).
    """
    plain = attributes is None and msg_type is None and msg_time is None
    encoded: list[EncodedMessage] = []
    for index, body in enumerate(bodies):
        if plain and type(body) is bytes and len(body) <= max_size:
            encoded.append(plain_message(body))
            continue
        try:
            encoded.append(
                encode_message(
                    body,
                    attributes=attributes,
                    msg_type=msg_type,
                    msg_time=msg_time,
                    max_size=max_size,
                )
            )
        except InvalidMessageError as exc:
            raise InvalidMessageError(f"send_many: bodies[{index}]: {exc}") from None
    return encoded


class SendMany:
    """One ``send_many`` call (used once).

    Args:
        producer: the started producer.
        session: its session (the topic is published).
        topic: the topic.
        bodies: the validated bodies.
        encoded: their encodings (:func:`encode_all`).
        attributes: shared by every message.
        msg_type: shared by every message.
        msg_time: shared by every message.
        key: shared by every message.
        timeout: seconds per attempt (``None``: the producer's ``send_timeout``).
    """

    def __init__(
        self,
        producer: Producer,
        session: ProducerSession,
        topic: str,
        bodies: list[bytes],
        encoded: list[EncodedMessage],
        *,
        attributes: Mapping[str, str] | None,
        msg_type: str | None,
        msg_time: datetime | str | None,
        key: bytes | str | None,
        timeout: float | None,
    ) -> None:
        self._producer = producer
        self._session = session
        self._topic = topic
        self._bodies = bodies
        self._encoded = encoded
        self._attributes = attributes
        self._msg_type = msg_type
        self._msg_time = msg_time
        self._key = key
        self._timeout = timeout
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
        p = self._producer
        rpc, session = p._rpc, self._session
        assert rpc is not None
        topic, key = self._topic, self._key
        attempt_timeout = p._send_timeout if self._timeout is None else self._timeout
        timeout_ms = rpc.wire_timeout(attempt_timeout)
        traced = live(p.telemetry) is not None
        now = time.monotonic()
        for index, encoded in enumerate(self._encoded):
            if p.closed:
                self._refuse_rest(index)
                return
            if index and not index % _YIELD_EVERY:
                # Let the queued frames leave and answers come in while a long list is issued.
                await asyncio.sleep(0)
                now = time.monotonic()
                if p.closed:
                    self._refuse_rest(index)
                    return
            if p._in_flight < p._max_in_flight and not p._room_waiters:
                p._in_flight += 1
            else:
                await self._make_room()  # returns holding a slot
                now = time.monotonic()
                if p.closed:
                    p._release_slot()
                    self._refuse_rest(index)
                    return
            self._issued = index + 1
            if traced:
                self._spawn(index, None)
                continue
            try:
                partition, parts, size = p._request_for(
                    session, topic, key, NO_AVOID, now, encoded, timeout_ms
                )
                started = rpc.start_parts(partition.broker, parts, size, attempt_timeout)
            except TubeMQError as exc:
                self._finish(index, exc)
                continue
            if started is None:  # no open connection or no room on it: the single-send path
                self._spawn(index, None)
            else:
                self._started.append((index, started[0], started[1], started[2], partition, now))

    async def _make_room(self) -> None:
        """Free a window slot, first by collecting this call's own answers; return holding one."""
        p = self._producer
        while True:
            if self._started:
                await self._settle_first()
            elif self._children:
                await asyncio.wait(self._children.values(), return_when=asyncio.FIRST_COMPLETED)
                for index, task in list(self._children.items()):
                    if task.done():
                        await self._collect(index, task)
            else:
                await p._wait_for_room()
                return
            if p._in_flight < p._max_in_flight and not p._room_waiters:
                p._in_flight += 1
                return

    def _refuse_rest(self, start: int) -> None:
        """The producer is closing: the messages from ``start`` on are not sent."""
        p = self._producer
        for index in range(start, len(self._encoded)):
            self._outcomes[index] = ClientClosedError(
                "the producer was closed before this message was sent"
            )
            p.failed += 1
        self._issued = len(self._encoded)

    # ---- outcomes ------------------------------------------------------------------------------

    async def _settle_first(self) -> None:
        """Wait for the oldest first attempt's answer and book it (it stays queued until then,
        so a cancellation meanwhile abandons it with the rest)."""
        p = self._producer
        index, _, _, future, partition, now = self._started[0]
        try:
            answer = await future
        except TubeMQError as exc:
            self._started.popleft()
            rpc = p._rpc
            assert rpc is not None
            try:
                last = p._attempt_failed(exc, rpc, partition, now)
            except TubeMQError as final:
                self._finish(index, final)
                return
        else:
            self._started.popleft()
            try:
                outcome = p._answered(answer, partition)
            except TubeMQError as final:
                self._finish(index, final)
                return
            if isinstance(outcome, SendResult):
                self._finish(index, outcome)
                return
            last = outcome
        self._spawn(index, (last, partition, now))  # retried by the single-send code

    def _finish(self, index: int, outcome: SendResult | TubeMQError) -> None:
        """Book a message that ended in this task (it held a slot)."""
        p = self._producer
        p._release_slot()
        self._outcomes[index] = outcome
        if isinstance(outcome, SendResult):
            p.sent += 1
        else:
            p.failed += 1

    def _spawn(
        self, index: int, first_failure: tuple[TubeMQError, Partition, float] | None
    ) -> None:
        """Hand a message, holding its slot, to the single-send code in a child task."""
        self._children[index] = asyncio.get_running_loop().create_task(
            self._child(index, first_failure), name=f"tubemq-producer-send-many-{index}"
        )

    async def _child(self, index: int, first_failure: _Failure | None) -> SendResult:
        self._running.add(index)  # from here on, the single-send code releases the slot
        p = self._producer
        body = self._bodies[index]
        if live(p.telemetry) is not None:
            return await p._traced_send(self._session, True, self._topic, body,
                                        self._attributes, msg_type=self._msg_type,
                                        msg_time=self._msg_time, key=self._key,
                                        timeout=self._timeout,
                                        first_failure=first_failure)  # fmt: skip
        return await p._send(self._session, True, self._topic, body, self._attributes,
                             self._msg_type, self._msg_time, self._key, self._timeout,
                             first_failure)  # fmt: skip

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
        p = self._producer
        lost = 0
        while self._started:
            _, conn, serial, *_ = self._started.popleft()
            conn.abandon(serial)
            p._release_slot()
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
                    p._release_slot()
                    lost += 1
            lost += len(self._encoded) - self._issued
            if p.closed:
                p.failed += lost
            else:
                p.cancelled += lost
