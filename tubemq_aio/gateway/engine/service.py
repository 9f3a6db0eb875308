"""The gateway's consume engine: fetch (one attempt in :mod:`.fetch_attempt`), settle, extend,
reset, pause, rate and lag.

State lives in Redis (:mod:`tubemq_aio.gateway.leases.lease_store`, Lua scripts on Redis's clock);
TubeMQ is read through one shared consumer id per group
(:mod:`~tubemq_aio.gateway.tubemq.tube_group`). A fetch is
acquire → [init] → [register at S when the broker cursor is not at S] → GetMessage →
CommitOffset → record: 2 broker RPCs and 2 Redis round trips in the steady state (broadcast adds
a cursor mutex: 2 more round trips). With ``kept_batch_bytes`` > 0 the record also marks a
read-ahead, sent once the fetch returns (:mod:`.read_ahead_driver`, tasks of :attr:`tasks`), and
a fetch served from what it kept costs no broker RPC. Settle, extend and reset touch Redis only,
so acks keep working while a broker or the master is down.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Coroutine, Mapping
from datetime import datetime
from typing import Any, Literal

from tubemq_aio.errors import TubeMQError
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.engine.ack_pipeline import settle_result
from tubemq_aio.gateway.engine.arguments import (
    checked_fetch,
    checked_lease_ms,
    checked_rate,
    checked_reset,
    checked_settle,
    scope_of,
)
from tubemq_aio.gateway.engine.data import (
    ConsumeSettings,
    FetchArgs,
    FetchOutcome,
    FetchQuery,
    GatewayStats,
    LagReport,
    ResetEntry,
)
from tubemq_aio.gateway.engine.dead_letters import DeadLetters
from tubemq_aio.gateway.engine.fetch_attempt import BatchReader
from tubemq_aio.gateway.engine.lag import read_lag
from tubemq_aio.gateway.engine.offsets_reset import reset_offsets
from tubemq_aio.gateway.engine.port import PiggybackAcks
from tubemq_aio.gateway.engine.scope_sync import ScopeSync
from tubemq_aio.gateway.engine.waker import Waker
from tubemq_aio.gateway.errors import (
    InvalidRequestError,
    LeaseStaleError,
    StoreUnavailableError,
    TubeUnavailableError,
    UnknownGroupError,
)
from tubemq_aio.gateway.leases.lease_key import LeaseKey
from tubemq_aio.gateway.leases.lease_store import LeaseStore
from tubemq_aio.gateway.leases.redis_client import open_redis, parse_redis_url
from tubemq_aio.gateway.tubemq.session_table import SessionTable
from tubemq_aio.gateway.tubemq.tube_group import TubeGroup
from tubemq_aio.gateway.tubemq.web_port import web_port_hint
from tubemq_aio.supervisor import Supervisor

__all__ = ["ConsumeService"]

log = logging.getLogger("tubemq_aio.gateway")

#: A long poll re-tries at most this often (ms), whatever the scripts said.
_MIN_POLL_MS = 10


def _no_count(_group: str, _count: int) -> None:
    """Counts nothing (an engine without dead-letter metrics)."""


class ConsumeService:
    """The consume engine of one gateway replica.

    Its collaborators are built here and held for its life: the Redis client (no connection
    before the first round trip), the lease store (:attr:`store`), the TubeMQ sessions
    (:attr:`sessions`) and the wake listener; :meth:`start` boots the store and starts the
    listener. The housekeeper is handed :attr:`store` and :attr:`sessions`.

    Args:
        settings: engine settings; groups are fixed for the service's life.
        dead_letters: where poison batches go (default: nowhere, they are delivered as usual).
    """

    def __init__(
        self, settings: ConsumeSettings, *, dead_letters: DeadLetters | None = None
    ) -> None:
        self.settings = settings
        #: Where poison batches go (the replica's producer; none by default).
        self.dead_letters = dead_letters or DeadLetters(None, {}, settings.rpc_timeout, _no_count)
        self._specs = {g.name: g for g in settings.groups}
        #: The replica's TubeMQ sessions, one per group (shared with the housekeeper).
        self.sessions = SessionTable(settings)
        self._stats = GatewayStats()
        self._sync = ScopeSync(self.sessions, self._stats, settings.sync_interval)
        #: The owner of the engine's background tasks (wake listener, cursor renewals,
        #: read-aheads).
        self.tasks = Supervisor("tubemq-gateway")
        self._reader = BatchReader(settings, self._stats, self._tube, self.tasks)
        # Blocking: a burst of round trips waits for a free connection instead of failing
        # with "too many connections", which would read as a Redis outage (503).
        topology = parse_redis_url(settings.redis)
        connections = settings.redis_max_connections
        self._client = open_redis(
            topology, max_connections=connections, timeout=settings.rpc_timeout
        )
        #: The consume state in Redis (shared with the housekeeper; booted by :meth:`start`).
        self.store = LeaseStore(
            self._client,
            timeout=settings.rpc_timeout,
            # a cluster's per-node pools fail when full: keep one free for the wake listener
            max_inflight=connections - 1 if topology.kind == "cluster" else None,
            ack_replicas=settings.redis_ack_replicas,
            ack_wait_ms=settings.redis_ack_wait_ms,
        )
        self._waker = Waker(
            self._client, max_waiters=settings.max_long_poll_waiters, tasks=self.tasks
        )
        self._closed = False
        self._started = False

    def __repr__(self) -> str:
        state = "closed" if self._closed else "running" if self._started else "new"
        return f"<ConsumeService {state} groups={sorted(self._specs)}>"

    # ---- life cycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Check the boot markers in Redis and start the wake listener (idempotent).

        Raises:
            StoreUnavailableError: Redis cannot be reached, or the service is closed.
            StateLostError: Redis lost the gateway's state.
        """
        if self._closed:
            raise StoreUnavailableError("the consume service is closed")
        if self._started:
            return
        try:
            await self.store.boot(list(self._specs), allow_init=self.settings.allow_init)
            await self._waker.start()
        except BaseException:
            await self._client.aclose()
            raise
        self._started = True

    async def close(self) -> None:
        """End every task and connection; idempotent and safe to call during :meth:`start`."""
        if self._closed:
            return
        self._closed = True
        await self._waker.close()
        leftover = self.tasks.cancel()  # cursor renewals of fetches still running
        if leftover:
            _, pending = await asyncio.wait(leftover, timeout=2 * self.settings.rpc_timeout)
            if pending:
                log.warning("%d engine tasks did not end in time", len(pending))
        self._reader.close()
        await self.sessions.close_all()
        await self._client.aclose()

    def _running(self) -> LeaseStore:
        if self._closed or not self._started:
            raise StoreUnavailableError("the consume service is not running")
        return self.store

    def stats(self) -> GatewayStats:
        """A copy of the counters."""
        out = dataclasses.replace(self._stats)
        out.redis_roundtrips = self.store.roundtrips
        out.state_lost = self.store.lost
        out.store_errors = self.store.failures
        out.ack_wait_short = self.store.wait_short
        out.long_poll_waiters = self._waker.waiting
        return out

    # ---- helpers -----------------------------------------------------------------------------

    def _spec(self, group: str) -> GroupSpec:
        spec = self._specs.get(group)
        if spec is None:
            raise UnknownGroupError(f"group {group!r} is not served by this gateway")
        return spec

    async def _tube(self, spec: GroupSpec) -> TubeGroup:
        return await self.sessions.get(spec)

    # ---- fetch -------------------------------------------------------------------------------

    async def fetch(self, query: FetchQuery, *, acks: PiggybackAcks | None = None) -> FetchOutcome:
        """Lease one partition and return its next batch (or why not).

        Args:
            query: the group, client id, long poll, lease length, ``max_messages``, holder and
                owner asked for (see :class:`FetchQuery`). The first broker batch is always
                delivered whole (the broker sizes it), whatever ``max_messages`` says.
            acks: leases to ack first; they ride in the first acquire's Redis round trip, or
                are settled one by one when it cannot carry them or the fetch failed first:
                when the fetch returns or raises, every ref has its result.

        A poison batch goes to its group's dead-letter topic first (:attr:`dead_letters`); a
        cancelled fetch gives back what it leased.

        Raises:
            UnknownGroupError / InvalidRequestError: bad arguments (nothing touched).
            StateLostError / StoreUnavailableError: Redis lost its state / is down.
            TubeUnavailableError: the master or the partition's broker failed.
            TooManyWaitersError: too many long polls wait on this replica.
        """
        try:
            spec = self._spec(query.group)
            scope = scope_of(spec, query.client_id)
            holder, owner, wait_ms = query.holder, query.owner, query.wait_ms
            request = FetchArgs(
                spec=spec,
                scope=scope,
                lease_ms=checked_lease_ms(spec, query.lease_ms),
                holder=holder[:200],
                owner=owner[:200],
                max_messages=checked_fetch(wait_ms, holder, owner, query.max_messages),
                wait_ms=wait_ms,
            )
            store = self._running()
            riding = acks
            if acks is not None and (
                store.ack_replicas > 0 or any(ref.group not in self._specs for ref in acks.refs)
            ):
                # settled one by one below: they name a bad group, or each ack waits for the
                # replicas on its own connection (WAIT counts that connection's writes)
                riding = None
            return await self.dead_letters.fetch(
                spec.name, self, functools.partial(self._fetch_one, request, store, riding)
            )
        finally:  # also when the fetch failed: the acks were asked for whatever came after
            if acks is not None and acks.pending:
                await acks.settle_each(self._ack)

    async def _ack(self, ref: LeaseKey) -> str:
        return await self.settle(ref, "ack")

    async def _fetch_one(
        self, request: FetchArgs, store: LeaseStore, acks: PiggybackAcks | None
    ) -> FetchOutcome:
        """One fetch as the client asked it (no dead letters): long polls until a batch,
        ``throttled`` or the deadline."""
        spec, scope = request.spec, request.scope
        self._stats.fetches += 1
        loop = asyncio.get_running_loop()
        deadline = loop.time() + request.wait_ms / 1000
        with self.sessions.in_use(spec.name):
            while True:
                await self._sync(spec, scope, store, request.owner)
                outcome = await self._reader.fetch_once(request, store, acks)
                left_ms = int((deadline - loop.time()) * 1000)
                if outcome.status not in ("empty", "busy", "paused") or left_ms <= 0:
                    break
                if self._waker.draining:  # shutting down: answer now, the client polls again
                    break
                pause = max(_MIN_POLL_MS, outcome.retry_after_ms or 0)  # no busy loop on Redis
                await self._waker.wait(f"{spec.name}|{scope}", min(left_ms, pause))
        name = f"fetches_{outcome.status}"
        setattr(self._stats, name, getattr(self._stats, name) + 1)
        return outcome

    def drain(self) -> None:
        """The replica is shutting down: every long poll answers at once (``empty``, ``busy``
        or ``paused``, as when its wait ends) and no new one waits."""
        self._waker.drain()

    # ---- settle / extend ---------------------------------------------------------------------

    async def settle(
        self, lease: LeaseKey, action: Literal["ack", "nack", "release"], *, delay_ms: int = 0
    ) -> Literal["acked", "already_acked", "nacked", "released"]:
        """Ack (commit the batch), nack (redeliver after ``delay_ms``) or release a lease.

        Raises:
            LeaseStaleError: the partition was leased again (or reset) since.
            LeaseConflictError: the committed offset moved under the lease.
            InvalidRequestError / UnknownGroupError: bad arguments.
            StateLostError / StoreUnavailableError: Redis lost its state / is down.
        """
        self._spec(lease.group)
        checked_settle(action, delay_ms)
        store = self._running()
        self._stats.settle_redis_roundtrips += 1
        got = await store.settle(lease, action, delay_ms)
        return settle_result(self._stats, got, action)

    async def extend(self, lease: LeaseKey, lease_ms: int) -> int:
        """Keep a lease ``lease_ms`` longer from now; returns the new expiry (Redis ms).

        Raises:
            LeaseStaleError: the lease was taken over, reset or settled.
            InvalidRequestError: ``lease_ms`` out of the group's bounds.
        """
        spec = self._spec(lease.group)
        ms = checked_lease_ms(spec, lease_ms)
        store = self._running()
        got = await store.extend(lease, ms)
        if got.status != "ok":
            self._stats.stale += 1
            raise LeaseStaleError("the lease was taken over, reset or settled")
        self._stats.extends += 1
        return got.lease_expiry

    # ---- admin -------------------------------------------------------------------------------

    async def reset(
        self,
        group: str,
        to: Literal["earliest", "latest"] | Mapping[str, int] | datetime,
        *,
        client_id: str | None = None,
    ) -> list[ResetEntry]:
        """Move committed offsets; outstanding leases get 409 afterwards.

        ``earliest`` resolves at each partition's next fetch (no broker call); ``latest`` is
        each partition's max offset now (one broker register per partition by the group
        ``{group}_planner``; at the next fetch when TubeMQ does not answer). A
        timezone-aware ``datetime`` moves every partition to its first message stamped
        (``msg_time``) at or after it, found by the SDK's time search with the group
        ``{group}_planner`` (docs/protocol/time.md). In a broadcast group without
        ``client_id`` every known client is reset.

        Raises:
            InvalidRequestError: bad target, offset or partition key, or a naive time.
            TubeMQError: the time search failed (master or broker).
        """
        spec = self._spec(group)
        store = self._running()
        known = await self._known_partitions(spec)
        if isinstance(to, datetime):
            if to.tzinfo is None:
                raise InvalidRequestError("to_time needs a zone (Z or +hh:mm)")
            tube = await self._tube(spec)
            target, pairs = "", list((await tube.offsets_for_times(known, to)).items())
        else:
            target, pairs = checked_reset(to)
            if target == "latest" and known:
                target, pairs = await self._latest_now(spec, known)
        scopes, out = await reset_offsets(store, spec, client_id, target, pairs, known)
        for scope in scopes:
            self._sync.forget(group, scope)
        self._stats.resets += 1
        return out

    async def _latest_now(
        self, spec: GroupSpec, known: list[str]
    ) -> tuple[str, list[tuple[str, int]]]:
        """``latest`` as each partition's max offset now, so that what is produced after the
        reset is delivered; when TubeMQ cannot be asked, ``latest`` itself (resolved at each
        partition's next fetch: what comes before that fetch is skipped)."""
        try:
            tube = await self._tube(spec)
            return "", list((await tube.latest_offsets(known)).items())
        except (TubeMQError, TubeUnavailableError) as exc:
            log.warning(
                "reset of group %s to latest: TubeMQ did not answer (%r); each partition moves "
                "at its next fetch instead",
                spec.name,
                exc,
            )
            return "latest", []

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
            InvalidRequestError: a negative, NaN or infinite rate, a rate between 0 and
                :data:`MIN_RATE`, or a negative burst.
        """
        self._spec(group)
        await self._running().set_rate(group, *checked_rate(messages_per_second, burst))

    async def lag(self, group: str, *, client_id: str | None = None) -> LagReport:
        """Backlog per partition in index bytes (shared stores make it an upper bound).

        Raises:
            StateLostError: the group's state is missing in Redis (never a zero backlog).
        """
        spec = self._spec(group)
        scope = scope_of(spec, client_id)
        return await read_lag(self._running(), group, scope)

    async def readiness(self, within: float) -> dict[str, bool]:
        """``{"redis": PING answered, "master": the master answered a metadata query}``, the
        two asked at once and each False when not answered within ``within`` seconds, so the
        answer names which one is away (a stalled Redis, a cluster that is down)."""

        async def redis() -> bool:
            return self._started and not self._closed and await self.store.ping()

        async def master() -> bool:
            if not self._specs or self._closed:
                return False
            return await self.sessions.master_answers(list(self._specs.values()))

        async def answered(check: Coroutine[Any, Any, bool]) -> bool:
            try:
                async with asyncio.timeout(within):
                    return await check
            except TimeoutError:
                return False

        redis_ok, master_ok = await asyncio.gather(answered(redis()), answered(master()))
        return {"redis": redis_ok, "master": master_ok}

    def hints(self) -> dict[str, str]:
        """What an operator can do about a failed readiness check, by check name, when the
        engine knows (``{"master": WEB_PORT_HINT}`` after the master answered in HTTP)."""
        hint = web_port_hint(self.sessions.master_error)
        return {} if hint is None else {"master": hint}
