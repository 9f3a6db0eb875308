"""The batches a replica read ahead and keeps for each partition's next fetch (bounded).

After a fetch's answer the replica reads the partition's next batch
(:mod:`~tubemq_aio.gateway.engine.read_ahead_driver`; ``docs/gateway.md``, "The consume
path"). That batch waits here,
under the :class:`~tubemq_aio.gateway.leases.model.KeptFence` that Redis also holds, until the
partition's next fetch on this replica takes it out: served when the fence the acquire handed
out matches, dropped otherwise. At most one batch per (group, partition) and at most
``limit_bytes`` of payload in all; a batch that does not fit is not kept (the broker's cursor
stays where Redis says, and the next read fetches it again). A batch's payload bytes are summed
once, by whoever builds its :class:`KeptBatch` (the read-ahead asks :meth:`KeptBatches.fits`
with that sum, then keeps the batch with it).
"""

from __future__ import annotations

import dataclasses

from tubemq_aio.gateway.config.limits import MAX_KEPT_BATCH_BYTES
from tubemq_aio.gateway.leases.model import KeptFence
from tubemq_aio.gateway.tubemq.next_batch import ReadConnection
from tubemq_aio.protocol.consumer_replies import RawMessage

__all__ = ["KeptBatch", "KeptBatches"]


@dataclasses.dataclass(frozen=True, slots=True)
class KeptBatch:
    """One batch read ahead, screened (checksums, filters) but not decoded.

    Attributes:
        fence: its fence (``fence.start`` is the offset it starts at).
        messages: the batch's messages as the broker sent them, screened (non-empty).
        size: their payload bytes (:func:`payload_bytes` of ``messages``, summed once by
            whoever builds the batch).
        max_offset: the partition's max offset the answer that brought them reported.
        end: where the batch ends (the commit that followed its read said so; -1: unknown,
            learned when it is served).
        read_on: the broker connection it was read on: it is served only while that one is
            open (None: not checked).
    """

    fence: KeptFence
    messages: tuple[RawMessage, ...]
    size: int
    max_offset: int = -1
    end: int = -1
    read_on: ReadConnection | None = None

    def servable(self) -> bool:
        """Whether the connection it was read on (if known) is still open: a broker restart
        closes it, and the broker may then have lost the batch and reuse its offsets."""
        return self.read_on is None or not self.read_on.is_closed


class KeptBatches:
    """The kept batches of one replica.

    Args:
        limit_bytes: payload bytes kept at most over every partition, from 0 to
            ``MAX_KEPT_BATCH_BYTES`` (1 TiB); 0: nothing is kept, and nothing is read after
            a fetch's answer.

    Raises:
        TypeError: ``limit_bytes`` is not an int (a bool is not one).
        ValueError: ``limit_bytes`` is outside its range.
    """

    def __init__(self, limit_bytes: int) -> None:
        if isinstance(limit_bytes, bool) or not isinstance(limit_bytes, int):
            raise TypeError(f"limit_bytes must be an int, got {type(limit_bytes).__name__}")
        if not 0 <= limit_bytes <= MAX_KEPT_BATCH_BYTES:
            raise ValueError(
                f"limit_bytes must be in [0, {MAX_KEPT_BATCH_BYTES}], got {limit_bytes}"
            )
        self.limit_bytes = limit_bytes
        self._held: dict[tuple[str, str], KeptBatch] = {}
        self._bytes = 0

    @property
    def enabled(self) -> bool:
        """Whether fetches read ahead (``limit_bytes`` > 0)."""
        return self.limit_bytes > 0

    @property
    def held_bytes(self) -> int:
        """Payload bytes kept now."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._held)

    def take(self, group: str, partition_key: str) -> KeptBatch | None:
        """Remove and return the batch kept for the partition (None: none)."""
        batch = self._held.pop((group, partition_key), None)
        if batch is not None:
            self._bytes -= batch.size
        return batch

    def put(self, group: str, partition_key: str, batch: KeptBatch) -> bool:
        """Keep ``batch`` (non-empty) for the partition, replacing any batch kept for it; False
        (nothing kept) when it would pass ``limit_bytes``.

        Raises:
            TypeError: ``batch`` is not a :class:`KeptBatch`.
            ValueError: its ``size`` is negative.
        """
        if not isinstance(batch, KeptBatch):
            raise TypeError(f"batch must be a KeptBatch, got {type(batch).__name__}")
        if batch.size < 0:
            raise ValueError(f"a kept batch's size must be >= 0, got {batch.size}")
        self.take(group, partition_key)
        if not batch.messages or self._bytes + batch.size > self.limit_bytes:
            return False
        self._held[(group, partition_key)] = batch
        self._bytes += batch.size
        return True

    def discard(self, group: str, partition_key: str, batch: KeptBatch) -> None:
        """Drop ``batch`` if it is still the one kept for the partition (a read-ahead whose
        end in Redis did not go through takes back what it kept)."""
        if self._held.get((group, partition_key)) is batch:
            self.take(group, partition_key)

    def fits(self, size: int) -> bool:
        """Whether a batch of ``size`` payload bytes (:func:`payload_bytes` of its messages)
        could be kept now (the total stays within ``limit_bytes``)."""
        return self._bytes + size <= self.limit_bytes

    def clear(self) -> None:
        """Drop every kept batch (the replica closes)."""
        self._held.clear()
        self._bytes = 0
