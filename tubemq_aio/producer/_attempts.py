"""One send attempt of the :class:`~tubemq_aio.producer.Producer`: choosing its partition,
encoding its request, booking how it ended, and pacing the next one within the send's deadline.

:class:`SendAttempts` is a collaborator the producer builds when it starts and hands to every
send path (``send``, ``_send``, :class:`~tubemq_aio.producer._batch.SendMany`). An attempt has
two halves, written here once: :meth:`SendAttempts.begin` (partition, request, written at once
when the connection has room) and :meth:`SendAttempts.answered` / :meth:`SendAttempts.failed`
(booking the answer or the error). The send paths await the answer in between and keep only
the flow (retries, counters) themselves: the await stays in the caller's own frame, so the hot
path runs no coroutine per attempt. A plain send's first attempt and the answer's booking are
also one call each: :attr:`SendAttempts.fast`
(:class:`~tubemq_aio.producer._fast_attempt.FastAttempt`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass
from random import random
from typing import cast

from tubemq_aio._io.connection import Connection
from tubemq_aio._io.rpc_client import RpcClient
from tubemq_aio.errors import (
    ConfigError,
    ConnectError,
    ConnectionLostError,
    RequestNotSentError,
    RequestTimeoutError,
    SendOutcomeUnknownError,
    ServerError,
    ServerNotReadyError,
    ServiceStoppingError,
    TopicUnavailableError,
    TubeMQError,
    WriteTimeoutError,
)
from tubemq_aio.producer._fast_attempt import REFUSED_CODES, BuiltFastAttempt, FastAttempt
from tubemq_aio.producer._session import ProducerSession
from tubemq_aio.protocol.broker_blocking import BrokerBlocker
from tubemq_aio.protocol.message import EncodedMessage
from tubemq_aio.protocol.producer_meta import Partition
from tubemq_aio.protocol.producer_send import (
    SendRequestEncoder,
    SendResult,
    plain_send_encoder,
    send_result_parser,
)
from tubemq_aio.protocol.retry import RetryPolicy
from tubemq_aio.protocol.routing import (
    DefaultPartitioner,
    KeyHashPartitioner,
    PartitionBackoff,
    Partitioner,
    RoundRobinPartitioner,
    unkeyed_selector,
)

__all__ = ["NO_AVOID", "Failed", "SendAttempts", "SendCounts", "Started", "fast_attempt"]

#: No partition to avoid (the first attempt of a send).
NO_AVOID: frozenset[str] = frozenset()
#: A request written at once: (connection, serial, answer future).
Started = tuple[Connection, int, "asyncio.Future[bytes]"]
#: An attempt that certainly did not store its message: (error to retry on, partition,
#: monotonic start of the attempt).
Failed = tuple[TubeMQError, Partition, float]


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


class SendAttempts:
    """The steps of one send attempt and the state they keep across attempts: which brokers
    are blocked (``blocker``), which partitions back off after failures (``backoff``), how
    the next partition is chosen and how long to wait before a retry.

    Args:
        rpc: the producer's transport.
        session: the producer's master session (metadata, tokens, client id).
        blocker: the producer's broker blocking (also fed by its pre-connects).
        partitioner: chooses a message's partition.
        retry: paces the retries of a send within its deadline.
    """

    def __init__(
        self,
        rpc: RpcClient,
        session: ProducerSession,
        blocker: BrokerBlocker,
        partitioner: Partitioner,
        retry: RetryPolicy,
    ) -> None:
        #: The transport the attempts are written to.
        self.rpc = rpc
        #: The master session whose metadata routes the attempts.
        self.session = session
        #: Brokers not to send to for a while (their success rate or a 503).
        self.blocker = blocker
        #: Partitions not to send to for a while (failures without an answer).
        self.backoff = PartitionBackoff()
        self._metadata = session.metadata
        self._tokens = session.tokens
        self._select_keyed = guarded_selector(partitioner.select)
        self._select_unkeyed = guarded_selector(unkeyed_selector(partitioner))
        self._retry = retry
        self._encoder = SendRequestEncoder(session.client_id, session.sent_addr)
        self._plain_parts = plain_send_encoder(self._encoder)  # compiled when built
        #: Parses a send's answer (the compiled one when the accelerator is built).
        self.parse_answer = send_result_parser()  # used on the producer's loop only
        #: Both halves of an attempt in one call each where nothing is blocked or backed off
        #: (the plain send's first attempt, every answer's booking).
        self.fast = fast_attempt(self, time.monotonic)

    def begin(
        self,
        topic: str,
        key: bytes | str | None,
        avoid: Set[str],
        now: float,
        encoded: EncodedMessage | bytes,
        timeout_ms: int,
        attempt_timeout: float,
    ) -> tuple[Partition, Started | bytes]:
        """First half of an attempt: choose its partition (skipping blocked brokers and
        backed-off partitions when others are left), encode its request, and write it now if
        the connection is open and has room.

        Args:
            topic: the message's topic (published).
            key: its routing key, or ``None``.
            avoid: partition keys not to use (those tried already by this send).
            now: monotonic seconds.
            encoded: the message as sent, or just the body of a plain message (a non-empty
                ``bytes`` without attributes, type or time, whose size the caller has checked).
            timeout_ms: the request's wire timeout, milliseconds.
            attempt_timeout: seconds the attempt may take.

        Returns:
            The partition, and the started request, or the whole request payload when it could
            not be written now (the caller sends it with ``rpc.call_payload``).

        Raises:
            TopicUnavailableError: the topic has no writable partition.
        """
        partitions = self._metadata.writable_partitions(topic)
        if not partitions:
            raise TopicUnavailableError(f"topic {topic!r} has no writable partition right now")
        blocked = self.blocker.blocked(now)
        if blocked:
            allowed = tuple(p for p in partitions if p.broker.broker_id not in blocked)
            partitions = allowed or partitions
        delayed = self.backoff.delayed(now)
        skip = avoid | delayed if delayed else avoid
        if key is None:
            partition = self._select_unkeyed(topic, partitions, None, avoid=skip)
        else:
            partition = self._select_keyed(topic, partitions, key, avoid=skip)
        if type(encoded) is bytes:  # a plain message's body
            parts, size = self._plain_parts(
                partition.topic,
                partition.partition_id,
                encoded,
                self._tokens.broker_auth(),
                timeout_ms,
            )
        else:
            head, data, tail, size = self._encoder.encode_parts(
                partition.topic,
                partition.partition_id,
                cast(EncodedMessage, encoded),  # not bytes: an encoded message
                self._tokens.broker_auth(),
                timeout_ms,
            )
            parts = (head, data, tail)
        started = self.rpc.start_parts(partition.broker, parts, size, attempt_timeout)
        return partition, (b"".join(parts) if started is None else started)

    def answered(self, answer: bytes, partition: Partition) -> SendResult | ServerError:
        """Book an answered attempt (the partition's back-off ends, the broker counts a success
        unless it refused); return its result, or the refusal to retry on (503/419): the
        :attr:`fast` attempt's :meth:`~tubemq_aio.producer._fast_attempt.FastAttempt.answered`.

        Raises:
            ServerError: the broker refused the message for good (not 503/419).
            RemoteProtocolError: the answer could not be decoded.
        """
        return self.fast.answered(answer, partition)

    def failed(self, exc: TubeMQError, partition: Partition, now: float) -> TubeMQError:
        """Book an attempt that got no answer; return the error to retry on, or raise.

        Retried (returned): the request certainly did not reach the broker (connect failure,
        connection lost before writing), the broker refused it (503/419), or its RPC service
        turned it away unread because it has not started (``ServerNotReadyError``: a broker
        coming back, docs/protocol/wire.md §3.1). Raised: a write
        timeout (the caller's deadline has passed), a written request without an answer
        (:class:`SendOutcomeUnknownError`, also for ``ServiceStoppingError``: a stopping
        broker answers so and still processes the request, §3.1), and every other error.

        Args:
            exc: how the attempt ended.
            partition: the partition it was sent to.
            now: monotonic seconds when the attempt began.
        """
        broker = partition.broker
        if isinstance(exc, ConnectError):
            self.blocker.record_connect(
                str(self.rpc.address(broker)), False, now, broker_id=broker.broker_id
            )
            return exc
        self.blocker.record(broker.broker_id, False, time.monotonic())
        self.backoff.record_failure(partition.partition_key, time.monotonic())
        if isinstance(exc, WriteTimeoutError):
            raise exc  # never written, and the caller's deadline has passed
        if isinstance(exc, RequestNotSentError | ServerNotReadyError):
            return exc  # never written, or refused unread: certainly not stored
        if isinstance(exc, RequestTimeoutError | ConnectionLostError | ServiceStoppingError):
            raise SendOutcomeUnknownError(
                f"no answer for the send to {partition.partition_key} ({exc}); "
                "the message may or may not be stored"
            ) from exc
        if isinstance(exc, ServerError) and exc.err_code in REFUSED_CODES:
            return exc
        raise exc

    def retry_pause(
        self, last: TubeMQError, topic: str, failures: int, now: float, deadline: float
    ) -> float | None:
        """Seconds to wait before a send's next attempt, or ``None`` to give up with ``last``.

        Certainly not stored: try again until the send's deadline (not a number of attempts),
        at once for the first ``send_retries`` failures, then after a growing pause; when every
        broker of the topic is in reconnect backoff after a connect failure, not before the
        earliest backoff ends. Never past ``deadline``.

        Args:
            last: the error the last attempt returned (see :meth:`failed`).
            topic: the send's topic.
            failures: failed attempts of this send so far (>= 1).
            now: monotonic seconds.
            deadline: monotonic seconds when the send must have ended.
        """
        at_least = self.reconnect_wait(topic) if isinstance(last, ConnectError) else 0.0
        return self._retry.pause(failures, now, deadline, random(), at_least)

    def reconnect_wait(self, topic: str) -> float:
        """Seconds until a connect to some broker of ``topic`` is allowed (0.0: one is now)."""
        brokers = {p.broker for p in self._metadata.writable_partitions(topic)}
        return min((self.rpc.retry_in(b) for b in brokers), default=0.0)


#: The library's partitioners, trusted to return one of the partitions they are given.
_OWN_PARTITIONERS = (RoundRobinPartitioner, KeyHashPartitioner, DefaultPartitioner)


def guarded_selector(select: Callable[..., Partition]) -> Callable[..., Partition]:
    """``select`` itself when it is a library partitioner's; an application's (a partitioner
    of its own, or the ``fallback`` it gave a :class:`KeyHashPartitioner`) wrapped so that its
    mistakes end the send with a :class:`ConfigError` (nothing sent): an exception that is not
    a :class:`TubeMQError` (chained as the cause), or an answer that is not a partition of the
    topic. A :class:`TubeMQError` it raises (e.g. :class:`NoPartitionError`) is kept."""
    owner = getattr(select, "__self__", None)
    if type(owner) in _OWN_PARTITIONERS:  # exact types: a subclass may change select
        return select
    name = f"partitioner {type(owner if owner is not None else select).__name__}.select"

    def guarded(
        topic: str,
        partitions: Sequence[Partition],
        key: bytes | str | None = None,
        *,
        avoid: Set[str] = NO_AVOID,
    ) -> Partition:
        try:
            chosen = select(topic, partitions, key, avoid=avoid)
        except TubeMQError:
            raise
        except Exception as exc:
            raise ConfigError(f"{name} raised {type(exc).__name__}: {exc}") from exc
        if not isinstance(chosen, Partition) or chosen.topic != topic:
            raise ConfigError(
                f"{name} returned {chosen!r}, not one of the partitions of {topic!r} it was given"
            )
        return chosen

    return guarded


def fast_attempt(
    attempts: SendAttempts, clock: Callable[[], float], kind: type[FastAttempt] = BuiltFastAttempt
) -> FastAttempt:
    """The :class:`FastAttempt` over ``attempts``' collaborators.

    Args:
        attempts: the producer's attempts; its ``begin`` is the general path.
        clock: monotonic seconds (``time.monotonic``).
        kind: the class (default: the compiled twin when built, else :class:`FastAttempt`).
    """
    fast = kind()
    fast._begin = attempts.begin
    fast._metadata = attempts.session.metadata
    blocker = attempts.blocker
    fast._blocker = blocker
    fast._window = blocker._window
    fast._unavailable = blocker._unavailable
    fast._failing_links = blocker._failing_links
    fast._failures = attempts.backoff._failures
    fast._until = attempts.backoff._until
    select = attempts._select_unkeyed
    owner = getattr(select, "__self__", None)
    fast._counters = None
    if (
        isinstance(owner, RoundRobinPartitioner)
        and type(owner) is RoundRobinPartitioner
        and getattr(select, "__func__", None) is RoundRobinPartitioner.select
    ):
        fast._counters = owner._counters
    fast._tokens = attempts.session.tokens
    fast._plain_parts = attempts._plain_parts
    fast._rpc = attempts.rpc
    fast._conns = attempts.rpc._conns
    fast._parse = attempts.parse_answer
    fast._clock = clock
    return fast
