"""The gateway's consume engine: fetch, settle, extend, reset, pause, rate and lag.

State lives in Redis (:mod:`.store`, Lua scripts on Redis's clock); TubeMQ is read through one
shared consumer id per group (:mod:`.tube`). A fetch is acquire → [init] → [register at S when
the broker cursor is not at S] → GetMessage → CommitOffset → record: 2 broker RPCs and 2 Redis
round trips in the steady state (broadcast adds a cursor mutex: 2 more round trips). Settle,
extend and reset touch Redis only, so acks keep working while a broker or the master is down.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import secrets
from collections.abc import Mapping
from typing import Literal

import redis.asyncio as aioredis

from tubemq_aio.errors import TubeMQError
from tubemq_aio.gateway.engine_types import (
    ConsumeSettings,
    FetchOutcome,
    GatewayStats,
    GroupSpec,
    LagEntry,
    LagReport,
    Lease,
    LeaseRef,
    Mode,
    Position,
    ResetEntry,
)
from tubemq_aio.gateway.errors import (
    GatewayError,
    InvalidRequestError,
    LeaseConflictError,
    LeaseStaleError,
    StoreUnavailableError,
    TubeUnavailableError,
    UnknownGroupError,
)
from tubemq_aio.gateway.store import LeaseStore
from tubemq_aio.gateway.tube import LATEST_OFFSET, TubeGroup
from tubemq_aio.gateway.wake import Waker

__all__ = [
    "ConsumeService",
    "ConsumeSettings",
    "FetchOutcome",
    "GatewayStats",
    "GroupSpec",
    "LagEntry",
    "LagReport",
    "Lease",
    "LeaseRef",
    "Mode",
    "Position",
    "ResetEntry",
]

log = logging.getLogger("tubemq_aio.gateway")

#: Empty scans / 404s tried within one fetch before answering ``empty``.
_ATTEMPTS = 4
#: The broker work of a fetch must end this long (at most a quarter of the lease) before the
#: lease does, so a batch is never handed out on a lease that already expired.
_LEASE_MARGIN_MS = 2000
#: Broadcast: how long the per-partition cursor mutex lives and how long to wait for it.
_CURSOR_LOCK_MS = 5000
_RETRY_BUSY_MS = 50
#: A long poll re-tries at most this often (ms), whatever the scripts said.
_MIN_POLL_MS = 10
_BROKER_ERROR_REST_MS = 1000


@dataclasses.dataclass(slots=True)
class _Cost:
    """Broker RPCs and Redis round trips of one fetch attempt (fetches run concurrently)."""

    rpcs: int = 0
    trips: int = 0


class ConsumeService:
    """The consume engine of one gateway replica.

    Args:
        settings: engine settings; groups are fixed for the service's life.
    """

    def __init__(self, settings: ConsumeSettings) -> None:
        self.settings = settings
        self._specs = {g.name: g for g in settings.groups}
        self._tubes: dict[str, TubeGroup] = {}
        self._synced: dict[tuple[str, str], float] = {}
        self._stats = GatewayStats()
        self._client: aioredis.Redis | None = None
        self._store: LeaseStore | None = None
        self._waker: Waker | None = None
        self._closed = False
        self._started = False

    def __repr__(self) -> str:
        state = "closed" if self._closed else "running" if self._started else "new"
        return f"<ConsumeService {state} groups={sorted(self._specs)}>"

    # ---- life cycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect Redis, check the boot markers and start the wake listener (idempotent).

        Raises:
            StoreUnavailableError: Redis cannot be reached.
        """
        if self._closed:
            raise StoreUnavailableError("the consume service is closed")
        if self._started:
            return
        timeout = self.settings.rpc_timeout
        client = aioredis.Redis.from_url(
            self.settings.redis_url, socket_timeout=timeout, socket_connect_timeout=timeout
        )
        try:
            store = LeaseStore(client, timeout=timeout)
            await store.boot(list(self._specs), allow_init=self.settings.allow_init)
            waker = Waker(client, max_waiters=self.settings.max_long_poll_waiters)
            await waker.start()
        except BaseException:
            await client.aclose()
            raise
        self._client, self._store, self._waker = client, store, waker
        self._started = True

    async def close(self) -> None:
        """End every task and connection; idempotent and safe to call during :meth:`start`."""
        if self._closed:
            return
        self._closed = True
        if self._waker is not None:
            await self._waker.close()
        tubes, self._tubes = list(self._tubes.values()), {}
        for tube in tubes:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2 * self.settings.rpc_timeout):
                    await tube.close()
        if self._client is not None:
            await self._client.aclose()

    def _running(self) -> LeaseStore:
        if self._closed or self._store is None:
            raise StoreUnavailableError("the consume service is not running")
        return self._store

    def stats(self) -> GatewayStats:
        """A copy of the counters."""
        out = dataclasses.replace(self._stats)
        if self._store is not None:
            out.redis_roundtrips = self._store.roundtrips
            out.state_lost = self._store.lost
            out.store_errors = self._store.failures
        if self._waker is not None:
            out.long_poll_waiters = self._waker.waiting
        return out

    # ---- helpers -----------------------------------------------------------------------------

    def _spec(self, group: str) -> GroupSpec:
        spec = self._specs.get(group)
        if spec is None:
            raise UnknownGroupError(f"group {group!r} is not served by this gateway")
        return spec

    def _scope(self, spec: GroupSpec, client_id: str | None) -> str:
        if spec.mode == "clustering":
            if client_id is not None:
                raise InvalidRequestError("client_id is not allowed in a clustering group")
            return "c"
        if not isinstance(client_id, str) or not client_id:
            raise InvalidRequestError("client_id is required in a broadcast group")
        return f"b:{client_id}"

    async def _tube(self, spec: GroupSpec) -> TubeGroup:
        tube = self._tubes.get(spec.name)
        if tube is None:
            tube = TubeGroup(
                masters=self.settings.masters,
                group=spec.name,
                topics=spec.topics,
                deployment=self.settings.deployment,
                rpc_timeout=self.settings.rpc_timeout,
                credentials=self.settings.credentials,
            )
            self._tubes[spec.name] = tube
        try:
            await tube.start()
        except TubeMQError as exc:
            raise TubeUnavailableError(f"TubeMQ master unavailable: {exc!r}") from exc
        return tube

    async def _sync(self, spec: GroupSpec, scope: str, store: LeaseStore) -> None:
        now = asyncio.get_running_loop().time()
        if now - self._synced.get((spec.name, scope), -math.inf) < self.settings.sync_interval:
            return
        tube = await self._tube(spec)
        try:
            plist = await tube.partitions()
        except TubeMQError as exc:
            raise TubeUnavailableError(f"partition metadata unavailable: {exc!r}") from exc
        self._stats.fetch_redis_roundtrips += 1
        await store.sync_parts(spec.name, scope, plist)
        if scope != "c":
            self._stats.fetch_redis_roundtrips += 1
            await store.add_client(spec.name, scope)
        self._synced[(spec.name, scope)] = now

    def _lease_ms(self, spec: GroupSpec, lease_ms: int | None) -> int:
        if lease_ms is None:
            return spec.lease_ms
        if isinstance(lease_ms, bool) or not isinstance(lease_ms, int):
            raise InvalidRequestError("lease_ms must be an integer")
        if not spec.lease_ms_min <= lease_ms <= spec.lease_ms_max:
            raise InvalidRequestError(
                f"lease_ms must be in [{spec.lease_ms_min}, {spec.lease_ms_max}]"
            )
        return lease_ms

    # ---- fetch -------------------------------------------------------------------------------

    async def fetch(
        self,
        group: str,
        *,
        client_id: str | None,
        wait_ms: int = 0,
        lease_ms: int | None = None,
        holder: str = "",
    ) -> FetchOutcome:
        """Lease one partition and return its next batch (or why not).

        Args:
            group: a configured group.
            client_id: required in broadcast groups, refused in clustering ones.
            wait_ms: long poll: wait up to this long (0–30000) for a batch.
            lease_ms: lease length (default: the group's).
            holder: free text stored with the lease (e.g. principal@ip).

        Raises:
            UnknownGroupError / InvalidRequestError: bad arguments (nothing touched).
            StateLostError / StoreUnavailableError: Redis lost its state / is down.
            TubeUnavailableError: the master or the partition's broker failed.
            TooManyWaitersError: too many long polls wait on this replica.
        """
        spec = self._spec(group)
        scope = self._scope(spec, client_id)
        lease = self._lease_ms(spec, lease_ms)
        if isinstance(wait_ms, bool) or not isinstance(wait_ms, int) or not 0 <= wait_ms <= 30000:
            raise InvalidRequestError("wait_ms must be an integer in [0, 30000]")
        if not isinstance(holder, str):
            raise InvalidRequestError("holder must be a string")
        store = self._running()
        self._stats.fetches += 1
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_ms / 1000
        while True:
            await self._sync(spec, scope, store)
            outcome = await self._fetch_once(spec, scope, lease, holder[:200], store)
            left_ms = int((deadline - loop.time()) * 1000)
            if outcome.status not in ("empty", "busy") or left_ms <= 0:
                break
            assert self._waker is not None
            pause = max(_MIN_POLL_MS, outcome.retry_after_ms or 0)  # never a busy loop on Redis
            await self._waker.wait(f"{group}|{scope}", min(left_ms, pause))
        name = f"fetches_{outcome.status}"
        setattr(self._stats, name, getattr(self._stats, name) + 1)
        return outcome

    async def _fetch_once(
        self, spec: GroupSpec, scope: str, lease_ms: int, holder: str, store: LeaseStore
    ) -> FetchOutcome:
        outcome = FetchOutcome("empty", None, (), retry_after_ms=self.settings.not_found_wait_ms)
        for _ in range(_ATTEMPTS):
            cost = _Cost()
            try:
                result = await self._attempt(spec, scope, lease_ms, holder, store, cost)
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
        self, spec: GroupSpec, scope: str, lease_ms: int, holder: str, store: LeaseStore,
        cost: _Cost,
    ) -> FetchOutcome | None:  # fmt: skip
        """One acquire and, with a lease, one read; None when another attempt may find data."""
        lease_id = secrets.token_hex(16)
        cost.trips += 1
        got = await store.acquire(spec.name, scope, lease_id, lease_ms, holder)
        if got.status == "paused":
            return FetchOutcome("paused", None, ())
        if got.status == "throttled":
            return FetchOutcome("throttled", None, (), retry_after_ms=int(got.values[0]))
        if got.status == "none":
            return self._idle(got.now, int(got.values[0]), int(got.values[1]))
        p, cmt, lexp, rc, start, cursor = got.values
        lease = Lease(spec.name, scope, str(p), lease_id, int(lexp), int(rc))
        return await self._read_leased(
            spec, lease, int(cmt), str(start), int(cursor), lexp - got.now, store, cost
        )

    def _idle(self, now: int, next_ready: int, next_expiry: int) -> FetchOutcome:
        if next_ready >= 0:
            return FetchOutcome("empty", None, (), retry_after_ms=max(1, next_ready - now))
        if next_expiry >= 0:
            return FetchOutcome("busy", None, (), retry_after_ms=max(1, next_expiry - now))
        return FetchOutcome("empty", None, (), retry_after_ms=self.settings.not_found_wait_ms)

    async def _read_leased(
        self, spec: GroupSpec, lease: Lease, cmt: int, start: str, cursor: int,
        left_ms: int, store: LeaseStore, cost: _Cost,
    ) -> FetchOutcome | None:  # fmt: skip
        """Read the leased partition; None when the caller should try another one."""
        unlock: tuple[str, str] | None = None
        try:
            margin = min(_LEASE_MARGIN_MS, left_ms // 4)
            async with asyncio.timeout(max(0.05, (left_ms - margin) / 1000)):
                if lease.scope != "c":
                    unlock = await self._lock_cursor(store, spec.name, lease.partition_key, cost)
                    if unlock is None:
                        await self._release(store, lease, _RETRY_BUSY_MS, cost)
                        return FetchOutcome("busy", None, (), retry_after_ms=_RETRY_BUSY_MS)
                return await self._read(spec, lease, cmt, start, cursor, store, cost)
        except GatewayError:  # Redis trouble (or lost state) is not the broker's fault
            await self._release(store, lease, 0, cost)
            raise
        except (TubeMQError, TimeoutError, OSError) as exc:
            self._stats.broker_errors += 1
            await self._release(store, lease, _BROKER_ERROR_REST_MS, cost)
            raise TubeUnavailableError(f"reading {lease.partition_key} failed: {exc!r}") from exc
        except BaseException:
            await self._release(store, lease, 0, cost)
            raise
        finally:
            if unlock is not None:
                with contextlib.suppress(Exception):  # it lapses on its own within 5 s
                    cost.trips += 1
                    await store.unlock(*unlock)

    async def _lock_cursor(
        self, store: LeaseStore, group: str, p: str, cost: _Cost
    ) -> tuple[str, str] | None:
        key, token = f"tgw:{{g:{group}}}:curlock:{p}", secrets.token_hex(8)
        cost.trips += 1
        return (key, token) if await store.try_lock(key, token, _CURSOR_LOCK_MS) else None

    async def _release(self, store: LeaseStore, lease: Lease, delay_ms: int, cost: _Cost) -> None:
        """Give a lease back from inside a fetch (shielded: it must not be left dangling)."""
        with contextlib.suppress(Exception):
            cost.trips += 1
            await asyncio.shield(
                store.settle(
                    lease.group, lease.scope, lease.partition_key, lease.lease_id, "release",
                    delay_ms,
                )
            )  # fmt: skip

    async def _read(
        self, spec: GroupSpec, lease: Lease, cmt: int, start: str, cursor: int,
        store: LeaseStore, cost: _Cost,
    ) -> FetchOutcome | None:  # fmt: skip
        tube = await self._tube(spec)
        p, lid = lease.partition_key, lease.lease_id
        if cmt < 0:  # no committed offset yet: the group's (or a reset's) start decides
            target = start or spec.start
            cost.rpcs += 1
            begin, top = await tube.register(p, 0 if target == "earliest" else LATEST_OFFSET)
            self._stats.broker_registers += 1
            cost.trips += 1
            got = await store.init(spec.name, lease.scope, p, lid, begin, top)
            if got.status != "ok":
                return None
            cmt, cursor = int(got.values[0]), begin
        cost.rpcs += 1  # at least; the read's own count replaces it
        read = await tube.read(p, cmt, cursor_at_start=cursor == cmt)
        cost.rpcs += read.rpcs - 1
        self._stats.broker_registers += int(read.registered)
        self._stats.cursor_resyncs += int(bool(read.resync))
        if read.status in ("throttled", "error"):
            await self._release(store, lease, read.wait_ms or _RETRY_BUSY_MS, cost)
            return None
        skipped = max(0, read.start - cmt)
        if read.next < cmt:  # the partition shrank below cmt (recreated topic): do not move back
            log.warning("partition %s ends at %d below committed %d", p, read.next, cmt)
            await self._release(store, lease, self.settings.not_found_wait_ms, cost)
            return None
        n = len(read.messages)
        empty_wait = 0 if read.next > cmt else self.settings.not_found_wait_ms
        verified = read.status == "ok" or read.registered
        cost.trips += 1
        rec = await store.record(
            spec.name, lease.scope, p, lid, cmt, read.next, read.max, n, empty_wait,
            read.next if verified else -1,
        )  # fmt: skip
        if rec.status != "ok":
            self._stats.empty_scans += int(rec.status == "released")
            return None
        self._stats.messages += n
        self._stats.redeliveries += int(lease.redelivery > 0)
        self._stats.skipped_bytes += skipped
        top = max(read.max, read.next)
        position = Position(cmt, read.next, top, max(0, top - cmt), skipped)
        return FetchOutcome("ok", lease, read.messages, None, position)

    # ---- settle / extend ---------------------------------------------------------------------

    async def settle(
        self, lease: LeaseRef, action: Literal["ack", "nack", "release"], *, delay_ms: int = 0
    ) -> Literal["acked", "already_acked", "nacked", "released"]:
        """Ack (commit the batch), nack (redeliver after ``delay_ms``) or release a lease.

        Raises:
            LeaseStaleError: the partition was leased again (or reset) since.
            LeaseConflictError: the committed offset moved under the lease.
            InvalidRequestError / UnknownGroupError: bad arguments.
            StateLostError / StoreUnavailableError: Redis lost its state / is down.
        """
        self._spec(lease.group)
        if action not in ("ack", "nack", "release"):
            raise InvalidRequestError("action must be ack, nack or release")
        if isinstance(delay_ms, bool) or not isinstance(delay_ms, int):
            raise InvalidRequestError("delay_ms must be an integer")
        if not 0 <= delay_ms <= 3_600_000:
            raise InvalidRequestError("delay_ms must be in [0, 3600000]")
        store = self._running()
        got = await store.settle(
            lease.group, lease.scope, lease.partition_key, lease.lease_id, action, delay_ms
        )
        if got.status == "stale":
            self._stats.stale += 1
            raise LeaseStaleError("the lease was taken over or reset")
        if got.status == "conflict":
            self._stats.conflicts += 1
            raise LeaseConflictError("the committed offset moved under the lease (reset)")
        if got.status == "already":
            self._stats.already_settled += 1
            return (
                "already_acked"
                if action == "ack"
                else ("nacked" if action == "nack" else "released")
            )
        counter = {"acked": "acks", "nacked": "nacks", "released": "releases"}[got.status]
        setattr(self._stats, counter, getattr(self._stats, counter) + 1)
        return got.status  # type: ignore[return-value]

    async def extend(self, lease: LeaseRef, lease_ms: int) -> int:
        """Keep a lease ``lease_ms`` longer from now; returns the new expiry (Redis ms).

        Raises:
            LeaseStaleError: the lease was taken over, reset or settled.
            InvalidRequestError: ``lease_ms`` out of the group's bounds.
        """
        spec = self._spec(lease.group)
        ms = self._lease_ms(spec, lease_ms)
        store = self._running()
        got = await store.extend(lease.group, lease.scope, lease.partition_key, lease.lease_id, ms)
        if got.status != "ok":
            self._stats.stale += 1
            raise LeaseStaleError("the lease was taken over, reset or settled")
        self._stats.extends += 1
        return int(got.values[0])

    # ---- admin -------------------------------------------------------------------------------

    async def reset(
        self,
        group: str,
        to: Literal["earliest", "latest"] | Mapping[str, int],
        *,
        client_id: str | None = None,
    ) -> list[ResetEntry]:
        """Move committed offsets; outstanding leases get 409 afterwards. No broker call.

        ``earliest``/``latest`` resolve at each partition's next fetch. In a broadcast group
        without ``client_id`` every known client is reset.

        Raises:
            InvalidRequestError: bad target, offset or partition key.
        """
        spec = self._spec(group)
        pairs: list[tuple[str, int]] = []
        target = ""
        if isinstance(to, str):
            if to not in ("earliest", "latest"):
                raise InvalidRequestError("to must be 'earliest', 'latest' or {partition: offset}")
            target = to
        elif isinstance(to, Mapping) and to:
            for p, off in to.items():
                if isinstance(off, bool) or not isinstance(off, int) or off < 0:
                    raise InvalidRequestError(f"offset of {p!r} must be an integer >= 0")
                pairs.append((str(p), off))
        else:
            raise InvalidRequestError("to must be 'earliest', 'latest' or {partition: offset}")
        store = self._running()
        if spec.mode == "broadcast" and client_id is None:
            scopes = await store.clients(group)
        else:
            scopes = [self._scope(spec, client_id)]
        plist = await self._known_partitions(spec)
        unknown = [p for p, _ in pairs if p not in plist]
        if unknown:
            raise InvalidRequestError(f"unknown partitions: {unknown}")
        out: list[ResetEntry] = []
        for scope in scopes:
            got = await store.reset(group, scope, target, pairs, plist)
            vals = got.values
            for i in range(0, len(vals), 3):
                new: int | str = vals[i + 2] if target else int(vals[i + 2])
                old = int(vals[i + 1])
                out.append(ResetEntry(str(vals[i]), None if old < 0 else old, new, scope))
            self._synced.pop((group, scope), None)
        self._stats.resets += 1
        return out

    async def _known_partitions(self, spec: GroupSpec) -> list[str]:
        try:
            tube = await self._tube(spec)
            return await tube.partitions()
        except (TubeMQError, TubeUnavailableError):
            return await self._running().members(spec.name, "c")

    async def pause(self, group: str) -> None:
        """Make every replica's next fetch of ``group`` answer ``paused``."""
        self._spec(group)
        await self._running().set_paused(group, True)

    async def resume(self, group: str) -> None:
        """Undo :meth:`pause`."""
        self._spec(group)
        await self._running().set_paused(group, False)

    async def set_rate(self, group: str, messages_per_second: float, burst: int | None) -> None:
        """One consume limit for the group, shared by all replicas (0 = off).

        Raises:
            InvalidRequestError: a negative, NaN or infinite rate, or a negative burst.
        """
        self._spec(group)
        rate = messages_per_second
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not math.isfinite(rate):
            raise InvalidRequestError("messages_per_second must be a finite number")
        if rate < 0:
            raise InvalidRequestError("messages_per_second must be >= 0")
        if burst is not None and (
            isinstance(burst, bool) or not isinstance(burst, int) or burst < 0
        ):
            raise InvalidRequestError("burst must be an integer >= 0")
        await self._running().set_rate(group, float(rate), max(1, burst or math.ceil(rate)))

    async def lag(self, group: str, *, client_id: str | None = None) -> LagReport:
        """Backlog per partition in index bytes (shared stores make it an upper bound)."""
        spec = self._spec(group)
        scope = self._scope(spec, client_id)
        state = await self._running().dump(group, scope)
        sc = state.scopes[scope]
        entries: list[LagEntry] = []
        for p in sorted(sc.members):
            ps = sc.part(p)
            top = None if ps.mx < 0 else ps.mx
            lag = None if ps.cmt is None or top is None else max(0, top - ps.cmt)
            live = ps.lid is not None and p in sc.leased
            entries.append(
                LagEntry(
                    p, ps.cmt, top, lag,
                    lease_holder=ps.lh if live else None,
                    lease_expires_at=ps.lexp if live else None,
                    redelivery=ps.rc, gone=ps.gone,
                )
            )  # fmt: skip
        total = sum(e.lag_bytes or 0 for e in entries)
        return LagReport(group, scope, tuple(entries), total)

    async def readiness(self) -> dict[str, bool]:
        """``{"redis": PING answered, "master": the master answered the last metadata query}``."""
        redis_ok = self._store is not None and not self._closed and await self._store.ping()
        master_ok = False
        if self._specs and not self._closed:
            spec = next(iter(self._specs.values()))
            try:
                async with asyncio.timeout(self.settings.rpc_timeout):
                    tube = await self._tube(spec)
                    await tube.partitions()
                master_ok = tube.master_ok
            except (TubeMQError, TimeoutError):
                master_ok = False
        return {"redis": redis_ok, "master": master_ok}
