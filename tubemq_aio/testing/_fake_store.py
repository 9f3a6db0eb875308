"""The fake cluster's data: topic layout, per-partition message logs and group offsets.

Offsets behave like the broker's index file (docs/protocol/consumer.md §3.2, §4.2): message ``i``
of a partition sits at byte offset ``i * 28``, ``maxOffset`` is ``count * 28``, and a group's
committed offset advances by the bytes of the batch it fetched once that batch is confirmed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from tubemq_aio.errors import TubeMQError
from tubemq_aio.protocol.message import checksum, decode_payload

__all__ = ["INDEX_UNIT", "PartitionLog", "Registration", "StoredMessage", "TopicLayout"]

#: Bytes of one index record: offsets advance by this much per message.
INDEX_UNIT = 28


@dataclass(frozen=True, slots=True)
class TopicLayout:
    """How a topic is spread: ``partitions`` per store, ``stores`` stores, on every broker.

    Partition ids are ``store * 10000 + index`` as on a real broker.
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
    """

    message_id: int
    checksum: int
    payload: bytes
    flag: int
    msg_type: str
    append_time: int


def _msg_type(payload: bytes, flag: int) -> str:
    try:
        return decode_payload(payload, flag, 0).msg_type
    except TubeMQError:
        return ""


@dataclass(slots=True)
class PartitionLog:
    """The messages of one partition of one broker, in append order."""

    messages: list[StoredMessage] = field(default_factory=list)
    min_index: int = 0

    @property
    def min_offset(self) -> int:
        """The smallest readable offset."""
        return self.min_index * INDEX_UNIT

    @property
    def max_offset(self) -> int:
        """The offset the next message will get."""
        return len(self.messages) * INDEX_UNIT

    def append(self, message_id: int, payload: bytes, flag: int) -> tuple[int, StoredMessage]:
        """Store one message; return its offset and the stored form."""
        stored = StoredMessage(
            message_id,
            checksum(payload),
            payload,
            flag,
            _msg_type(payload, flag),
            int(time.time() * 1000),
        )
        offset = self.max_offset
        self.messages.append(stored)
        return offset, stored

    def read(
        self, offset: int, max_count: int, max_bytes: int, filters: frozenset[str]
    ) -> tuple[list[StoredMessage], int]:
        """Up to ``max_count`` messages (about ``max_bytes``) from ``offset``.

        Returns:
            The messages that pass ``filters`` (all when empty) and the index bytes scanned.
        """
        start = offset // INDEX_UNIT
        out: list[StoredMessage] = []
        size = 0
        index = start
        while index < len(self.messages) and len(out) < max_count and size < max_bytes:
            msg = self.messages[index]
            index += 1
            if filters and msg.msg_type not in filters:
                continue
            out.append(msg)
            size += len(msg.payload)
        return out, (index - start) * INDEX_UNIT


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
