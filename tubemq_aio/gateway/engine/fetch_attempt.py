"""The read path of a fetch: lease a partition in Redis, read its batch from TubeMQ, book it.

One attempt is acquire → [init] → [register at S when the broker cursor is not at S] →
GetMessage → CommitOffset → [rewind, when the broker's partition now ends below S] → record.
With ``kept_batch_bytes`` > 0 a clustering fetch's booking also marks a read-ahead of the
partition in the same round trip, and once the fetch returns a task reads the partition's next
batch (:mod:`.read_ahead_driver`), which this replica keeps (:class:`KeptBatches`) under a fence
in Redis; when the next acquire of the partition hands that fence back, the kept batch is served
with no broker RPC at all (``docs/gateway.md``, "The consume path");
:class:`BatchReader` runs up to a few attempts per fetch (empty scans and 404s release the lease
and try the next partition) and counts what each attempt cost, so the cost of a delivered batch
can be read from the stats. A broker request of an attempt that may still reach the broker (a
timeout, a connection lost after the write) leaves the lease to lapse instead of releasing it; a
cancelled fetch's call is waited for by an engine task, which releases once it is answered
(:mod:`~tubemq_aio.gateway.tubemq.broker_call`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import secrets
import time
from collections.abc import Awaitable, Callable

from tubemq_aio.errors import (
    ClientClosedError,
    PartitionNotSubscribableError,
    PartitionOccupiedError,
    TubeMQError,
)
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.engine.ack_pipeline import acquire_with_acks
from tubemq_aio.gateway.engine.cursor_hold import AttemptCost, CursorHold
from tubemq_aio.gateway.engine.data import (
    ConsumeSettings,
    FetchArgs,
    FetchOutcome,
    GatewayStats,
    Lease,
    Position,
)
from tubemq_aio.gateway.engine.kept_batches import KeptBatches
from tubemq_aio.gateway.engine.port import PiggybackAcks
from tubemq_aio.gateway.engine.read_ahead_driver import ReadAheadPlan, ReadAheads
from tubemq_aio.gateway.errors import GatewayError, StoreUnavailableError, TubeUnavailableError
from tubemq_aio.gateway.leases.lease_key import LeaseKey
from tubemq_aio.gateway.leases.lease_store import LeaseStore
from tubemq_aio.gateway.leases.model import Booking
from tubemq_aio.gateway.leases.redis_keys import cursor_lock_key
from tubemq_aio.gateway.leases.replies import Reply
from tubemq_aio.gateway.tubemq.next_batch import kept_read
from tubemq_aio.gateway.tubemq.tube_group import LATEST_OFFSET, TubeGroup
from tubemq_aio.gateway.tubemq.tube_read import TubeRead
from tubemq_aio.protocol.client_balance import CONNECT_FAILURE_HOLD
from tubemq_aio.supervisor import Supervisor

__all__ = ["ANSWER_TASK", "BatchReader", "rewind_committed", "rewind_target"]

log = logging.getLogger("tubemq_aio.gateway")

#: The role name of the engine task that waits for a cancelled fetch's broker call and then
#: gives its lease back (:meth:`BatchReader._release_when_answered`); until it ends, the lease
#: shows as held.
ANSWER_TASK = "fetch-answer"
#: Empty scans / 404s tried within one fetch before answering ``empty``.
_ATTEMPTS = 4
#: The broker work of a fetch must end this long (at most a quarter of the lease) before the
#: lease does, so a batch is never handed out on a lease that already expired.
_LEASE_MARGIN_MS = 2000
#: Broadcast: how long the per-partition cursor mutex lives unless renewed (every third of it
#: while its read runs), and how long to wait for it.
_CURSOR_LOCK_MS = 5000
_RETRY_BUSY_MS = 50
#: A paused group is asked again this soon (ms): by a long poll, or by the client as told.
_PAUSED_RETRY_MS = 500
_BROKER_ERROR_REST_MS = 1000
#: A partition the broker refused rests as long as the SDK holds it back after a refusal.
_REFUSED_REST_MS = int(CONNECT_FAILURE_HOLD * 1000)
#: A fetch gathers further broker batches for at most this long (seconds).
_GATHER_S = 1.0


def _read_window(left_ms: int) -> tuple[float, float]:
    """A leased read's budget and its gathering window, in seconds, with ``left_ms`` of the
    lease left: the lease less its margin, and further broker batches only early in it."""
    margin = min(_LEASE_MARGIN_MS, left_ms // 4)
    return max(0.05, (left_ms - margin) / 1000), min(_GATHER_S, (left_ms - margin) / 4000)


@dataclasses.dataclass(frozen=True, slots=True)
class _ReadArgs:
    """Where a leased read starts and how much it may gather."""

    cmt: int
    start: str
    cursor: int
    max_messages: int
    gather_until: float
    fence: str = ""  # the kept-batch fence the acquire handed to this lease


def rewind_target(cmt: int, read: TubeRead) -> int | None:
    """Where the committed offset ``cmt`` must move back to after ``read``, or None.

    Only a fresh register counts: :meth:`TubeGroup.read` asks twice when the broker clamps the
    requested offset down, so ``read.start < cmt`` after a register means two answers agreed the
    partition now ends at ``read.start`` (a broker restarted without its unflushed tail and hands
    those offsets to new messages, or the topic was recreated). A max seen in a GetMessage or
    commit answer, in the lag or in metadata never moves ``cmt`` back.
    """
    if read.registered and read.status in ("ok", "empty") and read.start < cmt:
        return read.start
    return None


async def rewind_committed(store: LeaseStore, key: LeaseKey, cmt: int, back: int, top: int) -> bool:
    """Move the committed offset of the partition leased as ``key`` back from ``cmt`` to
    ``back`` (the broker's partition now ends at ``back``; ``top`` is its max) and log it.

    Returns:
        False when the lease or the committed offset changed meanwhile (nothing moved).
    """
    moved = await store.rewind(key, cmt, back, top)
    if moved.status != "ok":
        return False
    log.warning(
        "group %s scope %s partition %s: the broker's partition ends at %d, below the committed "
        "offset %d (an unflushed tail lost in a broker crash, or a recreated topic); committed "
        "offset moved back from %d to %d",
        *(key.group, key.scope, key.partition_key, back, cmt, cmt, back),
    )
    return True


class BatchReader:
    """Reads batches under Redis leases for one replica.

    Args:
        settings: engine settings.
        stats: the replica's counters (updated in place).
        tube_of: the started TubeMQ session of a group.
        tasks: the engine's task owner (a broadcast read's cursor-mutex renewal runs under it).
    """

    def __init__(
        self,
        settings: ConsumeSettings,
        stats: GatewayStats,
        tube_of: Callable[[GroupSpec], Awaitable[TubeGroup]],
        tasks: Supervisor,
    ) -> None:
        self.settings = settings
        self._stats = stats
        self._tube_of = tube_of
        self._tasks = tasks
        #: Batches read ahead, one per partition at most (dropped by :meth:`close`).
        self.kept = KeptBatches(settings.kept_batch_bytes)
        #: The read-aheads after the answers (tasks of ``tasks``).
        self.ahead = ReadAheads(self.kept, stats, tasks, allow_ms=int(settings.rpc_timeout * 1000))

    def close(self) -> None:
        """Drop every kept batch (the replica closes; their fences in Redis then match no
        batch anywhere, and the partitions are read afresh)."""
        self.kept.clear()

    async def fetch_once(
        self, request: FetchArgs, store: LeaseStore, acks: PiggybackAcks | None = None
    ) -> FetchOutcome:
        """Up to a few lease attempts; the first batch (gathered up to ``max_messages``), or why
        there is none. Pending ``acks`` ride in the first acquire's round trip."""
        outcome = FetchOutcome("empty", None, (), retry_after_ms=self.settings.not_found_wait_ms)
        for _ in range(_ATTEMPTS):
            cost = AttemptCost()
            try:
                result = await self._attempt(request, store, cost, acks)
            finally:
                self._stats.broker_rpcs += cost.rpcs
                self._stats.fetch_redis_roundtrips += cost.trips
            if result is not None:
                if result.status == "ok":  # what the attempt that got the batch cost
                    self._stats.ok_broker_rpcs += cost.rpcs
                    self._stats.ok_redis_roundtrips += cost.trips
                return result
        return outcome

    async def _attempt(
        self,
        request: FetchArgs,
        store: LeaseStore,
        cost: AttemptCost,
        acks: PiggybackAcks | None,
    ) -> FetchOutcome | None:
        """One acquire and, with a lease, one read; None when another attempt may find data."""
        spec, scope = request.spec, request.scope
        lease_id = secrets.token_hex(16)
        cost.trips += 1
        try:
            if acks is not None and acks.pending:
                got = await acquire_with_acks(store, self._stats, acks, request, lease_id)
            else:
                got = await store.acquire(
                    spec.name, scope, lease_id, request.lease_ms, request.holder
                )
        except asyncio.CancelledError:  # the script may have run: give back what it took
            await asyncio.shield(self._forget(store, spec.name, scope, lease_id, cost))
            raise
        if got.status == "paused":  # a hint, and a long poll waits it out
            return FetchOutcome("paused", None, (), retry_after_ms=_PAUSED_RETRY_MS)
        if got.status == "throttled":
            return FetchOutcome("throttled", None, (), retry_after_ms=got.wait_ms)
        if got.status == "held":  # a rate-limited group reads one batch at a time: wait
            return FetchOutcome("busy", None, (), retry_after_ms=got.wait_ms)
        if got.status == "none":
            return self._idle(got.now, *got.next_ready_and_expiry)
        leased = got.leased()
        lease = Lease(
            key=LeaseKey(spec.name, scope, leased.partition_key, lease_id),
            expires_at_ms=leased.lease_expiry,
            redelivery=leased.redeliveries,
        )
        left_ms = leased.lease_expiry - got.now
        read = _ReadArgs(
            cmt=-1 if leased.committed is None else leased.committed,
            start=leased.start,
            cursor=-1 if leased.cursor is None else leased.cursor,
            max_messages=request.max_messages,
            gather_until=time.monotonic() + _read_window(left_ms)[1],
            fence=leased.fence,
        )
        return await self._read_leased(spec, lease, read, left_ms, store, cost)

    def _idle(self, now: int, next_ready: int, next_expiry: int) -> FetchOutcome:
        if next_ready >= 0:
            return FetchOutcome("empty", None, (), retry_after_ms=max(1, next_ready - now))
        if next_expiry >= 0:
            return FetchOutcome("busy", None, (), retry_after_ms=max(1, next_expiry - now))
        return FetchOutcome("empty", None, (), retry_after_ms=self.settings.not_found_wait_ms)

    async def _read_leased(
        self,
        spec: GroupSpec,
        lease: Lease,
        read: _ReadArgs,
        left_ms: int,
        store: LeaseStore,
        cost: AttemptCost,
    ) -> FetchOutcome | None:
        """Read the leased partition as ``read`` says, within the budget of the ``left_ms`` of
        the lease (:func:`_read_window`); None when the caller should try another one."""
        hold: CursorHold | None = None
        until = asyncio.get_running_loop().time() + _read_window(left_ms)[0]
        try:
            async with asyncio.timeout_at(until) as budget:
                if lease.scope != "c":
                    held = await self._lock_cursor(store, spec.name, lease.partition_key, cost)
                    if held is None:
                        await self._release(store, lease, _RETRY_BUSY_MS, cost)
                        return FetchOutcome("busy", None, (), retry_after_ms=_RETRY_BUSY_MS)
                    try:
                        hold = CursorHold(store, held, budget, cost, self._tasks, _CURSOR_LOCK_MS)
                    except ClientClosedError:  # the engine is closing: no renewal, no read
                        await self._unlock(store, held, cost)
                        raise
                outcome = await self._read(spec, lease, read, store, cost, hold)
            if hold is not None:  # before the batch is handed out: a cancel here releases it
                done, hold = hold, None
                await done.end()
            return outcome
        except GatewayError:  # Redis trouble (or lost state) is not the broker's fault
            await self._release(store, lease, 0, cost)
            raise
        except (PartitionOccupiedError, PartitionNotSubscribableError) as exc:
            # This partition is refused for now (410 held by another consumer id, 421 within
            # the 5 s hold after such a refusal, 422 not subscribable): it rests, and the fetch
            # tries another partition instead of failing with 503.
            self._stats.partition_refusals += 1
            log.info("partition %s refused: %s", lease.partition_key, exc)
            await self._release(store, lease, _REFUSED_REST_MS, cost)
            return None
        except (TubeMQError, TimeoutError, OSError) as exc:
            if hold is not None and hold.lapsed:  # cut short: another reader may move the cursor
                self._stats.cursor_lock_lapses += 1
                hold = await self._give_back(store, lease, cost, hold, until)
                return FetchOutcome("busy", None, (), retry_after_ms=_RETRY_BUSY_MS)
            cost.broker.stop()  # out of time: a call still running may arrive (it is astray)
            if isinstance(exc, TimeoutError) and cost.on_redis:
                # The budget ran out on a Redis round trip (a failover or an outage longer
                # than the read's budget, however short the lease): Redis's fault, not the
                # broker's. No release: Redis is not answering, and the lease (and any cursor
                # mutex) lapses anyway.
                if hold is not None:
                    done, hold = hold, None
                    await done.end(unlock=False)
                raise StoreUnavailableError(
                    f"Redis did not answer within the read of {lease.partition_key}"
                ) from exc
            self._stats.broker_errors += 1
            await self._release(store, lease, _BROKER_ERROR_REST_MS, cost)
            raise TubeUnavailableError(f"reading {lease.partition_key} failed: {exc!r}") from exc
        except BaseException:
            hold = await self._give_back(store, lease, cost, hold, until)  # cancelled
            raise
        finally:
            if hold is not None:  # a request that may still arrive keeps the mutex too
                await hold.end(unlock=not cost.broker.astray)

    async def _give_back(
        self,
        store: LeaseStore,
        lease: Lease,
        cost: AttemptCost,
        hold: CursorHold | None,
        until: float,
    ) -> CursorHold | None:
        """Give the lease of a fetch that stops reading back at once, or, with a broker call
        still out, once that call is answered (:meth:`_release_when_answered`, off the fetch's
        path). The cursor hold the caller still has to end: None when the engine task took
        it."""
        if not cost.broker.pending:
            await self._release(store, lease, 0, cost)
            return hold
        await self._release_when_answered(store, lease, cost, hold, until)
        return None

    async def _release_when_answered(
        self,
        store: LeaseStore,
        lease: Lease,
        cost: AttemptCost,
        hold: CursorHold | None,
        until: float,
    ) -> None:
        """The broker call of a fetch that stopped waiting for it (cancelled, or cut short by
        a lapsed cursor mutex) goes on in an engine task until ``until`` (the end of the read's
        budget, ``loop.time()``): answered, the lease (and a broadcast scope's cursor mutex)
        is given back; not answered by then, or the engine closing, it is cancelled and both
        are left to lapse."""

        async def settle() -> None:
            try:
                await cost.broker.wait(until)
            finally:  # _release and end leave the lease and mutex to lapse when unanswered
                if hold is not None:
                    await hold.end(unlock=not cost.broker.astray)
                await self._release(store, lease, 0, cost)

        try:
            self._tasks.spawn(settle(), ANSWER_TASK, essential=False)
        except ClientClosedError:  # the engine is closing: nobody waits, the lease lapses
            cost.broker.stop()
            if hold is not None:
                await hold.end(unlock=False)
            await self._release(store, lease, 0, cost)

    async def _lock_cursor(
        self, store: LeaseStore, group: str, p: str, cost: AttemptCost
    ) -> tuple[str, str] | None:
        key, token = cursor_lock_key(group, p), secrets.token_hex(8)
        try:
            locked = await cost.redis(store.try_lock(key, token, _CURSOR_LOCK_MS))
        except asyncio.CancelledError:  # the SET may have run: do not leave it for 5 s
            await self._unlock(store, (key, token), cost)
            raise
        return (key, token) if locked else None

    async def _unlock(self, store: LeaseStore, held: tuple[str, str], cost: AttemptCost) -> None:
        """Drop the cursor mutex if this fetch still holds it (shielded; it lapses anyway)."""
        with contextlib.suppress(Exception):
            cost.trips += 1
            await asyncio.shield(store.unlock(*held))

    async def _forget(
        self, store: LeaseStore, group: str, scope: str, lease_id: str, cost: AttemptCost
    ) -> None:
        """Release ``lease_id`` if an acquire whose answer was lost took it (else it expires)."""
        with contextlib.suppress(Exception):
            cost.trips += 1
            p = await store.leased_partition(group, scope, lease_id)
            if p is not None:
                cost.trips += 1
                await store.settle(LeaseKey(group, scope, p, lease_id), "release", 0)

    async def _release(
        self, store: LeaseStore, lease: Lease, delay_ms: int, cost: AttemptCost
    ) -> None:
        """Give a lease back from inside a fetch (shielded: it must not be left dangling),
        unless a broker request of the attempt may still arrive: then it is left to lapse at
        its expiry, so that the request cannot land inside the next holder's read
        (:mod:`~tubemq_aio.gateway.tubemq.broker_call`)."""
        if cost.broker.astray:
            self._stats.leases_left_to_lapse += 1
            return
        with contextlib.suppress(Exception):
            await cost.redis(asyncio.shield(store.settle(lease.key, "release", delay_ms)))

    async def _book_reading_ahead(
        self, tube: TubeGroup, store: LeaseStore, lease: Lease, booking: Booking, cost: AttemptCost
    ) -> Reply:
        """Book ``booking`` and, in the same round trip, mark a read-ahead of the partition
        (when a place is free); the read-ahead leaves once the mark is written
        (:mod:`.read_ahead_driver`). The booking's answer."""
        ahead = self.ahead
        if not ahead.reserve():
            return await cost.redis(store.record(lease.key, booking))
        token = secrets.token_hex(8)
        deadline = asyncio.get_running_loop().time() + ahead.allow_ms / 1000  # before the mark's
        try:
            rec, mark = await cost.redis(
                store.record_and_mark(lease.key, booking, token, ahead.allow_ms)
            )
        except BaseException:
            ahead.abandon(store, lease.key, token)  # a mark it may have written, nothing read
            raise
        if mark.status == "ok":  # the batch is booked under this live lease
            ahead.send(tube, store, ReadAheadPlan(lease.key, token, booking.next, deadline))
        else:
            ahead.unreserve()
        return rec

    async def _read(
        self,
        spec: GroupSpec,
        lease: Lease,
        args: _ReadArgs,
        store: LeaseStore,
        cost: AttemptCost,
        hold: CursorHold | None,
    ) -> FetchOutcome | None:
        cmt, start, cursor = args.cmt, args.start, args.cursor
        p = lease.partition_key
        kept = self.kept.take(spec.name, p)  # served now or dropped: never twice
        tube = await self._tube_of(spec)
        if cmt < 0:  # no committed offset yet: the group's (or a reset's) start decides
            target = start or spec.start
            cost.rpcs += 1
            begin, top = await cost.broker.run(
                tube.register(p, 0 if target == "earliest" else LATEST_OFFSET)
            )
            self._stats.broker_registers += 1
            self._stats.offset_inits += 1
            got = await cost.redis(store.init(lease.key, begin, top))
            if got.status != "ok":
                return None
            cmt, cursor = -1 if got.committed is None else got.committed, begin
        cost.rpcs += 1  # at least; the read's own count replaces it
        if kept is not None and kept.fence.matches(args.fence, cmt) and kept.servable():
            read = kept_read(p, cmt, kept.end, kept.max_offset, kept.messages)  # no broker call
        else:
            self._stats.kept_dropped += int(kept is not None)
            read = await cost.broker.run(
                tube.read(
                    p,
                    cmt,
                    cursor_at_start=cursor == cmt,
                    max_messages=args.max_messages,
                    gather_until=args.gather_until,
                )
            )
        cost.rpcs += read.rpcs - 1
        self._stats.kept_served += int(read.from_kept)
        self._stats.broker_registers += int(read.registered)
        self._stats.cursor_resyncs += int(bool(read.resync))
        if read.status in ("throttled", "error"):
            await self._release(store, lease, read.wait_ms or _RETRY_BUSY_MS, cost)
            return None
        back = rewind_target(cmt, read)
        if back is not None:
            top = max(read.max, read.next)
            moved = rewind_committed(store, lease.key, cmt, back, top)
            if not await cost.redis(moved):
                await self._release(store, lease, 0, cost)
                return None
            self._stats.offset_rewinds += 1
            cmt = back
        skipped = max(0, read.start - cmt)
        if read.next < cmt:  # only a fresh register may move cmt back (see rewind_target)
            log.warning("partition %s read ended at %d below committed %d", p, read.next, cmt)
            await self._release(store, lease, self.settings.not_found_wait_ms, cost)
            return None
        n = len(read.messages)
        empty_wait = 0 if read.next > cmt else self.settings.not_found_wait_ms
        verified = read.status == "ok" or read.registered
        booking = Booking(
            base=cmt,
            next=read.next,
            max=read.max,
            count=n,
            wait_ms=empty_wait,
            cursor=read.next if verified else -1,
        )
        # broadcast scopes share the broker cursor: they never read ahead
        if lease.scope == "c" and n > 0 and read.status == "ok" and read.more:
            rec = await self._book_reading_ahead(tube, store, lease, booking, cost)
        else:
            fence = None if hold is None else hold.fence
            rec = await cost.redis(store.record(lease.key, booking, fence))
        if rec.status == "fenced":  # the mutex lapsed during the read: it may be wrong
            self._stats.cursor_lock_lapses += 1
            await self._release(store, lease, 0, cost)
            return None
        if rec.status != "ok":
            self._stats.empty_scans += int(rec.status == "released")
            return None
        self._stats.messages += n
        self._stats.broker_batches += read.batches
        self._stats.redeliveries += int(lease.redelivery > 0)
        self._stats.skipped_bytes += skipped
        top = max(read.max, read.next)
        position = Position(cmt, read.next, top, max(0, top - cmt), skipped)
        return FetchOutcome("ok", lease, read.messages, None, position)
