"""``positions()`` of a consumer at thousands of partitions: one pass over the held partitions,
reusing the sorted order and the position objects of partitions whose offsets did not change."""

from __future__ import annotations

from tubemq_aio.consumer.batch import PartitionPosition
from tubemq_aio.protocol.consumer_meta import PartitionKey
from tubemq_aio.protocol.partitions import OffsetInfo, PartitionLeases

__all__ = ["PositionsView"]


def _order_key(key: PartitionKey) -> tuple[int, str, int]:
    # Plain tuples: comparing the ordered dataclass keys themselves costs several times more.
    return key.broker_id, key.topic, key.partition_id


class PositionsView:
    """The positions of the partitions held in ``leases``, sorted by partition key.

    Cost per call: one lookup per held partition, plus a sort when partitions were added or
    removed since the last call and a :class:`PartitionPosition` per partition whose offsets
    changed (a partition's offsets record is replaced on every update, so identity tells).
    """

    def __init__(self, leases: PartitionLeases) -> None:
        self._leases = leases
        self._membership = -1
        self._order: list[PartitionKey] = []
        self._cache: dict[PartitionKey, tuple[OffsetInfo, PartitionPosition]] = {}

    def __call__(self) -> dict[str, PartitionPosition]:
        """``partition key text -> position`` of every held partition, sorted by key."""
        leases = self._leases
        if leases.membership != self._membership:
            self._order = sorted(leases.keys(), key=_order_key)
            self._membership = leases.membership
        old, fresh = self._cache, {}
        out: dict[str, PartitionPosition] = {}
        for key in self._order:
            offsets = leases.offset_of(key)
            if offsets is None:  # pragma: no cover - membership tracks every add and remove
                continue
            hit = old.get(key)
            if hit is None or hit[0] is not offsets:
                hit = (offsets, PartitionPosition.of(key.format(), offsets))
            fresh[key] = hit
            out[hit[1].partition_key] = hit[1]
        self._cache = fresh
        return out
