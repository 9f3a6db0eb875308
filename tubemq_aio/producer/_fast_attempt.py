"""The two halves of a send attempt in one call each: :class:`FastAttempt`.

A plain send's first attempt used to run eleven Python calls between ``send`` and its result:
``SendAttempts.begin`` (the topic's partitions, the broker blocker's and the partition
back-off's checks, the round robin, the broker token, the request, the connection) and
``SendAttempts.answered`` (the back-off's and the blocker's booking). :class:`FastAttempt`
does each half in one call by reading its collaborators' state directly where nothing is
blocked, backed off or due, and calls their methods otherwise, so the outcome is the same
either way:

* :meth:`FastAttempt.begin_plain`: a plain message's first attempt (``SendAttempts.begin``
  with no key, nothing to avoid and the body as the message). It goes the general way
  (``SendAttempts.begin``) when a broker is blocked, a partition is backed off, a blocker
  evaluation is due, the partitioner is not the default round robin or has not yet seen the
  topic, or the broker's connection is not remembered.
* :meth:`FastAttempt.answered`: the booking of every answered attempt
  (``SendAttempts.answered`` is this).

The collaborators' tables it reads and writes (``PartitionBackoff``'s two tables, the broker
blocker's send counts and lists, the round robin's counters, the transport's remembered
connections) are the very dictionaries those objects keep, handed in when the producer
starts; the values they reassign (the blocker's cache and its times, the metadata's topics,
the broker token) are read from their owners on each call.

This class is the pure reference; the accelerator has a typed twin of the same name
(``_speedups/_fast_attempt.pxi``) with the same fields, compared against this one and against
the general path in ``tests/unit/test_speedups_attempt.py``. The twin calls the compiled
encoder, answer parser and connection registry through their C methods, and reads the fields
of the slotted classes (``Partition``, ``Broker``, ``TopicMeta``, ``TokenState``,
``ProducerMetadata``, ``BrokerBlocker``) from their slots. ``SendAttempts`` builds
whichever is in use (:data:`BuiltFastAttempt`) over its attempts' collaborators.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tubemq_aio._io.connection import Connection
from tubemq_aio._io.rpc_client import RpcClient
from tubemq_aio.accelerator import twin_or
from tubemq_aio.errors import ServerError
from tubemq_aio.protocol.broker_blocking import BrokerBlocker
from tubemq_aio.protocol.producer_meta import Partition, ProducerMetadata
from tubemq_aio.protocol.producer_send import SendResult

__all__ = ["REFUSED_CODES", "Begun", "BuiltFastAttempt", "FastAttempt"]

#: Broker answers that mean "not stored, try elsewhere": 503 service unavailable, 419 overflow.
REFUSED_CODES = frozenset({503, 419})

#: An attempt begun: ``(partition, connection, serial, answer future)`` when its request was
#: written at once, ``(partition, None, 0, payload)`` when it was not (no open connection or no
#: room on it: the caller sends the payload with ``rpc.call_payload``).
Begun = tuple[Partition, Connection | None, int, "asyncio.Future[bytes] | bytes"]

_INT_MASK = 0x7FFFFFFF
_NO_AVOID: frozenset[str] = frozenset()


class FastAttempt:
    """A send attempt's two halves in one call each (pure reference; see the module).

    The fields are set by ``_attempts.fast_attempt``, never here, so the compiled twin and this
    class have the same layout to fill.
    """

    #: The general first half (``SendAttempts.begin``) for what the fast one does not take.
    _begin: Callable[..., tuple[Partition, Any]]
    _metadata: ProducerMetadata
    _blocker: BrokerBlocker
    #: The blocker's own tables: broker id -> [sends, successes]; 503-blocked brokers; brokers
    #: whose connects failed since their last success.
    _window: dict[int, list[int]]
    _unavailable: dict[int, float]
    _failing_links: dict[int, str]
    #: ``PartitionBackoff``'s own tables: failures per partition key; back-off ends.
    _failures: dict[str, int]
    _until: dict[str, float]
    #: The round robin's counters per topic when unkeyed messages go to exactly
    #: ``RoundRobinPartitioner.select``, else None (the general path chooses).
    _counters: dict[str, int] | None
    _tokens: Any  # TokenState: its broker_auth() returns ``_broker_auth``
    _plain_parts: Callable[..., tuple[tuple[bytes, bytes, bytes], int]]
    _rpc: RpcClient
    #: The transport's remembered connections: host -> port -> connection.
    _conns: dict[str, dict[int, Connection]]
    _parse: Callable[[bytes, Partition], SendResult]
    _clock: Callable[[], float]

    def begin_plain(
        self, topic: str, body: bytes, now: float, timeout_ms: int, attempt_timeout: float
    ) -> Begun:
        """``SendAttempts.begin(topic, None, NO_AVOID, now, body, timeout_ms, attempt_timeout)``
        of a plain message, with the result flattened (see :data:`Begun`).

        Raises:
            TopicUnavailableError: the topic has no writable partition.
        """
        meta = self._metadata._topics.get(topic)
        blocker = self._blocker
        counters = self._counters
        counter = None if counters is None else counters.get(topic)
        if (
            meta is None
            or counter is None
            or now >= blocker._evaluation_due
            or now >= blocker._cache_valid_until
            or blocker._cached
            or self._until
        ):
            return self._general(topic, body, now, timeout_ms, attempt_timeout)
        assert counters is not None
        partitions = meta.partitions
        n = len(partitions)
        if not n:
            return self._general(topic, body, now, timeout_ms, attempt_timeout)
        counter = (counter + 1) & 0xFFFFFFFF
        partition = partitions[(counter & _INT_MASK) % n]
        counters[topic] = counter
        parts, size = self._plain_parts(
            partition.topic, partition.partition_id, body, self._tokens._broker_auth, timeout_ms
        )
        broker = partition.broker
        ports = self._conns.get(broker.host)
        conn = None if ports is None else ports.get(broker.port)
        if conn is not None:
            started = conn.start_parts(parts, size, attempt_timeout)
            if started is not None:
                return partition, conn, started[1], started[2]
            if not conn.is_closed:
                return partition, None, 0, b"".join(parts)
        # Not remembered, or closed: the transport asks its pool (as SendAttempts.begin does).
        started = self._rpc.start_parts(broker, parts, size, attempt_timeout)
        if started is None:
            return partition, None, 0, b"".join(parts)
        return partition, started[0], started[1], started[2]

    def _general(
        self, topic: str, body: bytes, now: float, timeout_ms: int, attempt_timeout: float
    ) -> Begun:
        """The general first half, flattened."""
        partition, started = self._begin(
            topic, None, _NO_AVOID, now, body, timeout_ms, attempt_timeout
        )
        if isinstance(started, bytes):
            return partition, None, 0, started
        return partition, started[0], started[1], started[2]

    def answered(self, answer: bytes, partition: Partition) -> SendResult | ServerError:
        """Book an answered attempt (the partition's back-off ends, the broker counts a success
        unless it refused); return its result, or the refusal to retry on (503/419).

        Raises:
            ServerError: the broker refused the message for good (not 503/419).
            RemoteProtocolError: the answer could not be decoded.
        """
        key = partition.partition_key
        if self._failures:
            self._failures.pop(key, None)
        if self._until:
            self._until.pop(key, None)
        broker_id = partition.broker.broker_id
        try:
            result = self._parse(answer, partition)
        except ServerError as exc:
            self._blocker.record(broker_id, False, self._clock(), err_code=exc.err_code)
            if exc.err_code not in REFUSED_CODES:
                raise
            return exc
        now = self._clock()
        counts = self._window.get(broker_id)
        if (
            counts is None
            or now >= self._blocker._evaluation_due
            or self._unavailable
            or self._failing_links
        ):
            self._blocker.record(broker_id, True, now)
        else:  # BrokerBlocker.record of a success with nothing to lift or evaluate
            counts[0] += 1
            counts[1] += 1
        return result


if TYPE_CHECKING:
    BuiltFastAttempt = FastAttempt
else:
    #: The class in use: the compiled twin when the accelerator is built, else FastAttempt.
    BuiltFastAttempt = twin_or(FastAttempt)
