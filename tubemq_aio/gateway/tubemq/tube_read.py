"""What one read of a partition at an offset gave (:class:`TubeRead`), plain data."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tubemq_aio.models import Message

__all__ = ["TubeRead"]


@dataclass(frozen=True, slots=True)
class TubeRead:
    """The outcome of one read at an offset.

    Attributes:
        status: ``ok`` (a batch, possibly empty after filtering), ``empty`` (404: nothing from
            ``start`` on), ``throttled`` (452: the broker limits the group) or ``error``.
        start: where the batch starts (the requested offset, or the broker's clamp of it).
        next: offset right after the batch (== start unless ``ok``).
        max: the partition's max index offset (-1 if the broker did not say).
        messages: the messages kept (a
            :class:`~tubemq_aio.gateway.tubemq.fetched_messages.FetchedMessages` from a
            broker read: raw until a reader decodes them; the answer encodes them raw).
        rpcs: broker RPCs spent.
        batches: broker batches the messages came from (more than one when the read gathered).
        registered: whether a register was needed (the cursor was not at ``start``); a
            register that put the cursor below ``start`` was asked twice, so ``start`` below
            the requested offset means two fresh answers agreed the partition ends there.
        resync: why a claimed cursor turned out wrong ('' if it was right or not claimed).
        wait_ms: how long the broker asks us to leave the partition alone (throttled/empty).
        error: the error code/message text of a failed read.
        from_kept: the read served a batch kept from a read ahead (no broker RPC).
        more: whether the partition may hold messages right after the read's last batch
            (:func:`~tubemq_aio.gateway.tubemq.batch_end.may_continue`; True when not judged):
            a read of the next batch after it is not expected to be answered 404.
    """

    status: str
    start: int
    next: int
    max: int
    messages: Sequence[Message] = ()
    rpcs: int = 0
    batches: int = 0
    registered: bool = False
    resync: str = ""
    wait_ms: int = 0
    error: str = ""
    from_kept: bool = False
    more: bool = True
