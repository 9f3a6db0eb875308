"""Partition selection for sends (sans-I/O).

The reference producers only know round robin per topic (docs/protocol/wire.md §5.9). We keep it
as the default, add stable key-hash routing, and let users plug in their own
:class:`Partitioner`. The caller passes the candidate partitions (normally
:meth:`ProducerMetadata.writable_partitions` minus partitions on blocked brokers) and an optional
set of partition keys to avoid (see :class:`PartitionBackoff`).
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable, Sequence, Set
from typing import Protocol, runtime_checkable

from tubemq_aio.errors import NoPartitionError
from tubemq_aio.protocol.producer_meta import Partition

__all__ = [
    "DefaultPartitioner",
    "KeyHashPartitioner",
    "PartitionBackoff",
    "Partitioner",
    "RoundRobinPartitioner",
    "key_hash",
    "unkeyed_selector",
]

_INT_MASK = 0x7FFFFFFF
_NOTHING: frozenset[str] = frozenset()


@runtime_checkable
class Partitioner(Protocol):
    """Chooses the partition of one send. Implementations must be cheap: they run per message."""

    def select(
        self,
        topic: str,
        partitions: Sequence[Partition],
        key: bytes | str | None = None,
        *,
        avoid: Set[str] = _NOTHING,
    ) -> Partition:
        """Pick one of ``partitions``.

        Args:
            topic: the topic sent to.
            partitions: the candidates, non-empty, in a canonical order.
            key: the message's routing key, if any.
            avoid: partition keys to skip when possible (backed-off partitions).

        Returns:
            One element of ``partitions``.
        """
        ...


def key_hash(key: bytes | str) -> int:
    """The routing hash of a key: CRC-32 (zlib polynomial) of its bytes, masked to 31 bits.

    Deterministic across processes, platforms and Python versions (unlike ``hash()``); a ``str``
    key is hashed as UTF-8.
    """
    data = key.encode() if isinstance(key, str) else key
    return zlib.crc32(data) & _INT_MASK


def _require(topic: str, partitions: Sequence[Partition]) -> int:
    n = len(partitions)
    if n == 0:
        raise NoPartitionError(f"no writable partition for topic {topic!r}")
    return n


class RoundRobinPartitioner:
    """Round robin per topic, like the Java ``RoundRobinPartitionRouter`` (§5.9).

    Each topic has its own counter starting at a random value; each send takes
    ``((counter + 1) & 0x7FFFFFFF) % n``. Up to ``n`` steps skip avoided partitions; if all are
    avoided, a separate shared counter picks one regardless. The key is ignored.

    The producer's ``FastAttempt`` takes the step itself (``_counters``) for a topic the
    counters know when nothing is to be avoided.

    Args:
        rng: source of the random start values; pass a seeded ``random.Random`` for tests.
    """

    __slots__ = ("_counters", "_rng", "_stepped")

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng if rng is not None else random.Random()
        self._counters: dict[str, int] = {}
        self._stepped = 0

    def __repr__(self) -> str:
        return f"<RoundRobinPartitioner topics={len(self._counters)}>"

    def select(
        self,
        topic: str,
        partitions: Sequence[Partition],
        key: bytes | str | None = None,
        *,
        avoid: Set[str] = _NOTHING,
    ) -> Partition:
        """Pick the next partition of ``topic`` (see the class docstring).

        Raises:
            NoPartitionError: ``partitions`` is empty.
        """
        n = len(partitions)
        if not n:
            _require(topic, partitions)  # raises (the check is a call only when it fails)
        counter = self._counters.get(topic)
        if counter is None:
            counter = self._rng.getrandbits(32)
        counter = (counter + 1) & 0xFFFFFFFF
        chosen = partitions[(counter & _INT_MASK) % n]
        if avoid:
            for _ in range(n - 1):
                if chosen.partition_key not in avoid:
                    break
                counter = (counter + 1) & 0xFFFFFFFF
                chosen = partitions[(counter & _INT_MASK) % n]
            else:
                if chosen.partition_key in avoid:
                    self._stepped = (self._stepped + 1) & 0xFFFFFFFF
                    chosen = partitions[(self._stepped & _INT_MASK) % n]
        self._counters[topic] = counter
        return chosen


class KeyHashPartitioner:
    """Routes every message with the same key to the same partition.

    The partition is ``partitions[key_hash(key) % n]`` over the candidate list, so a key stays on
    its partition as long as the list is unchanged (:class:`ProducerMetadata` orders it by
    ``(broker_id, partition_id)``; a broker joining, leaving or being blocked moves keys).
    ``avoid`` is ignored: stability wins over back-off. Messages without a key go to ``fallback``.

    Args:
        fallback: partitioner for messages without a key; round robin by default.
    """

    __slots__ = ("_fallback",)

    def __init__(self, fallback: Partitioner | None = None) -> None:
        self._fallback: Partitioner = fallback if fallback is not None else RoundRobinPartitioner()

    @property
    def fallback(self) -> Partitioner:
        """The partitioner of the messages without a key."""
        return self._fallback

    def select(
        self,
        topic: str,
        partitions: Sequence[Partition],
        key: bytes | str | None = None,
        *,
        avoid: Set[str] = _NOTHING,
    ) -> Partition:
        """Pick the key's partition, or defer to the fallback when there is no key.

        Raises:
            NoPartitionError: ``partitions`` is empty.
        """
        if key is None:
            return self._fallback.select(topic, partitions, None, avoid=avoid)
        n = _require(topic, partitions)
        return partitions[key_hash(key) % n]


class DefaultPartitioner(KeyHashPartitioner):
    """The default: key-hash routing for keyed messages, Java-style round robin for the rest."""

    __slots__ = ()


class PartitionBackoff:
    """The Java per-partition back-off after failed sends (§5.9).

    Every failed send (exception or timeout) adds 1 to the partition's counter; when it exceeds
    ``max_failures`` the partition is avoided for ``delay`` seconds and the counter restarts. Any
    response from the broker (success or business error) clears both. The producer's
    ``FastAttempt`` reads and clears ``_failures`` and ``_until`` itself, as
    :meth:`record_response` and :meth:`delayed` do.

    Args:
        max_failures: failures tolerated before backing off (Java 3).
        delay: back-off in seconds (Java 3.0).
    """

    __slots__ = ("_delay", "_failures", "_max_failures", "_until")

    def __init__(self, *, max_failures: int = 3, delay: float = 3.0) -> None:
        self._max_failures = max_failures
        self._delay = delay
        self._failures: dict[str, int] = {}
        self._until: dict[str, float] = {}

    def __repr__(self) -> str:
        return f"<PartitionBackoff failing={len(self._failures)} delayed={len(self._until)}>"

    def record_failure(self, partition_key: str, now: float) -> None:
        """Count a send to ``partition_key`` that ended without a response (now in seconds)."""
        count = self._failures.get(partition_key, 0) + 1
        if count > self._max_failures:
            self._failures.pop(partition_key, None)
            self._until[partition_key] = now + self._delay
        else:
            self._failures[partition_key] = count

    def record_response(self, partition_key: str) -> None:
        """A response arrived for ``partition_key``: clear its counter and back-off."""
        if self._failures:  # nothing to clear after most responses: no call then
            self._failures.pop(partition_key, None)
        if self._until:
            self._until.pop(partition_key, None)

    def delayed(self, now: float) -> frozenset[str]:
        """Partition keys to avoid at ``now`` (seconds); expired entries are dropped."""
        if not self._until:
            return _NOTHING
        expired = [k for k, t in self._until.items() if t <= now]
        for k in expired:
            del self._until[k]
        return frozenset(self._until)


def unkeyed_selector(partitioner: Partitioner) -> Callable[..., Partition]:
    """The ``select`` that ``partitioner`` runs for a message without a key: a key-hash
    partitioner's fallback's own (what its unchanged :meth:`KeyHashPartitioner.select` calls
    for such a message, one call less on every unkeyed send), else ``partitioner.select``.

    Args:
        partitioner: the producer's partitioner.
    """
    if (
        isinstance(partitioner, KeyHashPartitioner)
        and type(partitioner).select is KeyHashPartitioner.select
    ):
        return partitioner.fallback.select
    return partitioner.select
