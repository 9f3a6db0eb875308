"""The fake cluster's data: topic layout, per-store message logs and group offsets.

Offsets behave like the broker's index file (docs/protocol/consumer.md §3.2, §4.2). A broker
keeps one message store per topic store (partition ids ``store * 10000 + i``), and the
partitions of a store share its index: the ``i``-th message appended to the store, whatever its
partition, sits at byte offset ``i * 28`` (a 28-byte index record: partition id, data offset,
data size, msgType hash, receive time), ``maxOffset`` of every partition of the store is
``count * 28``, and a fetch of one partition scans the store's index from the partition's
offset, skipping the records of the other partitions (the broker's ``MessageStore`` and
``MsgMemStore``). A group's committed offset advances by the index bytes of the batch it fetched
once that batch is confirmed.
"""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass, field

from tubemq_aio.errors import TubeMQError
from tubemq_aio.protocol.message import checksum, decode_payload

__all__ = [
    "INDEX_UNIT",
    "MAX_INDEX_SCAN",
    "STORE_BASE",
    "Registration",
    "StoreLog",
    "StoredMessage",
    "TopicLayout",
]

#: Bytes of one index record: offsets advance by this much per message of the store.
INDEX_UNIT = 28
#: Partition ids are ``store * STORE_BASE + index`` (the broker's ``META_STORE_INS_BASE``).
STORE_BASE = 10000
#: Index records one fetch scans at most (the broker's in-memory read count,
#: ``memMaxIndexReadCnt`` = 6 000): a fetch past that many records of other partitions answers
#: with no message but advances the offset.
MAX_INDEX_SCAN = 6000


@dataclass(frozen=True, slots=True)
class TopicLayout:
    """How a topic is spread: ``partitions`` per store, ``stores`` stores, on every broker.

    Partition ids are ``store * 10000 + index`` as on a real broker; the partitions of one
    store share its index (offsets count the messages of all of them).
    """

    name: str
    partitions: int = 1
    stores: int = 1
    accept_publish: bool = True
    accept_subscribe: bool = True

    def partition_ids(self) -> list[int]:
        """Every partition id of the topic on one broker."""
        return [s * 10000 + i for s in range(self.stores) for i in range(self.partitions)]

    def has_partition(self, partition_id: int) -> bool:
        """Whether ``partition_id`` is one of :meth:`partition_ids`, in O(1) (every broker
        request asks; building the list each time made the fake slow at thousands of
        partitions)."""
        if partition_id < 0 or self.stores < 1:
            return False
        store = min(self.stores - 1, partition_id // 10000)  # the smallest index that fits
        return partition_id - store * 10000 < self.partitions


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """One appended message as a consumer receives it.

    Attributes:
        message_id: the broker-assigned id.
        checksum: CRC-32 of ``payload`` masked to 31 bits.
        payload: the ``data`` bytes exactly as the producer sent them.
        flag: the producer's flag (bit 0: attribute block present).
        msg_type: the message type parsed from the attribute block ("" if none).
        append_time: milliseconds since the epoch when it was stored.
        partition_id: the partition it was sent to.
        offset: its index offset in the store (``position * 28``).
    """

    message_id: int
    checksum: int
    payload: bytes
    flag: int
    msg_type: str
    append_time: int
    partition_id: int
    offset: int


def _msg_type(payload: bytes, flag: int) -> str:
    try:
        return decode_payload(payload, flag, 0).msg_type
    except TubeMQError:
        return ""


@dataclass(slots=True)
class StoreLog:
    """The messages of one store of one topic on one broker, in append order: one shared index
    for every partition of the store."""

    messages: list[StoredMessage] = field(default_factory=list)
    min_index: int = 0
    #: Per partition, the positions of its messages in :attr:`messages` (ascending).
    positions: dict[int, list[int]] = field(default_factory=dict)

    @property
    def min_offset(self) -> int:
        """The smallest readable offset (of every partition of the store)."""
        return self.min_index * INDEX_UNIT

    @property
    def max_offset(self) -> int:
        """The offset the next message of any partition of the store will get."""
        return len(self.messages) * INDEX_UNIT

    def append(
        self, message_id: int, payload: bytes, flag: int, *, partition_id: int
    ) -> StoredMessage:
        """Store one message of ``partition_id``; return the stored form (with its offset)."""
        stored = StoredMessage(
            message_id,
            checksum(payload),
            payload,
            flag,
            _msg_type(payload, flag),
            int(time.time() * 1000),
            partition_id,
            self.max_offset,
        )
        self.positions.setdefault(partition_id, []).append(len(self.messages))
        self.messages.append(stored)
        return stored

    def drop_newest(self, count: int) -> list[StoredMessage]:
        """Forget the newest ``count`` messages of the store (never those below its minimum),
        as a broker killed before it flushed them does; their offsets go to the next messages.

        Returns:
            The messages forgotten, oldest first.
        """
        keep = max(self.min_index, len(self.messages) - count)
        lost = self.messages[keep:]
        del self.messages[keep:]
        for positions in self.positions.values():
            del positions[bisect.bisect_left(positions, keep) :]
        return lost

    def expire_oldest(self, count: int) -> int:
        """Raise the store's minimum past its oldest ``count`` readable messages (never past
        its end), as a broker's retention (``deletePolicy``) deleting old segments does; the
        messages stay listed but are no longer read.

        Returns:
            The new minimum offset.
        """
        self.min_index = min(len(self.messages), self.min_index + max(0, count))
        return self.min_offset

    def partition_messages(self, partition_id: int) -> list[StoredMessage]:
        """The messages of one partition of the store, in append order."""
        return [self.messages[i] for i in self.positions.get(partition_id, ())]

    def count_before(self, partition_id: int, offset: int) -> int:
        """How many messages of ``partition_id`` sit below ``offset``."""
        return bisect.bisect_left(self.positions.get(partition_id, []), offset // INDEX_UNIT)

    def read(
        self,
        offset: int,
        partition_id: int,
        max_count: int,
        max_bytes: int,
        filters: frozenset[str],
    ) -> tuple[list[StoredMessage], int]:
        """Up to ``max_count`` messages (about ``max_bytes``) of ``partition_id`` from
        ``offset``, scanning at most :data:`MAX_INDEX_SCAN` index records.

        Returns:
            The messages of the partition that pass ``filters`` (all when empty) and the index
            bytes scanned (records of other partitions and filtered-out ones included).
        """
        start = max(offset // INDEX_UNIT, self.min_index)
        if start >= len(self.messages):
            return [], 0
        limit = min(len(self.messages), start + MAX_INDEX_SCAN)
        mine = self.positions.get(partition_id, [])
        out: list[StoredMessage] = []
        size = 0
        end = limit
        for n in range(bisect.bisect_left(mine, start), len(mine)):
            index = mine[n]
            if index >= limit:
                break
            msg = self.messages[index]
            if filters and msg.msg_type not in filters:
                continue
            out.append(msg)
            size += len(msg.payload)
            if len(out) >= max_count or size >= max_bytes:
                end = index + 1
                break
        return out, (end - start) * INDEX_UNIT


@dataclass(slots=True)
class Registration:
    """A consumer's hold on one partition at a broker (§3.2).

    Attributes:
        client_id: the holder.
        last_seen: monotonic time of its last register, heartbeat or fetch.
        filters: the msgType filters it registered with.
        in_flight: index bytes of the last fetched, not yet confirmed batch.
    """

    client_id: str
    last_seen: float
    filters: frozenset[str] = frozenset()
    in_flight: int = 0
