"""The gateway's record of batches damaged on the way (:class:`DamagedReads`)."""

from __future__ import annotations

from collections.abc import Sequence

from tubemq_aio.protocol.consumer_replies import RawMessage
from tubemq_aio.protocol.damage import DamagedRead, damage_at_rest, damage_signature

__all__ = ["DamagedReads"]


class DamagedReads:
    """Per partition key, the last read a gateway replica found damaged on the way.

    A read whose batch has a damaged message (checksum mismatch, or an attribute block that
    does not fit) asks :meth:`on_the_way`: damage that two reads of the same offset show alike
    is at rest and is handled by the decode rule (the message is dropped and counted), any
    other damage is on the way and the batch is read again
    (:func:`~tubemq_aio.protocol.damage.damage_at_rest`, docs/protocol/consumer.md §5). One
    entry per partition at most: memory is bounded by the partitions read.
    """

    def __init__(self) -> None:
        self._last: dict[str, DamagedRead] = {}

    def on_the_way(self, key: str, offset: int, batch: Sequence[RawMessage]) -> bool:
        """Whether ``batch``, read at ``offset`` of ``key`` and decoded with damage, was
        damaged on the way (read it again) rather than at rest (deliver what the decode kept).

        Args:
            key: the partition key.
            offset: where the batch starts.
            batch: its messages as received.
        """
        signature = damage_signature(batch)
        if damage_at_rest(self._last.get(key), offset, signature):
            self._last.pop(key, None)
            return False
        self._last[key] = (offset, signature)
        return True
