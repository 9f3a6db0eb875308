"""A broker register answer that shows the broker lost the tail of a partition's store.

A broker killed before it flushed comes back without its newest messages: its store ends lower
than before and hands those offsets to new messages, while a group's stored offset may still
point beyond the new end. A register without an offset loads the stored offset as it is (only a
requested offset is clamped to ``[min, max]``), and the answer reports it as ``currOffset``
next to the store's ``maxOffset``. A group that resumed there would skip every new message
written below it, so the client registers again with the store's end as the requested offset
(docs/protocol/consumer.md §3.2). Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LostTail", "lost_tail"]


@dataclass(frozen=True, slots=True)
class LostTail:
    """A stored offset beyond the end of its partition's store.

    Attributes:
        stored_offset: the group's offset the broker loaded (index bytes).
        end_offset: the store's end now (``maxOffset``, index bytes, ``< stored_offset``): the
            offset to register at instead.
    """

    stored_offset: int
    end_offset: int


def lost_tail(curr_offset: int, max_offset: int) -> LostTail | None:
    """Whether a successful register answer shows a lost tail (docs/protocol/consumer.md §3.2).

    Args:
        curr_offset: the answer's ``currOffset``: where the broker starts the group.
        max_offset: the answer's ``maxOffset``: the store's end (negative: not reported).

    Returns:
        The offsets when ``curr_offset > max_offset >= 0``, else None. A register with a
        requested offset (or ``readStatus`` 2) is clamped by the broker and never shows it; a
        broker answering the flushed-files maximum (a consume rule ``qryPriorityId <= 1``)
        could show it for data still in memory, and moving back then only re-reads messages.
    """
    if 0 <= max_offset < curr_offset:
        return LostTail(curr_offset, max_offset)
    return None
