"""One send attempt of the :class:`~tubemq_aio.producer.Producer`: choosing its partition,
encoding its request, and booking how it ended (blocking, back-off, retry or give up).

:class:`SendAttempts` is the producer's base class. An attempt has two halves, written here once:
:meth:`SendAttempts._begin_attempt` (partition, request, written at once when the connection has
room) and :meth:`SendAttempts._answered` / :meth:`SendAttempts._attempt_failed` (booking the
answer or the error). The send paths (``send``, ``_send``, ``send_many``) await the answer in
between and keep only the flow (retries, counters) themselves: the await stays in the caller's
own frame, so the hot path runs no coroutine per attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Set
from dataclasses import dataclass

from tubemq_aio._client import AsyncLifecycle
from tubemq_aio._io.connection import Connection
from tubemq_aio._io.rpc_client import RpcClient
from tubemq_aio.errors import (
    ClientClosedError,
    ConnectError,
    ConnectionLostError,
    RequestNotSentError,
    RequestTimeoutError,
    SendOutcomeUnknownError,
    ServerError,
    TopicUnavailableError,
    TubeMQError,
    WriteTimeoutError,
)
from tubemq_aio.producer._session import ProducerSession
from tubemq_aio.protocol.broker_blocking import BrokerBlocker
from tubemq_aio.protocol.message import EncodedMessage
from tubemq_aio.protocol.producer_meta import Partition
from tubemq_aio.protocol.producer_send import SendRequestEncoder, SendResult
from tubemq_aio.protocol.routing import PartitionBackoff, Partitioner

__all__ = ["NO_AVOID", "SendAttempts", "SendCounts", "Started"]

#: No partition to avoid (the first attempt of a send).
NO_AVOID: frozenset[str] = frozenset()
#: A request written at once: (connection, serial, answer future).
Started = tuple[Connection, int, "asyncio.Future[bytes]"]

# Broker answers that mean "not stored, try elsewhere": 503 service unavailable, 419 overflow.
_REFUSED_CODES = frozenset({503, 419})


@dataclass(slots=True)
class SendCounts:
    """How the producer's sends ended: every send that got past the closed check ends in
    exactly one of ``sent``, ``failed`` and ``cancelled``; ``retried`` counts extra attempts."""

    sent: int = 0
    failed: int = 0
    cancelled: int = 0
    retried: int = 0

    def ended(self, cancelled: bool, closed: bool) -> None:
        """Book a send that did not store its message: cut short by ``close()`` (``closed``)
        or failed count as failed; one its caller cancelled counts as cancelled."""
        if cancelled and not closed:
            self.cancelled += 1
        else:
            self.failed += 1


class SendAttempts(AsyncLifecycle):
    """The steps of one send attempt (the producer sets the state below in its ``__init__``)."""

    _rpc: RpcClient | None
    _encoder: SendRequestEncoder | None
    _parse_answer: Callable[[bytes, Partition], SendResult]
    _blocker: BrokerBlocker
    _backoff: PartitionBackoff
    _partitioner: Partitioner
    _closing: asyncio.Event

    def _answered(self, answer: bytes, partition: Partition) -> SendResult | ServerError:
        """Book an answered send attempt; return its result, or the refusal to retry on.

        Raises:
            ServerError: the broker refused the message for good (not 503/419).
            RemoteProtocolError: the answer could not be decoded.
        """
        self._backoff.record_response(partition.partition_key)
        broker_id = partition.broker.broker_id
        try:
            result = self._parse_answer(answer, partition)
        except ServerError as exc:
            self._blocker.record(broker_id, False, time.monotonic(), err_code=exc.err_code)
            if exc.err_code not in _REFUSED_CODES:
                raise
            return exc
        self._blocker.record(broker_id, True, time.monotonic())
        return result

    def _attempt_failed(
        self, exc: TubeMQError, rpc: RpcClient, partition: Partition, now: float
    ) -> TubeMQError:
        """Book a send attempt that got no answer; return the error to retry on, or raise.

        Retried (returned): the request certainly did not reach the broker (connect failure,
        connection lost before writing) or the broker refused it (503/419). Raised: a write
        timeout (the caller's deadline has passed), a written request without an answer
        (:class:`SendOutcomeUnknownError`), and every other error.
        """
        broker = partition.broker
        if isinstance(exc, ConnectError):
            self._blocker.record_connect(
                str(rpc.address(broker)), False, now, broker_id=broker.broker_id
            )
            return exc
        self._blocker.record(broker.broker_id, False, time.monotonic())
        self._backoff.record_failure(partition.partition_key, time.monotonic())
        if isinstance(exc, WriteTimeoutError):
            raise exc  # never written, and the caller's deadline has passed
        if isinstance(exc, RequestNotSentError):
            return exc  # never written: certainly not stored, retry like a connect failure
        if isinstance(exc, RequestTimeoutError | ConnectionLostError):
            raise SendOutcomeUnknownError(
                f"no answer for the send to {partition.partition_key} ({exc}); "
                "the message may or may not be stored"
            ) from exc
        if isinstance(exc, ServerError) and exc.err_code in _REFUSED_CODES:
            return exc
        raise exc

    def _backoff_wait(self, session: ProducerSession, topic: str) -> float:
        """Seconds until a connect to some broker of ``topic`` is allowed (0.0: one is now)."""
        rpc = self._rpc
        assert rpc is not None
        brokers = {p.broker for p in session.metadata.writable_partitions(topic)}
        return min((rpc.retry_in(b) for b in brokers), default=0.0)

    async def _pause(self, seconds: float) -> None:
        """Sleep ``seconds`` between two attempts of a send, ending early on close.

        Raises:
            ClientClosedError: the producer was closed meanwhile.
        """
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._closing.wait()
        if self.closed:
            raise ClientClosedError("the producer was closed while this send waited to retry")

    def _begin_attempt(
        self,
        rpc: RpcClient,
        session: ProducerSession,
        topic: str,
        key: bytes | str | None,
        avoid: Set[str],
        now: float,
        encoded: EncodedMessage,
        timeout_ms: int,
        attempt_timeout: float,
    ) -> tuple[Partition, Started | bytes]:
        """First half of an attempt: choose its partition (skipping blocked brokers and
        backed-off partitions when others are left), encode its request, and write it now if
        the connection is open and has room.

        Returns:
            The partition, and the started request, or the whole request payload when it could
            not be written now (the caller sends it with ``rpc.call_payload``).

        Raises:
            TopicUnavailableError: the topic has no writable partition.
        """
        partitions = session.metadata.writable_partitions(topic)
        if not partitions:
            raise TopicUnavailableError(f"topic {topic!r} has no writable partition right now")
        blocked = self._blocker.blocked(now)
        if blocked:
            allowed = tuple(p for p in partitions if p.broker.broker_id not in blocked)
            partitions = allowed or partitions
        delayed = self._backoff.delayed(now)
        skip = avoid | delayed if delayed else avoid
        partition = self._partitioner.select(topic, partitions, key, avoid=skip)
        assert self._encoder is not None
        head, data, tail, size = self._encoder.encode_parts(
            partition.topic,
            partition.partition_id,
            encoded,
            session.tokens.broker_auth(),
            timeout_ms,
        )
        started = rpc.start_parts(partition.broker, (head, data, tail), size, attempt_timeout)
        return partition, (b"".join((head, data, tail)) if started is None else started)
