"""The gateway's consume engine: fetch (read path in :mod:`.reader`), settle, extend, reset,
pause, rate and lag.

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
from collections import Counter
from collections.abc import Mapping
from typing import Literal

from tubemq_aio.errors import TubeMQError
from tubemq_aio.gateway.engine.data import (
    MAX_OFFSET,
    MIN_RATE,
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
from tubemq_aio.gateway.engine.fetch_attempt import BatchReader
from tubemq_aio.gateway.engine.group_sessions import TubeGroup
from tubemq_aio.gateway.engine.waker import Waker
from tubemq_aio.gateway.errors import (
    InvalidRequestError,
    LeaseConflictError,
    LeaseStaleError,
    StateLostError,
    StoreUnavailableError,
    TooManyClientsError,
    TubeUnavailableError,
    UnknownGroupError,
)
from tubemq_aio.gateway.leases.store import LeaseStore
from tubemq_aio.gateway.redis_client import RedisClient, open_redis, parse_redis_url

__all__ = [
    "MAX_OFFSET",
    "MIN_RATE",
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

#: The largest ``max_messages`` a fetch may ask for.
MAX_MESSAGES_LIMIT = 10_000
#: Scopes a replica remembers as synced before it forgets those not synced lately.
_SYNCED_MAX = 4096
#: A long poll re-tries at most this often (ms), whatever the scripts said.
_MIN_POLL_MS = 10


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
        self._last_use: dict[str, float] = {}  # group -> loop time a client fetch last ended
        self._busy: Counter[str] = Counter()  # group -> fetches running now
        self._stats = GatewayStats()
        self._reader = BatchReader(settings, self._stats, self._tube)
        self._client: RedisClient | None = None
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
        # Blocking: a burst of round trips waits for a free connection instead of failing
        # with "too many connections", which would read as a Redis outage (503).
        topology = parse_redis_url(self.settings.redis_url)
        connections = self.settings.redis_max_connections
        client = open_redis(topology, max_connections=connections, timeout=timeout)
        try:
            store = LeaseStore(
                client,
                timeout=timeout,
                # a cluster's per-node pools fail when full: keep one free for the wake listener
                max_inflight=connections - 1 if topology.kind == "cluster" else None,
                ack_replicas=self.settings.redis_ack_replicas,
                ack_wait_ms=self.settings.redis_ack_wait_ms,
            )
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
            out.ack_wait_short = self._store.wait_short
        if self._waker is not None:
            out.long_poll_waiters = self._waker.waiting
        return out

    # ---- for the housekeeper -----------------------------------------------------------------

    def lease_store(self) -> LeaseStore:
        """The running Redis store.

        Raises:
            StoreUnavailableError: the service is not running.
        """
        return self._running()

    async def session(self, group: str) -> TubeGroup:
        """The group's started TubeMQ session on this replica (opened if needed; not counted
        as client use, so a session opened only for lag probes stays idle).

        Raises:
            UnknownGroupError: the group is not served.
            TubeUnavailableError: the master cannot be reached.
        """
        return await self._tube(self._spec(group))

    def session_use(self) -> tuple[list[str], dict[str, float], dict[str, int]]:
        """Open sessions, when a client fetch last ended per group, fetches running now."""
        return list(self._tubes), dict(self._last_use), dict(self._busy)

    async def close_session(self, group: str) -> bool:
        """Close the group's TubeMQ session on this replica unless a fetch is using it; the
        next fetch opens a new one. Returns whether one was closed."""
        if self._busy[group] > 0 or group not in self._tubes:
            return False
        tube = self._tubes.pop(group)  # synchronously: a fetch from now on opens a new one
        with contextlib.suppress(Exception):
            async with asyncio.timeout(2 * self.settings.rpc_timeout):
                await tube.close()
        return True

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
                ssl_context=self.settings.ssl_context,
                tls_server_hostname=self.settings.tls_server_hostname,
            )
            self._tubes[spec.name] = tube
        try:
            await tube.start()
        except TubeMQError as exc:
            raise TubeUnavailableError(f"TubeMQ master unavailable: {exc!r}") from exc
        return tube

    async def _sync(self, spec: GroupSpec, scope: str, store: LeaseStore, owner: str) -> None:
        now = asyncio.get_running_loop().time()
        if now - self._synced.get((spec.name, scope), -math.inf) < self.settings.sync_interval:
            return
        tube = await self._tube(spec)
        try:
            plist = await tube.partitions()
        except TubeMQError as exc:
            raise TubeUnavailableError(f"partition metadata unavailable: {exc!r}") from exc
        if scope != "c":  # stamped first: the housekeeper never collects a scope being synced
            self._stats.fetch_redis_roundtrips += 1
            added = await store.add_client(
                spec.name, scope, spec.max_clients, owner, spec.max_clients_per_key
            )
            if added != "ok":
                self._stats.clients_refused += 1
                limit = spec.max_clients if added == "group_full" else spec.max_clients_per_key
                whose = "the broadcast group" if added == "group_full" else "this API key"
                raise TooManyClientsError(
                    f"{whose} keeps at most {limit} client_ids; an idle one is collected by the "
                    "housekeeper"
                )
        self._stats.fetch_redis_roundtrips += 1
        await store.sync_parts(spec.name, scope, plist)
        self._synced[(spec.name, scope)] = now
        if len(self._synced) > _SYNCED_MAX:  # forget scopes not synced lately (re-synced anyway)
            horizon = now - self.settings.sync_interval
            self._synced = {k: t for k, t in self._synced.items() if t > horizon}

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
        max_messages: int | None = None,
        owner: str = "",
    ) -> FetchOutcome:
        """Lease one partition and return its next batch (or why not).

        Args:
            group: a configured group.
            client_id: required in broadcast groups, refused in clustering ones.
            wait_ms: long poll: wait up to this long (0–30000) for a batch.
            lease_ms: lease length (default: the group's).
            holder: free text stored with the lease (e.g. principal@ip).
            owner: the API key asking (broadcast: counted against ``max_clients_per_key``).
            max_messages: gather further broker batches of the leased partition while the
                answer stays within this many messages (1–10000; None: one broker batch). The
                first broker batch is always delivered whole (the broker sizes it).

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
        if not isinstance(holder, str) or not isinstance(owner, str):
            raise InvalidRequestError("holder and owner must be strings")
        if max_messages is None:
            max_messages = 1
        elif (
            isinstance(max_messages, bool)
            or not isinstance(max_messages, int)
            or not 1 <= max_messages <= MAX_MESSAGES_LIMIT
        ):
            raise InvalidRequestError(
                f"max_messages must be an integer in [1, {MAX_MESSAGES_LIMIT}]"
            )
        store = self._running()
        self._stats.fetches += 1
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_ms / 1000
        self._busy[group] += 1  # the session is in use: the housekeeper leaves it open
        try:
            while True:
                await self._sync(spec, scope, store, owner[:200])
                outcome = await self._reader.fetch_once(
                    spec, scope, lease, holder[:200], store, max_messages
                )
                left_ms = int((deadline - loop.time()) * 1000)
                if outcome.status not in ("empty", "busy", "paused") or left_ms <= 0:
                    break
                assert self._waker is not None
                pause = max(_MIN_POLL_MS, outcome.retry_after_ms or 0)  # no busy loop on Redis
                await self._waker.wait(f"{group}|{scope}", min(left_ms, pause))
        finally:
            self._busy[group] -= 1
            self._last_use[group] = loop.time()
        name = f"fetches_{outcome.status}"
        setattr(self._stats, name, getattr(self._stats, name) + 1)
        return outcome

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
        if got.status == "already":  # the answer says how the lease really ended
            ended = str(got.values[1])
            if action == "ack" and ended != "acked":
                self._stats.stale += 1
                raise LeaseStaleError(
                    f"the lease was already {ended}: nothing was committed and its batch is "
                    "delivered again"
                )
            self._stats.already_settled += 1
            return "already_acked" if ended == "acked" else ended  # type: ignore[return-value]
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
                if isinstance(off, bool) or not isinstance(off, int) or not 0 <= off <= MAX_OFFSET:
                    raise InvalidRequestError(
                        f"offset of {p!r} must be an integer in [0, {MAX_OFFSET}]"
                    )
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
        if unknown:  # named in the answer, but not all of them: the keys are the client's text
            more = f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
            shown = ", ".join(repr(p[:100]) for p in unknown[:3])
            raise InvalidRequestError(f"unknown partitions: {shown}{more}")
        out: list[ResetEntry] = []
        replies = await store.reset_scopes(group, scopes, target, pairs, plist)
        for scope, got in zip(scopes, replies, strict=True):
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
            InvalidRequestError: a negative, NaN or infinite rate, a rate between 0 and
                :data:`MIN_RATE`, or a negative burst.
        """
        self._spec(group)
        rate = messages_per_second
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not math.isfinite(rate):
            raise InvalidRequestError("messages_per_second must be a finite number")
        if rate < 0 or 0 < rate < MIN_RATE:
            raise InvalidRequestError(f"messages_per_second must be 0 (off) or >= {MIN_RATE}")
        if burst is not None and (
            isinstance(burst, bool) or not isinstance(burst, int) or burst < 0
        ):
            raise InvalidRequestError("burst must be an integer >= 0")
        await self._running().set_rate(group, float(rate), max(1, burst or math.ceil(rate)))

    async def lag(self, group: str, *, client_id: str | None = None) -> LagReport:
        """Backlog per partition in index bytes (shared stores make it an upper bound).

        Raises:
            StateLostError: the group's state is missing in Redis (never a zero backlog).
        """
        spec = self._spec(group)
        scope = self._scope(spec, client_id)
        store = self._running()
        state = await store.dump(group, scope)
        if not state.booted:  # a lost store must not read as "no backlog": alerts go quiet
            store.lost += 1
            raise StateLostError(f"the gateway state of group {group!r} is missing in Redis")
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
            # An open session answers without a new master registration; opening one counts
            # as use, so an idle group's session is not reopened by every readiness probe.
            spec = next((self._specs[g] for g in self._tubes), None)
            if spec is None:
                spec = next(iter(self._specs.values()))
                self._last_use[spec.name] = asyncio.get_running_loop().time()
            try:
                async with asyncio.timeout(self.settings.rpc_timeout):
                    tube = await self._tube(spec)
                    await tube.partitions()
                master_ok = tube.master_ok
            except (TubeMQError, TimeoutError):
                master_ok = False
        return {"redis": redis_ok, "master": master_ok}
