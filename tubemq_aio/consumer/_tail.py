"""The broker side of a tail check: read remembered offsets back, register at the verdict.

The decisions are :class:`~tubemq_aio.protocol.tail_check.TailCheck`'s; this module only
performs its probes (register at an offset, GetMessage without committing) and the final
register (:func:`verify_tail`), and keeps what both consumer sessions (server- and
client-balanced) do around it (:class:`TailGuard`, docs/failures.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from tubemq_aio.consumer._broker import BrokerRpc
from tubemq_aio.consumer._fetcher import FetchEngine
from tubemq_aio.consumer.config import ConsumerConfig
from tubemq_aio.errors import TubeMQError, server_error
from tubemq_aio.protocol.consumer_meta import Partition, PartitionKey, ReadStatus
from tubemq_aio.protocol.consumer_replies import OffsetResponse
from tubemq_aio.protocol.tail_check import TailCheck, TailProbe, TailRecord, TailVerdict, Verdict

__all__ = ["TailGuard", "verify_tail"]

log = logging.getLogger("tubemq_aio.consumer")

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


class TailGuard:
    """The tail check of one consumer (server- or client-balanced): what it read of each
    partition is remembered by the fetch engine (``engine.tails``, one
    :class:`~tubemq_aio.protocol.tail_check.TailRecord` a partition, while
    ``config.tail_check_depth`` > 0), and a partition registered again after it was lost with
    its broker is read back before the group resumes (:meth:`check`, docs/failures.md).

    Args:
        config: the consumer configuration (``tail_check_depth``, ``tail_check_timeout``,
            ``group``, the topics' filters).
        broker: broker RPCs of the consumer.
        engine: its fetch engine; the guard sets its ``tail_depth``.
    """

    __slots__ = ("_broker", "_config", "_engine", "_floor")

    def __init__(self, config: ConsumerConfig, broker: BrokerRpc, engine: FetchEngine) -> None:
        self._config = config
        self._broker = broker
        self._engine = engine
        engine.tail_depth = config.tail_check_depth
        # The lowest offset the broker loaded for a partition whose check has not yet
        # succeeded: a probe moves the group's offset, and a check cut short must not let the
        # next register resume above where the broker first loaded it.
        self._floor: dict[PartitionKey, int] = {}

    def applies(self, key: PartitionKey) -> bool:
        """Whether a register of ``key`` at the group's stored offset must be checked: this
        consumer read it before (and did not give it up since)."""
        return key in self._engine.tails

    def forget(self, key: PartitionKey) -> None:
        """Drop what was read of ``key``: it moved to another reader (the master moved it,
        or the application disconnected it), so the record says nothing about what is read
        when it comes back."""
        self._engine.tails.pop(key, None)
        self._floor.pop(key, None)

    async def check(self, partition: Partition, rsp: OffsetResponse) -> OffsetResponse:
        """``partition`` was registered again at the group's stored offset (``rsp``, a
        successful answer), this consumer having read it before: read back what it read
        (:func:`verify_tail`) and register the group where nothing the broker stored since
        is skipped. Returns the final register answer (which may be a refusal).

        Raises:
            TubeMQError / OSError: a probe or the final register failed on the way (the
                caller counts the register as failed and tries again; the next check starts
                no higher). ``TimeoutError`` after ``tail_check_timeout``.
        """
        key = partition.key
        config, engine = self._config, self._engine
        loaded = min(rsp.curr_offset, self._floor.get(key, rsp.curr_offset))
        self._floor[key] = loaded
        filters = config.filters_of(partition.topic)
        try:
            verdict, final = await verify_tail(
                self._broker,
                partition,
                engine.tails[key],
                loaded,
                filters=filters,
                timeout=config.tail_check_timeout,
            )
        except BaseException:
            await self._restore(partition, filters, loaded)
            raise
        if final is None and loaded >= rsp.curr_offset:
            final = rsp  # no probe: the register before the check stands
        elif final is None:
            # An earlier check cut short left the group's offset above where it was loaded.
            final = await self._broker.register(
                partition, read_status=ReadStatus.NORMAL, filters=filters, curr_offset=loaded
            )
        if not final.success:
            return final
        del self._floor[key]
        if verdict.verdict is Verdict.STALE:
            # Another reader read on past this record after the partition was lost: the
            # record says nothing about the store now; reading starts a new one.
            del engine.tails[key]
            return final
        stats = engine.stats
        stats.tail_checks += 1
        if verdict.verdict is not Verdict.INTACT and verdict.resume_offset < loaded:
            stats.tail_rewinds += 1
            log.warning(
                "group %s partition %s: the broker replaced messages read before (it came back "
                "without its unflushed tail and stored new ones); resuming at offset %d instead "
                "of %d, messages from there on may come again",
                config.group,
                key,
                final.curr_offset,
                loaded,
            )
        if verdict.verdict is Verdict.UNVERIFIED:
            stats.tail_unverified += 1
            log.warning(
                "group %s partition %s: even the oldest remembered offset %d holds another "
                "message; messages the broker replaced below it are not found and may be lost",
                config.group,
                key,
                verdict.resume_offset,
            )
        return final

    async def _restore(self, partition: Partition, filters: Iterable[str], loaded: int) -> None:
        """A check cut short (an error, its timeout, or the consumer closing) may have left
        the group registered at a probe's offset, which lies above ``loaded`` when the broker's
        offset file was older than what this consumer read: register it back at ``loaded``
        (within ``rpc_timeout``; a failure is logged), so the next reader skips nothing.

        A probe that got no answer may still run at the broker: the register back waits until
        it had ``rpc_timeout`` (:class:`~tubemq_aio.consumer._astray.AstrayCalls`), so a late
        probe runs before it, not after (docs/reliability.md)."""
        try:
            await self._broker.astray.settle(partition.key)  # ClientClosedError when closed
            async with asyncio.timeout(self._config.rpc_timeout):
                rsp = await self._broker.register(
                    partition, read_status=ReadStatus.NORMAL, filters=filters, curr_offset=loaded
                )
        except (TubeMQError, OSError) as exc:
            log.info(
                "%s: the register back at %d after a tail check failed: %r",
                partition.key,
                loaded,
                exc,
            )
            return
        if not rsp.success:
            log.info(
                "%s: the register back at %d after a tail check: [%d] %s",
                partition.key,
                loaded,
                rsp.err_code,
                rsp.err_msg,
            )
