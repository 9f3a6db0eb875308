"""Fetch loops filling a bounded buffer of batches, and the ack/nack path back to the broker.

Backpressure (style principle 4): a fetcher reserves a buffer slot *before* it takes a partition
lease, and the slot is freed only when the application takes the batch out of the buffer. With
``max_prefetch_batches`` slots taken, no fetch is sent.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from tubemq_aio.consumer._broker import BrokerRpc
from tubemq_aio.consumer._decode import decode_raw_messages
from tubemq_aio.consumer.batch import ConsumerStats, MessageBatch, PartitionPosition, _BatchGroup
from tubemq_aio.consumer.config import ConsumerConfig
from tubemq_aio.errors import ClientClosedError, InvalidConfirmContextError, TubeMQError
from tubemq_aio.models import Message
from tubemq_aio.protocol.consumer_meta import PartitionKey
from tubemq_aio.protocol.consumer_replies import GetMessageResponse
from tubemq_aio.protocol.damage import (
    DamagedRead,
    damage_at_rest,
    damage_signature,
    reread_wait_ms,
)
from tubemq_aio.protocol.flow_control import (
    FetchAnswer,
    FlowControlState,
    PartitionFlow,
    gmt8_hhmm,
)
from tubemq_aio.protocol.idle_backoff import IdleBackoff
from tubemq_aio.protocol.partitions import Lease, PartitionLeases, fetch_error_reaction
from tubemq_aio.protocol.retry import FETCH_RETRY, RetryWindow
from tubemq_aio.protocol.tail_check import TailRecord

__all__ = ["FetchEngine", "Fetched"]

log = logging.getLogger("tubemq_aio.consumer")

#: Wait after a fetch that failed on a bug of ours. Java releases at once after a local error
#: (docs/protocol/consumer.md §4.3); a broker failing is paced by
#: :data:`~tubemq_aio.protocol.retry.FETCH_RETRY` instead.
_RPC_FAILURE_WAIT_MS = 200

#: Longest sleep of an idle fetcher between checks (it is also woken by lease changes).
_IDLE_POLL = 1.0


@dataclass(slots=True)
class Fetched:
    """One successful fetch waiting in the buffer or held by the application."""

    lease: Lease
    messages: list[Message]
    wait_ms: int
    received_at: float
    position: PartitionPosition
    body_bytes: int = 0
    handed: int = 0
    group: _BatchGroup | None = field(default=None)


class FetchEngine:
    """Fetch loops, the prefetch buffer, and settling of batches.

    Args:
        config: the consumer's configuration.
        leases: the partition lease table (shared with the session).
        broker: broker RPCs.
        flow: flow-control rules from the master.
        stats: counters to update.
        clock: monotonic seconds.
    """

    def __init__(
        self,
        config: ConsumerConfig,
        leases: PartitionLeases,
        broker: BrokerRpc,
        flow: FlowControlState,
        stats: ConsumerStats,
        clock: Callable[[], float],
    ) -> None:
        self.config = config
        self.leases = leases
        self.broker = broker
        self.flow = flow
        self.stats = stats
        self.clock = clock
        self.changed = asyncio.Event()
        #: The time each idle fetcher wakes by itself (see :meth:`notify`).
        self._asleep: dict[object, float] = {}
        self._flows: dict[PartitionKey, PartitionFlow] = {}
        self._idle = IdleBackoff(_ms(config.msg_not_found_wait), _ms(config.idle_ceiling))
        # Per partition: the offset and damage of its last damaged read, and the re-reads in a row.
        self._corrupt_reads: dict[PartitionKey, tuple[DamagedRead, int]] = {}
        # Partition -> its fetches failing in a row (broker unreachable or answering 5xx).
        self._failing: dict[PartitionKey, RetryWindow] = {}
        #: Called with the keys of partitions this engine stops fetching on its own (the broker
        #: answered 411/412/415, or fetches kept failing for a whole ``heartbeat_interval``):
        #: the session drops them as a failed broker heartbeat does. None: the engine only
        #: removes them from the lease table.
        self.on_broken: Callable[[list[PartitionKey]], None] | None = None
        #: Levels of the :class:`TailRecord` kept per partition read (0: none kept); the
        #: server-balanced session sets it from ``tail_check_depth``.
        self.tail_depth = 0
        #: What was read of each partition (while ``tail_depth``), for the session's tail check
        #: after the partition's broker was lost (docs/failures.md); the session removes a
        #: partition's record when the master moves it away.
        self.tails: dict[PartitionKey, TailRecord] = {}
        self._buffer: deque[Fetched] = deque()
        self._slots = asyncio.Semaphore(config.max_prefetch_batches)
        self._ready = asyncio.Event()
        self.closed = False

    def __repr__(self) -> str:
        return f"<FetchEngine buffered={len(self._buffer)} leases={self.leases!r}>"

    @property
    def buffered(self) -> int:
        """Batches fetched but not yet handed to the application."""
        return len(self._buffer)

    def notify(self, ready_at: float | None = None) -> None:
        """Wake idle fetchers: the lease table changed.

        ``ready_at``: the change is a partition first handed out at that :attr:`clock` time
        (added with a delay); the fetchers are woken only when none of the idle ones wakes by
        then anyway (connecting thousands of partitions at their end woke every fetcher for
        each, to find nothing ready).
        """
        if ready_at is not None and any(t <= ready_at for t in self._asleep.values()):
            return
        self.changed.set()

    def count_empty(self, key: PartitionKey) -> None:
        """Count a register answer that showed ``key`` at its end as its first "no new data"
        answer: the idle back-off goes on from there (the first fetch, ``msg_not_found_wait``
        later, that finds nothing rests the partition twice as long), as if the fetch the
        register made pointless had been sent."""
        flow = self._flows.get(key)
        if flow is None:
            flow = self._flows[key] = PartitionFlow()
        flow.zero_count = 1

    def close(self) -> None:
        """Wake every waiter; later ``get`` calls raise :class:`ClientClosedError`."""
        self.closed = True
        self._ready.set()
        self.changed.set()

    def forget(self, keys: Iterable[PartitionKey]) -> None:
        """Drop buffered batches and flow state of partitions leaving this consumer."""
        wanted = set(keys)
        for fetched in [f for f in self._buffer if f.lease.key in wanted]:
            self._buffer.remove(fetched)
            self.stats.expired += 1
            self.leases.release(
                fetched.lease.key, fetched.lease.token, self.clock(), consumed=False
            )
            if fetched.group is None:  # not handed out at all: it still holds its slot
                self._slots.release()
        for key in wanted:
            self._flows.pop(key, None)
            self._failing.pop(key, None)
        self.broker.astray.prune()
        self.notify()

    # ---- fetch loop --------------------------------------------------------------------------

    async def run(self) -> None:
        """One fetch loop: reserve a slot, take a lease, fetch, buffer; until cancelled."""
        while True:
            await self._slots.acquire()
            kept = False
            try:
                lease = await self._next_lease()
                try:
                    kept = await self._fetch(lease)
                except Exception:  # a bug must not stop this loop or strand the lease
                    log.exception("fetch of %s failed", lease.key)
                    self.leases.release(
                        lease.key, lease.token, self.clock(), wait_ms=_RPC_FAILURE_WAIT_MS
                    )
            finally:
                if not kept:
                    self._slots.release()

    async def _next_lease(self) -> Lease:
        while True:
            self.changed.clear()
            now = self.clock()
            lease = self.leases.take(now)
            if lease is not None:
                return lease
            ready_at = self.leases.next_ready_at()
            wait = _IDLE_POLL if ready_at is None else min(_IDLE_POLL, max(0.0, ready_at - now))
            sleeper = object()
            self._asleep[sleeper] = now + wait
            try:
                async with asyncio.timeout(wait):
                    await self.changed.wait()
            except TimeoutError:
                pass
            finally:
                del self._asleep[sleeper]

    async def _fetch(self, lease: Lease) -> bool:
        """Fetch one batch for ``lease``; True if it went into the buffer (keeping the slot)."""
        key = lease.key
        # A call of the partition that got no answer may still run at the broker
        # (BrokerRpc notes it, docs/reliability.md): not read until it had ``rpc_timeout``.
        # The broker keeps one batch in flight per group and partition, whichever connection
        # read it, and runs a request whenever it arrives (docs/protocol/consumer.md §4.2): a
        # GetMessage with the commit flag that ran after a later read would commit the batch
        # that read delivered and read the next one, which the following commit would commit
        # unseen. The lease rests instead of a fetch slot waiting in the call; the flag is kept
        # (a failed fetch released it without the flag: the next read starts at the committed
        # offset).
        rest = self.broker.astray.rest(key)
        if rest > 0:
            wait_ms = math.ceil(rest * 1000)
            consumed = lease.last_pack_consumed
            self.leases.release(key, lease.token, self.clock(), wait_ms=wait_ms, consumed=consumed)
            return False
        try:
            rsp = await self.broker.get_message(
                lease.partition,
                last_pack_consumed=lease.last_pack_consumed,
                esc_flow_ctrl=self.flow.esc_flow_ctrl(self.clock(), gmt8_hhmm(time.time())),
            )
        except (TubeMQError, OSError) as exc:
            self.stats.fetch_errors += 1
            # Cancellation mid-fetch leaves the lease in use: close removes it, rolled back.
            log.debug("fetch of %s failed: %r", key, exc)
            pause = self._broker_failed(lease)
            if pause is not None:
                pause = max(pause, self.broker.astray.rest(key))
                self.leases.release(
                    key, lease.token, self.clock(), wait_ms=_ms(pause), consumed=False
                )
            return False
        self.stats.fetches += 1
        if self._failing and (rsp.success or rsp.err_code < 500):
            self._failing.pop(key, None)  # the broker serves the partition again
        now = self.clock()
        pflow = self._flows.get(key)
        if pflow is None:
            pflow = self._flows[key] = PartitionFlow()
        hhmm = gmt8_hhmm(time.time())
        filters = self.config.filters_of(key.topic)
        if not rsp.success:
            return self._on_error(lease, rsp, pflow, now, hhmm, filters)
        self.leases.update_offsets(key, now, curr_offset=rsp.curr_offset, max_offset=rsp.max_offset)
        damaged = self.stats.crc_mismatches + self.stats.decode_errors
        messages, body_bytes = self._decode(lease, rsp, filters)
        damaged = self.stats.crc_mismatches + self.stats.decode_errors - damaged
        if damaged:
            wait = self._read_again(key, rsp.curr_offset, rsp)
            if wait is not None:
                # Not committed (consumed=False): the broker serves the same batch again.
                self.leases.release(key, lease.token, now, wait_ms=wait, consumed=False)
                return False
        elif self._corrupt_reads:
            self._corrupt_reads.pop(key, None)
        if self.tail_depth and rsp.messages:
            self._remember(key, rsp)
        answer = FetchAnswer(
            200,
            body_bytes,
            esc_flow_ctrl=rsp.esc_flow_ctrl,
            curr_data_dlt=rsp.curr_data_dlt,
            require_slow=rsp.require_slow,
        )
        wait_ms = pflow.wait_after_fetch(
            self.flow, answer, now=now, hhmm=hhmm, filter_consume=bool(filters)
        )
        log.debug(
            "fetched %s: %d message(s), %d filtered in, wait %d ms",
            key,
            len(rsp.messages),
            len(messages),
            wait_ms,
        )
        if not messages:
            # Nothing for the application (all filtered, or an empty success): confirm locally,
            # the next fetch commits it (§4.2 "a success may contain zero messages").
            self.leases.release(key, lease.token, now, wait_ms=wait_ms, consumed=True)
            return False
        position = PartitionPosition.of(key.format(), self.leases.offset_of(key))
        self._buffer.append(Fetched(lease, messages, wait_ms, now, position, body_bytes))
        self.stats.batches += 1
        self._ready.set()
        return True

    def _remember(self, key: PartitionKey, rsp: GetMessageResponse) -> None:
        """Add a fetched batch to ``key``'s :class:`TailRecord` (per batch, not per message)."""
        record = self.tails.get(key)
        if record is None:
            record = self.tails[key] = TailRecord(self.tail_depth)
        raw = rsp.messages
        record.add(rsp.curr_offset, raw[0].message_id, raw[-1].message_id, len(raw))

    def _broker_failed(self, lease: Lease, at_least: float = 0.0) -> float | None:
        """Count a failed fetch of ``lease`` (no answer, or a 5xx one); return the pause before
        its partition is fetched again, or None when it was given up.

        Fetches failing in a row are paced by :data:`~tubemq_aio.protocol.retry.FETCH_RETRY`
        (0.2 s doubling to 3.2 s, at least the connection's own back-off) for at most
        ``heartbeat_interval`` from the first failure; an answer from the broker ends the
        streak. Past that the partition is given up (:attr:`on_broken`), as a failed broker
        heartbeat gives up all of that broker's partitions (docs/protocol/consumer.md §3.3):
        the master hands it out again once the broker answers.
        """
        key = lease.key
        window = self._failing.get(key)
        if window is None:
            window = self._failing[key] = RetryWindow(FETCH_RETRY, self.config.heartbeat_interval)
        known = max(at_least, self.broker.rpc.retry_in(lease.partition.broker))
        pause = window.failed(self.clock(), random.random(), known)
        if pause is not None:
            return pause
        log.warning(
            "fetches of %s failed for %.0f s: the partition is given up", key, window.budget
        )
        self._lose(key)
        return None

    def _lose(self, key: PartitionKey) -> None:
        """``key`` is no longer fetched here (the broker forgot us, or kept failing): hand it
        to :attr:`on_broken`, so that the session gets it back (a client-balanced consumer
        connects it again; the server-balanced one reports it to the master at its next
        heartbeat) instead of holding a partition nobody fetches."""
        self._failing.pop(key, None)
        self._flows.pop(key, None)
        if self.on_broken is not None:
            self.on_broken([key])
        else:
            self.leases.remove(key)
        self.notify()

    def _read_again(self, key: PartitionKey, offset: int, rsp: GetMessageResponse) -> int | None:
        """The rest (ms) before a batch with a damaged message (checksum mismatch, or an
        attribute block that does not fit) is fetched again, or None to deliver it.

        Damage is usually corruption on the way, which a second read does not repeat;
        dropping the message and confirming the batch (what the Java client does) would lose it
        for the group. Only damage that two reads of the same offset show alike (at rest,
        :func:`~tubemq_aio.protocol.damage.damage_at_rest`) goes on to the ``deliver_corrupt``
        rule: no number of reads damaged on the way in a row is taken for damage at rest.
        """
        signature = damage_signature(rsp.messages)
        last, rereads = self._corrupt_reads.get(key, (None, 0))
        if damage_at_rest(last, offset, signature):
            self._corrupt_reads.pop(key, None)
            return None
        rereads += 1
        self._corrupt_reads[key] = ((offset, signature), rereads)
        self.stats.crc_refetches += 1
        log.warning("checksum mismatch in %s at offset %d: reading the batch again", key, offset)
        return reread_wait_ms(rereads)

    def _on_error(
        self,
        lease: Lease,
        rsp: GetMessageResponse,
        pflow: PartitionFlow,
        now: float,
        hhmm: int,
        filters: frozenset[str],
    ) -> bool:
        key = lease.key
        reaction = fetch_error_reaction(
            rsp.err_code,
            min_limit_time_ms=rsp.min_limit_time,
            msg_not_found_wait_ms=self._idle.base_ms,
        )
        if reaction.remove:
            # 411/412/415: not ours at the broker any more; drop locally, the master learns it
            # from the next subscribe report (§4.3).
            log.info("partition %s dropped after fetch error %d", key, rsp.err_code)
            self._lose(key)
            return False
        log.debug("fetch of %s: [%d] %s", key, rsp.err_code, rsp.err_msg)
        base_wait_ms = reaction.wait_ms
        if rsp.err_code >= 500:  # the broker cannot serve it now: paced like no answer
            pause = self._broker_failed(lease, at_least=reaction.wait_ms / 1000.0)
            if pause is None:
                return False
            base_wait_ms = _ms(pause)
        wait_ms = pflow.wait_after_fetch(
            self.flow,
            FetchAnswer(rsp.err_code, base_wait_ms=base_wait_ms),
            now=now,
            hhmm=hhmm,
            filter_consume=bool(filters),
            idle=self._idle,
        )
        if rsp.err_code == 404:
            self.stats.not_found += 1
            self.stats.not_found_wait_ms += wait_ms
            self.leases.mark_at_end(key, now)
        elif rsp.err_code == 452:
            self.stats.speed_limited += 1
            self.stats.speed_limit_wait_ms += wait_ms
        self.leases.release(key, lease.token, now, wait_ms=wait_ms, consumed=False)
        return False

    def _decode(
        self, lease: Lease, rsp: GetMessageResponse, filters: frozenset[str]
    ) -> tuple[list[Message], int]:
        return decode_raw_messages(
            rsp.messages,
            topic=lease.key.topic,
            partition_key=lease.key.format(),
            filters=filters,
            counters=self.stats,
            deliver_corrupt=self.config.deliver_corrupt,
        )

    # ---- handing batches out -----------------------------------------------------------------

    async def get(self, max_records: int | None, timeout: float | None) -> MessageBatch:
        """Take the next batch (at most ``max_records`` messages) or an empty one on timeout.

        Raises:
            ClientClosedError: the consumer is closed.
        """
        deadline = None if timeout is None else self.clock() + timeout
        while True:
            if self.closed:
                raise ClientClosedError("the consumer is closed")
            while self._buffer:
                head = self._buffer[0]
                if not self.leases.is_current(head.lease.key, head.lease.token):
                    # Reclaimed while buffered (confirm timeout, partition moved): drop it.
                    self._buffer.popleft()
                    self.stats.expired += 1
                    if head.group is None:  # never handed out: it still holds its slot
                        self._slots.release()
                    continue
                return self._take_part(head, max_records)
            self._ready.clear()
            remaining = None if deadline is None else deadline - self.clock()
            if remaining is not None and remaining <= 0:
                return MessageBatch()
            try:
                async with asyncio.timeout(remaining):
                    await self._ready.wait()
            except TimeoutError:
                return MessageBatch()

    def _take_part(self, head: Fetched, max_records: int | None) -> MessageBatch:
        if head.group is None:
            head.group = _BatchGroup(self, head)
            # The slot is freed as soon as the batch starts leaving the buffer.
            self._slots.release()
        start = head.handed
        end = (
            len(head.messages)
            if max_records is None
            else min(len(head.messages), start + max_records)
        )
        head.handed = end
        head.group.add_part()
        if end >= len(head.messages):
            head.group.all_handed = True
            self._buffer.popleft()
        whole = start == 0 and end == len(head.messages)
        part = head.messages if whole else head.messages[start:end]
        self.stats.messages += len(part)
        self.stats.bytes += head.body_bytes if whole else sum(len(m.body) for m in part)
        return MessageBatch._leased(
            part,
            topic=head.lease.key.topic,
            partition_key=head.lease.key.format(),
            position=head.position,
            group=head.group,
        )

    def holds(self, fetched: object) -> bool:
        """Whether the lease of a fetched batch is still held."""
        assert isinstance(fetched, Fetched)
        return self.leases.is_current(fetched.lease.key, fetched.lease.token)

    def give_back(self, batch: MessageBatch, used: int) -> MessageBatch | None:
        """Put the messages of ``batch`` after its first ``used`` back at the head of the
        buffer (see :meth:`MessageBatch.give_back`); ``batch`` must be the last part handed
        out of its broker batch (``async for`` takes whole remainders).

        Returns:
            The batch of the kept messages (None if none), or ``batch`` itself when the rest
            could not be returned (lease gone, consumer closed, not the last part).
        """
        group = batch._group
        assert group is not None
        fetched = group.fetched
        rest = len(batch) - used
        returnable = (
            isinstance(fetched, Fetched)
            and not self.closed
            and group.all_handed
            and fetched.handed == len(fetched.messages)
            and self.holds(fetched)
        )
        if not returnable or rest <= 0:
            return batch  # not returned: the caller settles it as a whole
        assert isinstance(fetched, Fetched)
        batch._retire()
        fetched.handed -= rest
        group.all_handed = False
        self._buffer.appendleft(fetched)
        self.stats.messages -= rest
        self.stats.bytes -= sum(len(m.body) for m in batch.messages[used:])
        self._ready.set()
        if used == 0:
            group.drop_part()
            return None
        return MessageBatch._leased(
            batch.messages[:used],
            topic=batch.topic,
            partition_key=batch.partition_key,
            position=batch.position,
            group=group,
        )

    async def _settle(self, fetched: object, consumed: bool) -> bool:
        """Ack (``consumed``) or nack a fetched batch: commit RPC (unless local), then release
        the lease with the flow-control wait minus the time since the response (§6.2, §7.3).

        The lease is released even when this call is cancelled during the commit RPC: the
        consumed flag then rides on the next fetch of the partition.
        """
        assert isinstance(fetched, Fetched)
        lease = fetched.lease
        key = lease.key
        if not self.leases.is_current(key, lease.token):
            return False
        released = False
        try:
            if not self.config.confirm_in_local:
                await self._commit(fetched, consumed)
        finally:
            released = self._release_settled(fetched, consumed)
        return released

    async def _commit(self, fetched: Fetched, consumed: bool) -> None:
        key = fetched.lease.key
        try:
            rsp = await self.broker.commit(fetched.lease.partition, consumed=consumed)
        except (TubeMQError, OSError) as exc:
            # The flag still rides on the next fetch or the unregister.
            log.warning("commit of %s failed: %r", key, exc)
            return
        if rsp.success:
            self.leases.update_offsets(
                key, self.clock(), curr_offset=rsp.curr_offset, max_offset=rsp.max_offset
            )
            if consumed and (record := self.tails.get(key)) is not None:
                record.note_end(rsp.curr_offset)  # the offset after the batch
        else:
            log.warning("commit of %s: [%d] %s", key, rsp.err_code, rsp.err_msg)

    def _release_settled(self, fetched: Fetched, consumed: bool) -> bool:
        now = self.clock()
        elapsed_ms = int((now - fetched.received_at) * 1000)
        try:
            self.leases.confirm(
                fetched.lease.confirm_context,
                consumed,
                now,
                wait_ms=max(0, fetched.wait_ms - elapsed_ms),
            )
        except InvalidConfirmContextError:
            return False
        if consumed:
            self.stats.acks += 1
        else:
            self.stats.nacks += 1
        self.notify()
        return True


def _ms(seconds: float) -> int:
    """A configured wait in whole milliseconds."""
    return round(seconds * 1000)
