"""Public value types, errors and pure helpers of the client-balanced consumer
(docs/protocol/consumer.md §8).

Re-exported by :mod:`tubemq_aio.consumer.client_balanced`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from tubemq_aio.checks import Checks
from tubemq_aio.consumer._decode import DecodeCounters
from tubemq_aio.errors import (
    MalformedMetaError,
    UnknownPartitionError,
)
from tubemq_aio.models import Message
from tubemq_aio.protocol.client_balance import PartitionMeta as ProtocolPartitionMeta
from tubemq_aio.protocol.client_balance import assign_modulo as _assign_keys
from tubemq_aio.protocol.consumer_meta import Partition, PartitionKey
from tubemq_aio.protocol.damage import DamageSignature

__all__ = [
    "BatchCodec",
    "BatchRead",
    "DecodeContext",
    "GetMessageAnswer",
    "PartitionMeta",
    "PositionedRead",
    "ReadAt",
    "assign_modulo",
    "parse_key",
]


@dataclass(frozen=True, slots=True)
class PartitionMeta:
    """A configured partition as listed by :meth:`ClientBalancedConsumer.partitions`.

    Attributes:
        partition_key: ``brokerId:topic:partitionId`` (what :meth:`~ClientBalancedConsumer.connect`
            takes).
        topic: the topic.
        broker: ``host:port`` of the broker holding it.
        broker_id: the broker id.
        partition_id: the partition id (``storeIndex * 10000 + i``).
        subscribable: whether the group may subscribe to it now.
    """

    partition_key: str
    topic: str
    broker: str
    broker_id: int
    partition_id: int
    subscribable: bool

    @classmethod
    def of(cls, meta: ProtocolPartitionMeta) -> PartitionMeta:
        """The public form of a metadata cache entry."""
        p = meta.partition
        key = p.key
        return cls(
            key.format(),
            key.topic,
            f"{p.broker.host}:{p.broker.port}",
            key.broker_id,
            key.partition_id,
            meta.subscribable,
        )


@dataclass(frozen=True, slots=True)
class PositionedRead:
    """One broker batch read by :meth:`ClientBalancedConsumer.read_at`.

    Attributes:
        partition_key: the partition read.
        messages: the messages, in partition order (empty at the end of the partition).
        start_offset: index offset of the first message (the requested offset, clamped by the
            broker to the partition's ``[min, max]``).
        next_offset: index offset right after the batch (``start_offset`` when empty).
        max_offset: the partition's max index offset.
    """

    partition_key: str
    messages: tuple[Message, ...]
    start_offset: int
    next_offset: int
    max_offset: int


@dataclass(frozen=True, slots=True)
class ReadAt:
    """One positioned read of a broker batch: where it starts and what it leaves behind.

    Attributes:
        partition: the partition read (resolved, its broker known).
        offset: index offset the batch is read from (>= 0).
        consume: commit the batch (the group's offset moves after it); ``False`` is a peek:
            the batch is rolled back and the group's offset stays at ``offset``.
        sequential: the session's previous read left the group's offset at ``offset``, so
            the register is skipped (checked against the answer; see
            :func:`~tubemq_aio.consumer._cb_ops.read_batch`).
    """

    partition: Partition
    offset: int
    consume: bool = True
    sequential: bool = False


class GetMessageAnswer(Protocol):
    """What a positioned read needs from a parsed ``GetMessageResponseB2C`` (§4.2)."""

    @property
    def success(self) -> bool:
        """Whether the broker answered with a batch."""

    @property
    def err_code(self) -> int:
        """The broker's code (404: nothing from the offset on)."""

    @property
    def err_msg(self) -> str:
        """The broker's text."""

    @property
    def curr_offset(self) -> int:
        """Index offset of the batch's first message."""

    @property
    def max_offset(self) -> int:
        """The partition's max index offset (negative when absent)."""


A = TypeVar("A", bound=GetMessageAnswer)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class DecodeContext:
    """What decoding one batch needs besides the answer.

    Attributes:
        topic: the partition's topic.
        partition_key: ``brokerId:topic:partitionId``.
        filters: the consumer's msgType filters of the topic (empty: none).
        counters: dropped messages are counted here.
        deliver_corrupt: keep CRC mismatches instead of dropping them.
    """

    topic: str
    partition_key: str
    filters: frozenset[str]
    counters: DecodeCounters
    deliver_corrupt: bool


@dataclass(frozen=True, slots=True)
class BatchCodec(Generic[A, T]):
    """How a positioned read turns the broker's answer into its result.

    Attributes:
        parse: answer bytes -> parsed answer (raises ``RemoteProtocolError`` on bad bytes).
        decode: parsed answer -> the batch's messages in the codec's form (before the commit:
            a batch found damaged on the way is rolled back and read again instead).
        empty: the messages of an empty read.
        parse_whole: when set, the GetMessage answer is asked of the transport whole: a plain
            SUCCESS answer comes with its RPC envelope (the answer bytes are
            ``data[start:end]`` of :func:`~tubemq_aio.protocol.rpc.success_bounds`) and is
            parsed by this instead of ``parse``, in place: the answer is not copied out of
            its frame (≈ 0.5 MB per broker batch). Same result and errors as ``parse`` of
            the answer bytes.
        damage: parsed answer -> its
            :func:`~tubemq_aio.protocol.damage.damage_signature`; asked only when ``decode``
            counted a checksum mismatch or an undecodable message. With it, a batch whose
            damage two reads of its offset do not show alike (damage on the way) is read again
            instead of decoded by the ``deliver_corrupt`` rule; None: every mismatch goes to
            that rule at once.
    """

    parse: Callable[[bytes], A]
    decode: Callable[[A, DecodeContext], T]
    empty: T
    parse_whole: Callable[[bytes], A] | None = None
    damage: Callable[[A], DamageSignature] | None = None


@dataclass(frozen=True, slots=True)
class BatchRead(Generic[T]):
    """One broker batch read by :meth:`ClientBalancedConsumer.read_with`.

    Attributes:
        partition_key: the partition read.
        items: the batch's messages as the codec decoded them.
        start_offset: index offset of the first message.
        next_offset: index offset right after the batch (``start_offset`` when empty or
            peeked).
        max_offset: the partition's max index offset.
    """

    partition_key: str
    items: T
    start_offset: int
    next_offset: int
    max_offset: int


def assign_modulo(
    partitions: Iterable[PartitionMeta | str], source_count: int, node_id: int
) -> list[str]:
    """The partition keys node ``node_id`` of ``source_count`` should connect.

    Uses ``(String.hashCode(key) & 0xffffffff) % source_count == node_id`` like the upstream Java
    example, so Python and Java members of one group agree on the split.

    Args:
        partitions: :class:`PartitionMeta` items or partition key strings.
        source_count: the number of nodes (≥ 1).
        node_id: this node's index in ``[0, source_count - 1]``.

    Returns:
        The keys of this node, sorted.

    Raises:
        ClientBalanceConfigError: ``source_count`` < 1 or ``node_id`` out of range.
        UnknownPartitionError: a key is malformed.
    """
    keys = [parse_key(p.partition_key if isinstance(p, PartitionMeta) else p) for p in partitions]
    return sorted(k.format() for k in _assign_keys(keys, source_count, node_id))


def parse_key(text: str) -> PartitionKey:
    """Parse ``brokerId:topic:partitionId``.

    Raises:
        UnknownPartitionError: the key is malformed.
    """
    if not isinstance(text, str):
        checks = Checks("partition key", error=UnknownPartitionError)
        checks.fail(f"a partition key must be a string, got {type(text).__name__}")
    try:
        return PartitionKey.parse(text)
    except MalformedMetaError as exc:
        raise UnknownPartitionError(str(exc)) from None
