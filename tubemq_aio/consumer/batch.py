"""What the application receives: :class:`MessageBatch`, plus positions and counters.

A batch is (part of) one broker answer for one partition lease. Its partition is not fetched
again until the batch is acknowledged (``ack``: commit, the next fetch continues after it) or
rejected (``nack``: the next fetch of that partition delivers the same messages again).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from types import TracebackType
from typing import Protocol

from tubemq_aio.checks import Checks
from tubemq_aio.models import Message
from tubemq_aio.protocol.partitions import OffsetInfo

__all__ = ["ConsumerStats", "MessageBatch", "PartitionPosition"]


class _LeaseOwner(Protocol):
    async def _settle(self, fetched: object, consumed: bool) -> bool: ...

    def holds(self, fetched: object) -> bool: ...

    def give_back(self, batch: MessageBatch, used: int) -> MessageBatch | None: ...


@dataclass(frozen=True, slots=True)
class PartitionPosition:
    """Offsets of a held partition as last reported by its broker.

    Attributes:
        partition_key: ``brokerId:topic:partitionId``.
        current_offset: the group's offset (index bytes) as last seen, -2 when unknown.
        max_offset: the partition's max index offset, -2 when unknown.
        lag: messages between the two (index offsets differ by 28 bytes per message).
        at_end: the partition's last fetch found no new message (the broker's "no new data")
            and nothing was fetched since: it is read to its end as of that fetch. More exact
            than ``lag == 0`` where partitions share a broker store: the store's last index
            entries may belong to another partition, leaving a lag that never reaches 0.
    """

    partition_key: str
    current_offset: int
    max_offset: int
    lag: int
    at_end: bool = False

    @classmethod
    def of(cls, partition_key: str, offsets: OffsetInfo | None) -> PartitionPosition:
        """The position from a lease-table record; offsets -2 and lag 0 when it is None."""
        if offsets is None:
            return cls(partition_key, -2, -2, 0)
        o = offsets
        return cls(partition_key, o.curr_offset, o.max_offset, o.lag, o.at_end)


@dataclass(slots=True)
class ConsumerStats:
    """Counters of one consumer (plain integers; :meth:`snapshot` copies them).

    Attributes:
        fetches: GetMessage calls answered (any code).
        batches: non-empty batches buffered for the application.
        messages: messages delivered to the application.
        bytes: body bytes delivered.
        filtered: messages dropped by the ``msgType`` filter.
        crc_mismatches: messages whose checksum did not match.
        crc_refetches: batches fetched again because a message in them was damaged (checksum
            mismatch; corruption on the way heals on another read). Damage two reads of the
            same offset show alike is corruption at rest: the message is dropped (delivered
            with ``crc_ok=False`` if ``deliver_corrupt``); docs/protocol/consumer.md §5.
        decode_errors: payloads that could not be split into attribute and body (dropped).
        fetch_errors: fetches that failed with an RPC error (network, timeout).
        acks: batches acknowledged (while their lease was held); nacks: batches rejected
            (likewise); an ack or nack after the lease was gone counts in neither.
        expired: batches taken back because they were not acknowledged in time (or their
            partition moved away).
        not_found / not_found_wait_ms: fetches answered 404 (no new data) and the total rest
            they imposed (``msg_not_found_wait`` doubled per consecutive empty answer up to
            ``msg_not_found_max_wait``, or a type-1 frequency rule of the master).
        speed_limited / speed_limit_wait_ms: fetches answered 452 (the broker's consume speed
            limit) and the total rest they imposed (the broker's ``minLimitTime``).
        partitions_lost: connected partitions dropped because their broker's heartbeat failed,
            the broker no longer knew them at a fetch, or their fetches kept failing
            (client-balanced; the server-balanced master hands them out again).
        partitions_reconnected: of those, how many the client-balanced consumer connected
            again by itself.
        offset_rewinds: broker registers whose group offset lay beyond the store's end (the
            broker came back without its unflushed tail) and were moved back to that end
            (docs/protocol/consumer.md §3.2).
        tail_checks: read-backs of what the consumer had fetched of a partition, made when
            it registered the partition again after losing it with its broker
            (``tail_check_depth``, docs/failures.md).
        tail_rewinds: of those, the ones that found messages the broker had replaced below
            the group's offset (the one it loaded) and moved the group back to read them
            (messages between the offset moved back to and the replacement come again).
        tail_unverified: of those, the ones where even the oldest remembered offset held
            another message: the group resumed there, and messages replaced below it may be
            lost (a WARNING names the partition).
        late_request_waits: GetMessage, CommitOffset, register or unregister calls that got
            no answer (a timeout, a connection lost after the write) after which their
            partition was not read or registered again for ``rpc_timeout``, since the broker
            may still execute them (docs/reliability.md); a tail check's read-back and a
            positioned read included, a call the consumer cancelled itself (closing) not.
    """

    fetches: int = 0
    batches: int = 0
    messages: int = 0
    bytes: int = 0
    filtered: int = 0
    crc_mismatches: int = 0
    crc_refetches: int = 0
    decode_errors: int = 0
    fetch_errors: int = 0
    acks: int = 0
    nacks: int = 0
    expired: int = 0
    not_found: int = 0
    not_found_wait_ms: int = 0
    speed_limited: int = 0
    speed_limit_wait_ms: int = 0
    partitions_lost: int = 0
    partitions_reconnected: int = 0
    offset_rewinds: int = 0
    tail_checks: int = 0
    tail_rewinds: int = 0
    tail_unverified: int = 0
    late_request_waits: int = 0

    def snapshot(self) -> dict[str, int]:
        """The counters as a new dict."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


class MessageBatch(Sequence[Message]):
    """Messages of one partition lease, with explicit :meth:`ack` / :meth:`nack`.

    ``async with batch:`` acknowledges on normal exit and rejects when the block raises. An
    empty batch (``getmany`` timed out) has no lease; acking it does nothing.

    The consumer makes the batches it hands out, each holding its partition's lease. One built
    by hand (say, to test application code) holds none: it is settled from the start, and
    :meth:`ack` / :meth:`nack` return False.

    Args:
        messages: the messages, in partition order.
        topic: their topic.
        partition_key: their partition, ``brokerId:topic:partitionId``.
        position: the partition's offsets right after the fetch, if known.

    Attributes:
        topic: the topic of the messages (``""`` for an empty batch).
        partition_key: ``brokerId:topic:partitionId`` (``""`` for an empty batch).
        position: offsets of the partition right after the fetch, or None.
    """

    __slots__ = ("_done", "_group", "_messages", "partition_key", "position", "topic")

    def __init__(
        self,
        messages: Sequence[Message] = (),
        *,
        topic: str = "",
        partition_key: str = "",
        position: PartitionPosition | None = None,
    ) -> None:
        self._messages = tuple(messages)
        self.topic = topic
        self.partition_key = partition_key
        self.position = position
        self._group: _BatchGroup | None = None
        self._done = True

    @classmethod
    def _leased(
        cls,
        messages: Sequence[Message],
        *,
        topic: str,
        partition_key: str,
        position: PartitionPosition | None,
        group: _BatchGroup,
    ) -> MessageBatch:
        """A batch handed out by the consumer: a part of ``group``, the broker answer whose
        lease its :meth:`ack` / :meth:`nack` settle (not a constructor argument: the lease is
        the consumer's own, no public type)."""
        batch = cls(messages, topic=topic, partition_key=partition_key, position=position)
        batch._group = group
        batch._done = False
        return batch

    def __repr__(self) -> str:
        state = "settled" if self._done else "pending"
        return f"<MessageBatch {self.partition_key or '-'} messages={len(self)} {state}>"

    def __len__(self) -> int:
        return len(self._messages)

    def __getitem__(self, index: int) -> Message:  # type: ignore[override]
        return self._messages[index]

    def __iter__(self) -> Iterator[Message]:
        return iter(self._messages)

    @property
    def messages(self) -> tuple[Message, ...]:
        """The messages, in partition order."""
        return self._messages

    @property
    def settled(self) -> bool:
        """Whether :meth:`ack` or :meth:`nack` was called (always True for an empty batch)."""
        return self._done

    async def ack(self) -> bool:
        """Acknowledge: the messages are consumed and will not be delivered again.

        Returns:
            False when the lease was already gone (the batch was not acknowledged within
            ``confirm_timeout``, its partition moved to another consumer, or the consumer
            closed): the messages will be delivered again (at-least-once).
        """
        return await self._settle(True)

    async def nack(self) -> bool:
        """Reject: the same messages are delivered again by the next fetch of the partition.

        Returns:
            False when the lease was already gone (the messages come again anyway).
        """
        return await self._settle(False)

    async def _settle(self, consumed: bool) -> bool:
        if self._done:
            return False
        self._done = True
        assert self._group is not None
        return await self._group.settle(consumed)

    async def give_back(self, used: int) -> MessageBatch | None:
        """Keep the first ``used`` messages and return the rest to the consumer, first in line
        for the next reader (what ``async for`` does when a loop ends early).

        This batch is settled by the call (neither ack nor nack applies to it any more).

        Returns:
            The batch of the kept messages (ack or nack it), or None when none were kept.
            When the rest cannot be returned (the lease is gone or the consumer closed), the
            whole batch is nacked instead and None is returned.

        Raises:
            ConfigError: ``used`` is not an integer in ``[0, len(batch)]`` (nothing moved).
        """
        checks = Checks("give_back")
        checks.integer("used", used, low=0, high=len(self._messages))
        checks.done()
        if self._done or self._group is None:
            return None
        kept = self._group.owner.give_back(self, used)
        if kept is self and used < len(self):
            await self.nack()  # the rest cannot stay with us: the whole batch comes again
            return None
        return kept

    def _retire(self) -> None:
        """Mark settled without settling (the batch was replaced by a smaller one)."""
        self._done = True

    async def __aenter__(self) -> MessageBatch:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self._done:
            await self._settle(exc_type is None)


class _BatchGroup:
    """The parts one broker answer was split into (``max_records``); one lease for all.

    The lease is settled once every message was handed out and every part settled: consumed
    only if every part was acked.
    """

    __slots__ = ("_consumed", "_parts", "_settled", "all_handed", "fetched", "owner")

    def __init__(self, owner: _LeaseOwner, fetched: object) -> None:
        self.owner = owner
        self.fetched = fetched
        self.all_handed = False
        self._parts = 0
        self._settled = 0
        self._consumed = True

    def add_part(self) -> None:
        """Count one more part handed to the application."""
        self._parts += 1

    def drop_part(self) -> None:
        """A part handed out came back whole (:meth:`MessageBatch.give_back` kept nothing)."""
        self._parts -= 1

    async def settle(self, consumed: bool) -> bool:
        """Record one part's outcome; the last one settles the lease.

        Returns:
            False when the lease is gone (the messages come again), else True.
        """
        self._settled += 1
        self._consumed = self._consumed and consumed
        if not self.all_handed or self._settled < self._parts:
            return self.fetched is not None and self.owner.holds(self.fetched)
        # Drop the fetched batch: it points back at this group, and without breaking the cycle
        # its messages would wait for the cyclic garbage collector instead of going at once.
        fetched, self.fetched = self.fetched, None
        if fetched is None:
            return False
        return await self.owner._settle(fetched, self._consumed)
