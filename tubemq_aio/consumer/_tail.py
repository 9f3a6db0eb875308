"""The broker side of a tail check: read remembered offsets back, register at the verdict.

The decisions are :class:`~tubemq_aio.protocol.tail_check.TailCheck`'s; this module only
performs its probes (register at an offset, GetMessage without committing) and the final
register (docs/failures.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from tubemq_aio.consumer._broker import BrokerRpc
from tubemq_aio.errors import server_error
from tubemq_aio.protocol.consumer_meta import Partition, ReadStatus
from tubemq_aio.protocol.consumer_replies import OffsetResponse
from tubemq_aio.protocol.tail_check import TailCheck, TailProbe, TailRecord, TailVerdict

__all__ = ["verify_tail"]

#: GetMessage calls one probe may make to read the ids it wants (a broker's first read after a
#: register can be shorter than a batch).
_READS_PER_PROBE = 8


async def verify_tail(
    broker: BrokerRpc,
    partition: Partition,
    record: TailRecord,
    loaded: int,
    *,
    filters: Iterable[str],
    timeout: float,
) -> tuple[TailVerdict, OffsetResponse | None]:
    """Check ``record`` against what ``partition``'s broker stores now and register the group
    at the verdict's offset (``readStatus`` 0, so the broker takes it).

    Each probe registers the group at a remembered offset and reads from there without
    committing; the final register sets the group's offset, so the probes leave nothing behind
    once it succeeded.

    Args:
        broker: broker RPCs of this consumer.
        partition: the partition, registered at its broker by this consumer.
        record: what this consumer read of it.
        loaded: the group offset the broker loaded at the register before the check (index
            bytes); the group never resumes above it.
        filters: the topic's ``msgType`` filters (the same as every register of it).
        timeout: seconds for all probes and the final register.

    Returns:
        The verdict and the final register answer (which may be a refusal), or None in its
        place when the check made no probe (:attr:`~tubemq_aio.protocol.tail_check.Verdict.STALE`:
        the register before it stands).

    Raises:
        ServerError: the broker refused a probe (a read answer other than data or 404).
        TimeoutError: ``timeout`` passed.
        TubeMQError / OSError: a request failed on the way.
    """
    filters = tuple(filters)
    check = TailCheck(record, loaded)
    if check.verdict is not None:
        return check.verdict, None
    async with asyncio.timeout(timeout):
        while (probe := check.next_probe()) is not None:
            served, ids = await _read_back(broker, partition, probe, filters)
            check.on_read(served, ids)
        verdict = check.verdict
        assert verdict is not None
        final = await broker.register(
            partition,
            read_status=ReadStatus.NORMAL,
            filters=filters,
            curr_offset=verdict.resume_offset,
        )
    return verdict, final


async def _read_back(
    broker: BrokerRpc, partition: Partition, probe: TailProbe, filters: tuple[str, ...]
) -> tuple[int, list[int]]:
    """Register at ``probe.offset`` and read up to ``probe.want`` message ids from there;
    returns the offset the broker registered at and the ids (fewer when the store has no
    more)."""
    reg = await broker.register(
        partition, read_status=ReadStatus.NORMAL, filters=filters, curr_offset=probe.offset
    )
    if not reg.success:
        raise server_error(reg.err_code, reg.err_msg)
    ids: list[int] = []
    if probe.want <= 0:
        return reg.curr_offset, ids
    consumed = False  # the first read commits nothing; later ones move on past the last
    for _ in range(_READS_PER_PROBE):
        got = await broker.get_message(partition, last_pack_consumed=consumed, esc_flow_ctrl=False)
        if not got.success:
            if got.err_code == 404:  # nothing (more) there
                break
            raise server_error(got.err_code, got.err_msg)
        if not got.messages:
            break
        ids.extend(m.message_id for m in got.messages)
        if len(ids) >= probe.want:
            break
        consumed = True
    return reg.curr_offset, ids
