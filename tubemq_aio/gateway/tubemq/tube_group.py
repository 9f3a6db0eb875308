"""TubeMQ side of the gateway: one client-balanced session per group with a shared consumer id.

Every replica of a deployment registers the SAME consumer id for a group
(``<group>_gw-<deployment>-Balance-tubemq-aio-<version>``), so the broker sees one consumer and
any replica may read any partition; the Redis lease is the only mutual exclusion. The session is
the SDK's :class:`~tubemq_aio.consumer.ClientBalancedConsumer` session (master register and
heartbeat, partition metadata, broker register at an offset, GetMessage, CommitOffset); this
module only fixes the id, never unregisters or closes it at the master (another replica still
uses it), and reads one batch at a known offset in 2 broker RPCs when the broker cursor is
already there, 3 otherwise; the read of a partition's next batch after a fetch's answer is
:meth:`TubeGroup.read_next` (``docs/gateway.md``, "The consume path").
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, tzinfo
from typing import Any, TypeVar

from tubemq_aio.consumer.batch import ConsumerStats
from tubemq_aio.consumer.client_balanced import ClientBalancedConsumer
from tubemq_aio.consumer.toolkit import (
    ClientBalanceSession,
    SharedIdConsumer,
    resolve_partition,
)
from tubemq_aio.errors import (
    ClientClosedError,
    ConnectError,
    RequestNotSentError,
    TubeMQError,
    server_error,
)
from tubemq_aio.gateway.tubemq.batch_end import may_continue
from tubemq_aio.gateway.tubemq.early_commit import (
    EarlyCommits,
    commit_covers,
    get_then_commit,
    settle_early,
)
from tubemq_aio.gateway.tubemq.fetched_messages import FetchedMessages, screen_raw_messages
from tubemq_aio.gateway.tubemq.next_batch import NextBatch, read_next_batch, screened
from tubemq_aio.gateway.tubemq.shared_id import shared_consumer_id
from tubemq_aio.gateway.tubemq.tube_damage import DamagedReads
from tubemq_aio.gateway.tubemq.tube_read import TubeRead
from tubemq_aio.protocol.consumer_meta import BrokerInfo, Partition
from tubemq_aio.protocol.consumer_names import planner_group
from tubemq_aio.protocol.consumer_replies import (
    GetMessageResponse,
    OffsetResponse,
    RawMessage,
    payload_bytes,
)
from tubemq_aio.protocol.damage import reread_wait_ms

__all__ = ["TubeGroup"]


@dataclass(frozen=True, slots=True)
class _ReadOnce:
    """What one read at an offset is asked to do (see :meth:`TubeGroup.read`)."""

    start: int
    cursor_at_start: bool
    max_messages: int
    gather_until: float


_T = TypeVar("_T")

log = logging.getLogger("tubemq_aio.gateway")

#: Broker answers that mean "this consumer's registration of the partition is gone".
_NOT_REGISTERED = frozenset({411, 412})
#: Register far beyond any index: the broker clamps it to the partition's max (start = latest).
LATEST_OFFSET = 1 << 62
#: Metadata is queried at most this often (seconds) unless a caller forces it.
_META_TTL = 10.0
#: Further broker batches are gathered into one read only while it holds fewer payload bytes.
GATHER_BYTES = 4 << 20
#: Backoff (seconds) between attempts to reopen a session whose start failed.
_RESTART_MIN, _RESTART_MAX = 1.0, 30.0


@dataclass(frozen=True, slots=True)
class TubeReach:
    """How a replica reaches TubeMQ, the same for every group it serves.

    Attributes:
        masters: master address list (``host:port,host:port``).
        deployment: gateway deployment name (part of the shared consumer id).
        rpc_timeout: seconds per RPC (default 5.0).
        client_options: how TubeMQ is reached, as SDK client keywords (TLS, credentials,
            framing: ``TubeMQAccess.client_options()``); empty by default.
    """

    masters: str
    deployment: str
    rpc_timeout: float = 5.0
    client_options: Mapping[str, Any] = field(default_factory=dict)


class TubeGroup:
    """One gateway group's TubeMQ session on this replica (shared consumer id).

    Args:
        reach: how this replica reaches TubeMQ (:class:`TubeReach`, shared by its groups).
        group: TubeMQ consumer group.
        topics: subscribed topics.
        msg_time_zone: the zone the group's producers stamp ``msg_time`` in (time searches).
    """

    def __init__(
        self,
        reach: TubeReach,
        *,
        group: str,
        topics: Sequence[str],
        msg_time_zone: tzinfo = UTC,
    ) -> None:
        self.group = group
        self.client_id = shared_consumer_id(reach.deployment, group)
        # Two master register attempts: a fetch must fail fast (503) when the master is away.
        options: dict[str, Any] = {
            **reach.client_options,
            "rpc_timeout": reach.rpc_timeout,
            "fetchers": 1,
            "register_attempts": 2,
            "msg_time_zone": msg_time_zone,
        }
        options.update(masters=reach.masters, group=group, topics=list(topics))
        self._options = options
        self._consumer = self._new_consumer()
        self._start_lock = asyncio.Lock()
        self._closed = False
        #: Brokers a register could not reach, none reached since (see :meth:`register`).
        self._unreachable: set[BrokerInfo] = set()
        #: After a failed start (e.g. 425 at the master) the next one waits this long.
        self._retry_wait = 0.0
        self._retry_at = -math.inf
        self._start_error: TubeMQError | None = None
        self._meta_at = -_META_TTL
        self._meta: list[str] = []
        self.master_ok = False
        #: Broker RPCs spent by :meth:`register` and :meth:`read` (register, get, commit).
        self.rpcs = 0
        self._damaged = DamagedReads()
        #: Per partition: whether a read's CommitOffset goes out with its GetMessage.
        self._early = EarlyCommits(GATHER_BYTES)

    @property
    def stats(self) -> ConsumerStats:
        """Counters of this group's reads on this replica: ``crc_mismatches``,
        ``crc_refetches`` (batches read again after damage on the way), ``decode_errors``,
        ``filtered`` (the SDK consumer's :class:`~tubemq_aio.consumer.ConsumerStats`; a new
        session after a failed start counts from 0)."""
        return self._consumer.stats

    @property
    def started(self) -> bool:
        """Whether the master session is registered."""
        return self._consumer.client_id is not None and not self._consumer.closed

    async def start(self) -> None:
        """Register at the master (once; concurrent callers wait for the first).

        A failed start (e.g. 425 from the master) closes the SDK consumer for good, so the next
        call opens a new one; until a backoff (1 s doubling to 30 s) has passed, calls re-raise
        the last error without asking the master.

        Raises:
            ClientClosedError: :meth:`close` was called.
            TubeMQError: the master refused or could not be reached.
        """
        async with self._start_lock:
            if self.started:
                return
            if self._closed:
                raise ClientClosedError(f"the TubeMQ session of group {self.group} is closed")
            if self._start_error is not None and time.monotonic() < self._retry_at:
                raise self._start_error.with_traceback(None)  # no traceback piling up
            if self._consumer.closed:
                # A failed start or a crashed task closes a consumer for good: open a new one.
                await self._consumer.close()
                self._consumer = self._new_consumer()
            try:
                await self._consumer.start()
            except TubeMQError as exc:
                self._retry_wait = min(_RESTART_MAX, max(_RESTART_MIN, 2 * self._retry_wait))
                self._retry_at = time.monotonic() + self._retry_wait
                self._start_error = exc
                log.warning("TubeMQ session of %s did not start: %r", self.group, exc)
                raise
            self._retry_wait, self._start_error = 0.0, None
            self.master_ok = True

    def _new_consumer(self) -> SharedIdConsumer:
        return SharedIdConsumer(self.client_id, consume_from="earliest", **self._options)

    async def close(self) -> None:
        """End the session's tasks and connections (no unregister, no close at the master)."""
        self._closed = True  # not under the start lock: a start stuck at the master ends too
        await self._consumer.close()

    def _session(self) -> ClientBalanceSession:
        return self._consumer.session()

    async def partitions(self, *, force: bool = False) -> list[str]:
        """Subscribable partition keys of the group's topics (cached for 10 s).

        Raises:
            TubeMQError: the master could not be asked and nothing is cached.
        """
        now = time.monotonic()
        if force or now - self._meta_at >= _META_TTL or not self._meta:
            try:
                session = self._session()
                # After a query that reached no master (with keys cached), one round over them,
                # not rounds until rpc_timeout: fetches during an outage answer from the cache.
                once = not self.master_ok and bool(self._meta)
                await session.query_meta(deadline=session.clock() if once else None)
                metas = [m for _, m in sorted(session.cache.metas.items())]
                keys = [m.partition.key.format() for m in metas if m.subscribable]
            except TubeMQError:
                self.master_ok = False
                if not self._meta:
                    raise
                return list(self._meta)
            self.master_ok = True
            self._meta = keys
            self._meta_at = now
        return list(self._meta)

    async def offsets_for_times(self, keys: Sequence[str], when: datetime) -> dict[str, int]:
        """Where each partition's messages stamped (``msg_time``) at or after ``when`` begin
        (after its last message when none is), by the SDK's time search
        (docs/protocol/time.md) with a short-lived consumer of the group ``{group}_planner``:
        the shared session, its broker cursors and the group's offsets are not touched.

        Raises:
            RequestTimeoutError: the search took longer than the SDK's 60 s.
            TubeMQError: the master or a broker refused.
        """
        async with self._planner() as planner:
            found = await planner.search_times(
                dict.fromkeys(keys, when), planner.config.time_search_timeout
            )
        return {key: f.offset for key, f in found.items()}

    async def latest_offsets(self, keys: Sequence[str]) -> dict[str, int]:
        """Each partition's max offset now (where its next message goes), from one broker
        register and unregister per partition by a short-lived consumer of the group
        ``{group}_planner`` (:meth:`ClientBalancedConsumer.offset_bounds`): the shared session,
        its broker cursors and the group's offsets are not touched.

        Raises:
            TubeMQError: the master or a broker refused or could not be reached.
        """
        async with self._planner() as planner:
            return {key: (await planner.offset_bounds(key))[1] for key in keys}

    def _planner(self) -> ClientBalancedConsumer:
        """A short-lived consumer of the group ``{group}_planner`` for the look-ups above."""
        options = dict(self._options, group=planner_group(self.group), consume_from="earliest")
        return ClientBalancedConsumer(**options)

    async def _partition(self, key: str) -> Partition:
        return await resolve_partition(self._session(), key)

    async def register(self, key: str, offset: int) -> tuple[int, int]:
        """Register ``key`` at ``offset`` (clamped by the broker); returns (offset, max).

        The SDK tries a register that could not reach the broker again until ``rpc_timeout``
        (a broker restarting costs time, not an error); after such a register failed, the
        broker's next registers make one attempt until one reaches it (also across session
        restarts), so that fetches while a broker or the cluster is down answer 503 at once
        after the first.

        Raises:
            ServerError: the broker refused.
            ConnectError / RequestNotSentError: the broker could not be reached.
        """
        session = self._session()
        partition = await self._partition(key)
        self.rpcs += 1
        broker = partition.broker
        once = broker in self._unreachable
        try:
            rsp = await session.register_at_broker(
                partition, offset, deadline=session.clock() if once else None
            )
        except (ConnectError, RequestNotSentError):
            self._unreachable.add(broker)
            raise
        self._unreachable.discard(broker)
        if not rsp.success:
            session.readers.pop(partition.key, None)
            log.warning("register of %s at %d: [%d] %s", key, offset, rsp.err_code, rsp.err_msg)
            raise server_error(rsp.err_code, rsp.err_msg)
        session.readers[partition.key] = partition
        return rsp.curr_offset, rsp.max_offset

    async def read(
        self,
        key: str,
        start: int,
        *,
        cursor_at_start: bool,
        max_messages: int = 1,
        gather_until: float = -math.inf,
    ) -> TubeRead:
        """Read at ``start``: [register] → GetMessage → [GetMessage …] → CommitOffset. A read
        that the partition's last first batch says will not gather writes its CommitOffset
        right behind its GetMessage (:mod:`~tubemq_aio.gateway.tubemq.early_commit`): the
        same calls, one wait.

        The register is skipped when ``cursor_at_start`` (the group's broker cursor is known to
        be at ``start``); a GetMessage answer that starts elsewhere, or a lost registration
        (411/412), costs a register and a second GetMessage. The first broker batch is always
        returned whole; further ones are gathered (see :meth:`_gather`) while the total stays
        within ``max_messages``, under :data:`GATHER_BYTES` and before ``gather_until``
        (``time.monotonic()``).

        A batch with a damaged message is decoded while the next RPC is at the broker, so it is
        committed before its damage is known. Damage two reads of its offset do not show alike
        (damage on the way, :class:`~tubemq_aio.gateway.tubemq.tube_damage.DamagedReads`) ends
        the read before that batch and registers the cursor back at its start: a later batch
        is answered without it (the next read starts at it), the first one is read again here
        until its damage is seen at rest or ``rpc_timeout`` has passed (then the answer is
        ``error``, nothing consumed). Damage at rest is dropped (``stats.crc_mismatches``).

        Raises:
            TubeMQError: a transport error or a broker refusal other than 404/452.
        """
        args = _ReadOnce(start, cursor_at_start, max_messages, gather_until)
        return await self._read(key, args)

    async def read_next(self, key: str, deadline: float) -> NextBatch:
        """Read the partition's next batch off a fetch's critical path: GetMessage and the
        CommitOffset behind it on one connection, aborted at ``deadline`` (``loop.time()``;
        :func:`~tubemq_aio.gateway.tubemq.next_batch.read_next_batch`). Its batch comes back
        screened (:meth:`screen`) by the caller.

        Raises:
            TubeMQError: the partition is not known to the session (nothing was sent).
        """
        session = self._session()
        partition = await self._partition(key)
        self.rpcs += 2
        return await read_next_batch(session, partition, deadline)

    def screen(self, key: str, batch: tuple[RawMessage, ...]) -> tuple[RawMessage, ...] | None:
        """``batch`` of ``key`` screened as a read screens it (checksums, filters; counted in
        :attr:`stats`), or None when a message was damaged."""
        topic = key.split(":")[1]
        filters = self._consumer.config.filters_of(topic)
        return screened(key, batch, filters, self._consumer.stats)

    async def _read(self, key: str, args: _ReadOnce) -> TubeRead:
        """:meth:`read` as ``args`` ask."""
        session = self._session()
        partition = await self._partition(key)
        deadline = time.monotonic() + self._options["rpc_timeout"]
        rpcs = rereads = 0
        registered, resync = False, ""
        while True:
            got = await self._read_once(session, partition, key, args)
            rpcs += got.rpcs
            registered, resync = registered or got.registered, resync or got.resync
            if got.status != "damaged":  # the first read's own figures need no copy
                return (
                    replace(got, rpcs=rpcs, registered=registered, resync=resync)
                    if rereads
                    else got
                )
            rereads += 1
            wait = reread_wait_ms(rereads) / 1000
            if time.monotonic() + wait >= deadline:
                error = f"every read of {key} at {got.start} was damaged on the way ({rereads})"
                return TubeRead(
                    "error",
                    got.start,
                    got.start,
                    got.max,
                    rpcs=rpcs,
                    registered=registered,
                    resync=resync,
                    error=error,
                )
            if wait:
                await asyncio.sleep(wait)
            # the cursor was put back at the batch
            args = replace(args, start=got.start, cursor_at_start=True)

    async def _read_once(
        self, session: ClientBalanceSession, partition: Partition, key: str, args: _ReadOnce
    ) -> TubeRead:
        """One :meth:`read`; status ``damaged`` when its first batch was damaged on the way
        (the cursor is back at ``start``)."""
        start, cursor_at_start = args.start, args.cursor_at_start
        rpcs, registered, top, begin, resync = 0, False, -1, start, ""
        first: tuple[RawMessage, ...] = ()
        first_max = -1
        # the commit goes out with the GetMessage when the read should end after one batch
        early_commit = self._early.expected(key, args.max_messages)
        early: asyncio.Task[OffsetResponse] | None = None
        for _attempt in range(2):
            await settle_early(early)  # a resync's: before the register
            early = None
            if not cursor_at_start:
                begin, top = await self.register(key, start)
                rpcs += 1
                registered = True
                if begin < start:
                    # The partition ends below start (a broker lost its unflushed tail): ask
                    # once more, so the caller moves its committed offset back only on two
                    # fresh answers that agree.
                    begin, top = await self.register(key, start)
                    rpcs += 1
            self.rpcs += 1
            get = session.broker.get_message(
                partition, last_pack_consumed=False, esc_flow_ctrl=False
            )
            rpcs += 1
            if early_commit:
                self.rpcs += 1
                rpcs += 1
                got, early = await get_then_commit(
                    get, lambda: session.broker.commit(partition, consumed=True)
                )
            else:
                got = await get
            if got.max_offset >= 0:
                top = max(top, got.max_offset)
            if not registered and not got.success and got.err_code in _NOT_REGISTERED:
                resync = f"[{got.err_code}] {got.err_msg}"
            elif not registered and got.success and got.curr_offset != begin:
                resync = f"cursor at {got.curr_offset}, not {begin}"
            else:
                break
            cursor_at_start = False  # the next turn registers at start
        else:
            got = None
        if got is not None and (not got.success or got.curr_offset != begin):
            await settle_early(early)  # not this read's commit after all
            early = None
            self._early.forget(key)
        if got is not None:
            if not got.success:
                if got.err_code == 404:
                    return TubeRead(
                        "empty",
                        begin,
                        begin,
                        top,
                        rpcs=rpcs,
                        registered=registered,
                        resync=resync,
                    )
                if got.err_code == 452:
                    wait = got.min_limit_time or 200
                    return TubeRead("throttled", begin, begin, top, rpcs=rpcs, wait_ms=wait)
                raise server_error(got.err_code, got.err_msg)
            if got.curr_offset != begin:
                # Even right after our own register the cursor moved: someone else reads the
                # group.
                return TubeRead(
                    "error",
                    begin,
                    begin,
                    top,
                    rpcs=rpcs,
                    registered=registered,
                    resync=resync,
                    error=f"cursor at {got.curr_offset}, expected {begin}",
                )
            first, first_max = got.messages, got.max_offset
        messages: list[RawMessage] = []
        filters = self._consumer.config.filters_of(partition.key.topic)
        counters = self._consumer.stats

        def decode(batch: tuple[RawMessage, ...], at: int) -> bool:
            before = counters.crc_mismatches + counters.decode_errors
            kept = screen_raw_messages(batch, partition_key=key, filters=filters, counters=counters)
            damaged = counters.crc_mismatches + counters.decode_errors != before
            if damaged and self._damaged.on_the_way(key, at, batch):
                counters.crc_refetches += 1
                log.warning("checksum mismatch in %s at offset %d: reading it again", key, at)
                return True
            messages.extend(kept)
            return False

        self._early.saw(key, first)
        done, spent, batches, hurt, more = await self._gather(
            session, partition, (first, begin, first_max), args, decode, early
        )
        rpcs += spent
        if not done.success and hurt is None:
            raise server_error(done.err_code, done.err_msg)
        top = max(top, done.max_offset)
        end = done.curr_offset
        if hurt is not None:
            # The damaged batch was committed before its damage was known: put the cursor back
            # at its start, where this read ends (and the next one begins).
            end, top = hurt, max(top, (await self.register(key, hurt))[1])
            rpcs += 1
        return TubeRead(
            "damaged" if hurt is not None and not batches else "ok",
            begin,
            end,
            top,
            FetchedMessages(partition.key.topic, key, tuple(messages)),
            rpcs=rpcs,
            batches=batches,
            registered=registered,
            resync=resync,
            more=more,
        )

    async def _gather(
        self,
        session: ClientBalanceSession,
        partition: Partition,
        head: tuple[tuple[RawMessage, ...], int, int],
        args: _ReadOnce,
        decode: Callable[[tuple[RawMessage, ...], int], bool],
        early: asyncio.Task[OffsetResponse] | None = None,
    ) -> tuple[GetMessageResponse | OffsetResponse, int, int, int | None, bool]:
        """Read further broker batches after ``head`` (the first batch, where it starts and the
        max offset its answer reported); end with a CommitOffset.

        A GetMessage with ``lastPackConsumed`` commits the batch before it and reads on, so its
        ``currOffset`` is where the previous batch ended. A batch that would take the total
        past ``args.max_messages`` is read only when the largest batch so far says it fits; one
        that does not is rolled back (commit with consumed=False leaves the cursor where it
        starts). Each kept batch is
        decoded (``decode(batch, its start)``, True when it was damaged on the way) while the
        next RPC is at the broker; a damaged one ends the gathering (the batch read after it is
        rolled back). ``early`` is a CommitOffset sent right behind the first batch's
        GetMessage (:mod:`~tubemq_aio.gateway.tubemq.early_commit`; the caller counted its RPC):
        its answer ends a read that gathers nothing when it covers the first batch; otherwise
        it is waited for and the read goes on as without it.

        Returns:
            The commit's answer (``currOffset`` = the end of the kept batches), the broker RPCs
            made here, the number of batches kept, the start of a batch damaged on the way
            (None when none was: then every batch read was kept) and whether the partition may
            hold more after the last batch
            (:func:`~tubemq_aio.gateway.tubemq.batch_end.may_continue`: a read of the next
            batch after it is not expected to be answered 404).

        Raises:
            TubeMQError: a GetMessage started somewhere other than where the last batch ended.
        """
        first, begin, first_max = head
        more = may_continue(begin, first, first_max)
        total = largest = len(first)
        size = payload_bytes(first)
        rpcs, batches, last_start, keep = 0, 1, begin, True
        pending: tuple[RawMessage, ...] = first
        pending_at, hurt = begin, False
        while True:
            room = (
                total + largest <= args.max_messages
                and size < GATHER_BYTES
                and time.monotonic() < args.gather_until
            )
            if not room:
                break
            await settle_early(early)  # gathering after all: the next GetMessage commits
            early = None
            self.rpcs += 1
            rpcs += 1
            got, hurt = await _overlapped(
                session.broker.get_message(partition, last_pack_consumed=True, esc_flow_ctrl=False),
                pending,
                pending_at,
                decode,
            )
            pending = ()
            if hurt or not got.success:  # 404 (caught up), 452, …: the commit below ends it
                keep, more = not hurt, more and got.err_code != 404
                break
            if got.curr_offset <= last_start:
                raise server_error(
                    500, f"gathering batch started at {got.curr_offset}, not after {last_start}"
                )
            last_start = got.curr_offset
            more = may_continue(got.curr_offset, got.messages, got.max_offset)
            if total + len(got.messages) > args.max_messages:
                keep, more = False, True  # rolled back: the partition goes on with it
                break
            pending, pending_at, batches = got.messages, got.curr_offset, batches + 1
            size += payload_bytes(got.messages)
            total += len(got.messages)
            largest = max(largest, len(got.messages))
        if early is not None:  # the first batch alone: its commit is on its way already
            done, hurt_last = await _overlapped(early, pending, pending_at, decode)
            if not commit_covers(done, begin, first):  # it committed nothing: commit now
                self.rpcs += 1
                rpcs += 1
                done = await session.broker.commit(partition, consumed=True)
        else:
            self.rpcs += 1
            done, hurt_last = await _overlapped(
                session.broker.commit(partition, consumed=keep), pending, pending_at, decode
            )
            rpcs += 1
        if hurt or hurt_last:
            return done, rpcs, batches - 1, pending_at, more
        if done.success and not keep and done.curr_offset != last_start:
            raise server_error(
                500, f"rollback left the cursor at {done.curr_offset}, not {last_start}"
            )
        return done, rpcs, batches, None, more


async def _overlapped(
    call: Awaitable[_T],
    batch: tuple[RawMessage, ...],
    at: int,
    decode: Callable[[tuple[RawMessage, ...], int], bool],
) -> tuple[_T, bool]:
    """Run the broker ``call`` and decode ``batch`` (starting at ``at``) while it is on the
    wire; the call's answer and whether the batch was damaged on the way."""
    task = asyncio.ensure_future(call)
    hurt = False
    if batch:
        try:
            await asyncio.sleep(0)  # let the task write its request before the CPU work
            hurt = decode(batch, at)
        except BaseException:
            task.cancel()
            raise
    return await task, hurt
