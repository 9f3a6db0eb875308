"""Carrying out the master's "consume from the max offset" control (client-balanced consumers).

The decision is :class:`~tubemq_aio.protocol.max_offset_ctrl.MaxOffsetControl`'s; this module
performs it: every partition the consumer fetches is registered again at its broker with its
last known max offset as the bootstrap offset, as Java's ``resetCsmFromMaxOffset`` does
(docs/protocol/consumer.md §8.2); batches of it fetched but not yet delivered are dropped
(they come before the new position). A partition the broker then says another client holds (410)
or refuses on authorization (415) is dropped, like a lost partition.
"""

from __future__ import annotations

import logging

from tubemq_aio.consumer._session_base import SessionBase
from tubemq_aio.errors import TubeMQError
from tubemq_aio.protocol.consumer_meta import PartitionKey, ReadStatus

__all__ = ["reset_to_max_offsets"]

log = logging.getLogger("tubemq_aio.consumer")

#: Broker answers after which the partition is no longer this client's (Java: 410, 415).
_DROP_CODES = frozenset({410, 415})


async def reset_to_max_offsets(
    session: SessionBase,
) -> tuple[list[PartitionKey], list[PartitionKey]]:
    """Register every fetched partition again at its last known max offset.

    A partition whose max offset is unknown (< 0) is left where it is; a failed register is
    logged and the partition kept, except for the codes in ``_DROP_CODES``.

    Returns:
        The partitions moved to their max offset, and those the caller must drop as lost.
    """
    moved: list[PartitionKey] = []
    dropped: list[PartitionKey] = []
    known = session.leases.offsets()
    for partitions in session.leases.by_broker().values():
        for partition in partitions:
            key = partition.key
            offsets = known.get(key)
            if offsets is None or offsets.max_offset < 0:
                continue
            session.engine.forget([key])  # batches fetched before the reset are not delivered
            try:
                rsp = await session.broker.register(
                    partition,
                    read_status=ReadStatus.NORMAL,
                    filters=session.config.filters_of(key.topic),
                    curr_offset=offsets.max_offset,
                )
            except TubeMQError as exc:
                log.warning("reset of %s to its max offset failed: %r", key, exc)
                continue
            if rsp.success:
                session.leases.update_offsets(
                    key, session.clock(), curr_offset=rsp.curr_offset, max_offset=rsp.max_offset
                )
                moved.append(key)
                log.info("master control: %s consumes from its max offset %d", key, rsp.curr_offset)
            elif rsp.err_code in _DROP_CODES:
                dropped.append(key)
            else:
                log.warning(
                    "reset of %s to its max offset: [%d] %s", key, rsp.err_code, rsp.err_msg
                )
    return moved, dropped
