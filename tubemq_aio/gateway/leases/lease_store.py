"""The gateway's consume state in Redis: the lease state machine of :mod:`.model` as Lua scripts.

Every state change is one script call (one round trip, atomic, Redis ``TIME`` as the clock,
idempotent for the same arguments). All keys of a group share the hash tag ``{g:<group>}``, so a
script only touches one cluster slot. Every script is sent as ``EVALSHA``: on a single server
packed by the gateway (:mod:`.packed_calls`), where a ``NOSCRIPT`` answer (after a restart or
``SCRIPT FLUSH``) makes the round trip load the scripts and send it again
(:mod:`.roundtrips`); through redis-py's ``register_script`` otherwise, which loads the script
again itself.

Key layout (``<s>`` = scope ``c`` or ``b:<client_id>``): ``tgw:{g:G}:cfg`` (HASH: ``boot``,
``paused``, ``rate``, ``burst``, ``rlh`` the one read of a rate-limited group), ``tgw:{g:G}:rl``
(GCRA TAT, µs), ``tgw:{g:G}:cur`` (HASH: partition → broker cursor, ``<p>|kf`` → the
kept-batch fence), ``tgw:{g:G}:<s>:st`` (HASH ``<p>|<field>``), ``…:<s>:ready`` and
``…:<s>:leased`` (ZSETs), ``…:<s>:parts`` (SET),
``…:<s>:acq`` (HASH live lease id → partition), ``…:<s>:done`` (ZSET
``<lease id>|<acked|nacked|released>`` → until when it is remembered); broadcast scopes in
``tgw:{g:G}:clients`` (SET), ``…:seen`` (ZSET) and ``…:owners`` (HASH scope → API key);
``tgw:boot`` marks an initialised store. Pub/sub channel ``tgw:wake`` carries
``<group>|<scope>``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from importlib import resources
from typing import Any, TypeVar

from redis.asyncio.cluster import ClusterPipeline
from redis.commands.core import AsyncScript
from redis.exceptions import ResponseError

from tubemq_aio.gateway.errors import GatewayError, StateLostError
from tubemq_aio.gateway.leases.lease_key import LeaseKey
from tubemq_aio.gateway.leases.model import Booking, GroupState
from tubemq_aio.gateway.leases.packed_calls import packed_calls_for
from tubemq_aio.gateway.leases.redis_client import RedisClient
from tubemq_aio.gateway.leases.redis_keys import (
    BOOT_KEY,
    WAKE_CHANNEL,
    clients_keys,
    cursor_lock_key,
    scope_keys,
    script_keys,
)
from tubemq_aio.gateway.leases.replies import Reply
from tubemq_aio.gateway.leases.roundtrips import RoundTrips, refusal_error
from tubemq_aio.gateway.leases.stored_state import RawScope, state_from_redis, text

__all__ = [
    "BOOT_KEY",
    "WAKE_CHANNEL",
    "LeaseStore",
    "Reply",
    "clients_keys",
    "cursor_lock_key",
    "refusal_error",
    "scope_keys",
]

#: Reset scripts sent in one pipelined round trip (a reset of every broadcast client).
RESET_CHUNK = 200
#: Expired leases an acquire takes back at most in one call.
RECLAIM_MAX = 64
_SCRIPTS = (
    "acquire",
    "rate",
    "init",
    "record",
    "rewind",
    "settle",
    "extend",
    "reset",
    "sync_parts",
    "read_ahead",
    "read_ahead_done",
)
_T = TypeVar("_T")
log = logging.getLogger("tubemq_aio.gateway")
_UNLOCK = (
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
)
_RENEW = (
    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
    "return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0"
)
# Remember a broadcast scope and when it was last seen, on Redis's clock; a new one only while
# the group has fewer than ARGV[2] (0: no cap) and its owner ARGV[3] fewer than ARGV[4].
_SEEN = (
    "if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then "
    "local cap, owner, owner_cap = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4]) "
    "if cap > 0 and redis.call('SCARD', KEYS[1]) >= cap then return 0 end "
    "if owner_cap > 0 then local n = 0 "
    "for _, o in ipairs(redis.call('HVALS', KEYS[3])) do if o == owner then n = n + 1 end end "
    "if n >= owner_cap then return -1 end end "
    "redis.call('HSET', KEYS[3], ARGV[1], owner) end "
    "local t = redis.call('TIME') redis.call('SADD', KEYS[1], ARGV[1]) "
    "local ms = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)) "
    "redis.call('ZADD', KEYS[2], ms, ARGV[1]) return 1"
)


async def _queue_script(
    pipe: Any, script: AsyncScript, keys: Sequence[str | bytes], args: Sequence[Any]
) -> None:
    """Queue ``script`` in ``pipe``: a server pipeline loads a missing script in the same
    round trip; a cluster pipeline refuses that helper and takes a plain ``EVALSHA`` (a
    ``NOSCRIPT`` answer then loads the scripts and retries, see :mod:`.roundtrips`)."""
    if isinstance(pipe, ClusterPipeline):
        pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
    else:
        await script(keys=keys, args=args, client=pipe)


def _load_source(name: str) -> str:
    pkg = resources.files("tubemq_aio.gateway.leases") / "lua"
    common = (pkg / "common.lua").read_text(encoding="utf-8")
    return common + "\n" + (pkg / f"{name}.lua").read_text(encoding="utf-8")


class LeaseStore(RoundTrips):
    """Script calls and plain commands on one Redis client.

    Args:
        client: a ``redis.asyncio.Redis`` or ``RedisCluster`` (its pools are used, not closed
            here).
        timeout: seconds for one round trip before :class:`StoreUnavailableError`.
        max_inflight: round trips in flight at most (None: the client's pool bounds them); a
            round trip beyond it waits for room within its ``timeout``.
        ack_replicas: after an ack, ``WAIT`` until this many replicas hold it (0: do not wait).
        ack_wait_ms: how long that ``WAIT`` may take; an ack still answers success after it
            (the primary has it), counted in :attr:`wait_short`.

    Attributes:
        roundtrips, failures, lost: round trips, those that ended in
            :class:`StoreUnavailableError`, and script answers ``lost``.
        wait_short: acks whose ``WAIT`` ended before ``ack_replicas`` replicas confirmed them.
    """

    def __init__(
        self,
        client: RedisClient,
        *,
        timeout: float = 5.0,
        max_inflight: int | None = None,
        ack_replicas: int = 0,
        ack_wait_ms: int = 100,
    ) -> None:
        super().__init__(client, timeout=timeout, max_inflight=max_inflight)
        self.ack_replicas = ack_replicas
        self.ack_wait_ms = ack_wait_ms
        self.lost = 0
        self.wait_short = 0
        self._scripts = {n: client.register_script(_load_source(n)) for n in _SCRIPTS}
        #: The scripts' packed path on a single server (None: redis-py's, see packed_calls).
        self.packed = packed_calls_for(client)
        self._unlock = client.register_script(_UNLOCK)
        self._renew = client.register_script(_RENEW)
        self._seen = client.register_script(_SEEN)

    def _all_scripts(self) -> list[AsyncScript]:
        return [*self._scripts.values(), self._unlock, self._renew, self._seen]

    async def _run(
        self, name: str, group: str, scope: str, *args: Any, extra_keys: Sequence[str] = ()
    ) -> Reply:
        own = script_keys(group, scope)
        argv = [own[-1], *args]
        packed = self.packed
        if packed is not None:
            keys = own[:-1] + tuple(k.encode() for k in extra_keys) if extra_keys else own[:-1]
            sha = self._scripts[name].sha
            raw = await self.roundtrip(lambda: packed.call_one(sha, keys, argv))
        else:
            listed: list[str | bytes] = [*own[:-1], *extra_keys]
            raw = await self.roundtrip(lambda: self._scripts[name](keys=listed, args=argv))
        return self.reply(raw, group)

    def script(self, name: str) -> AsyncScript:
        """The registered script ``name`` (its ``sha`` and ``script`` text, for pipelines)."""
        return self._scripts[name]

    def reply(self, raw: Sequence[Any], group: str) -> Reply:
        """A script's raw answer as a :class:`Reply`.

        Raises:
            StateLostError: the script found the group's state missing.
        """
        out = [v.decode() if type(v) is bytes else v for v in raw]  # text(), inlined
        reply = Reply(str(out[0]), int(out[1]), tuple(out[2:]))
        if reply.status == "lost":
            self.lost += 1
            raise StateLostError(
                f"the gateway state of group {group!r} is missing in Redis; "
                "an admin must reset the group's offsets"
            )
        return reply

    # ---- scripts (see model.GroupState for the semantics) ------------------------------------

    async def acquire(
        self,
        group: str,
        scope: str,
        lease_id: str,
        lease_ms: int,
        holder: str,
        want: str = "",
        reclaim_max: int = RECLAIM_MAX,
    ) -> Reply:
        """Lease a partition (``leased``/``none``/``paused``/``throttled``/``held``)."""
        return await self._run(
            "acquire", group, scope, lease_id, lease_ms, holder, want, reclaim_max
        )

    async def init(self, key: LeaseKey, offset: int, top: int) -> Reply:
        """Set a partition's first committed offset (first writer wins)."""
        return await self._run_leased("init", key, offset, top)

    async def record(
        self, key: LeaseKey, booking: Booking, fence: tuple[str, str] | None = None
    ) -> Reply:
        """Book the batch read under a lease; with ``fence`` (the broadcast cursor mutex's key
        and token) only while that token still holds the mutex (else ``fenced``)."""
        args: list[Any] = list(booking.fields())
        if fence is None:
            return await self._run_leased("record", key, *args)
        return await self._run_leased("record", key, *args, fence[1], extra_keys=[fence[0]])

    async def rewind(self, key: LeaseKey, old: int, new: int, top: int) -> Reply:
        """Move a leased partition's committed offset back from ``old`` to ``new``."""
        return await self._run_leased("rewind", key, old, new, top)

    async def settle(self, key: LeaseKey, action: str, delay_ms: int = 0) -> Reply:
        """Ack, nack or release a lease; an ack then waits for ``ack_replicas`` replicas."""
        if action != "ack" or self.ack_replicas <= 0:
            return await self._run_leased("settle", key, action, delay_ms)
        keys = scope_keys(key.group, key.scope)
        argv: list[Any] = [
            f"{key.group}|{key.scope}",
            key.partition_key,
            key.lease_id,
            action,
            delay_ms,
        ]
        script = self._scripts["settle"]

        async def settle_and_wait() -> list[Any]:
            # WAIT counts the writes of its own connection: it must share the script's
            async with self.client.pipeline(transaction=False) as pipe:
                await _queue_script(pipe, script, keys, argv)
                pipe.execute_command("WAIT", self.ack_replicas, self.ack_wait_ms)
                return list(await pipe.execute())

        raw, confirmed = await self.roundtrip(settle_and_wait)
        if int(confirmed) < self.ack_replicas:
            self.wait_short += 1
            log.debug(
                "ack of %s/%s confirmed by %s replicas", key.group, key.partition_key, confirmed
            )
        return self.reply(raw, key.group)

    async def extend(self, key: LeaseKey, lease_ms: int) -> Reply:
        """Move a lease's expiry."""
        return await self._run_leased("extend", key, lease_ms)

    async def read_ahead(self, key: LeaseKey, token: str, allow_ms: int) -> Reply:
        """Mark a read-ahead of the lease's partition in flight for ``allow_ms``
        (``ok`` with its deadline, ``stale`` or ``busy``; see ``GroupState.read_ahead``; the
        engine sends it with the booking, :meth:`record_and_mark`).

        Raises:
            ValueError: ``token`` is empty.
        """
        if not token:
            raise ValueError("a read-ahead needs a token")
        return await self._run_leased("read_ahead", key, token, allow_ms)

    async def record_and_mark(
        self, key: LeaseKey, booking: Booking, token: str, allow_ms: int
    ) -> tuple[Reply, Reply]:
        """:meth:`record` and then :meth:`read_ahead` in one round trip: the booking's answer
        and the mark's (``ok`` with its deadline only when the batch was booked under the live
        lease; ``stale`` when the booking released or refused it). Both scripts answer a retry
        as the first try, so the round trip is retried as any other.

        Raises:
            ValueError: ``token`` is empty.
        """
        if not token:
            raise ValueError("a read-ahead needs a token")
        own = script_keys(key.group, key.scope)
        head = [own[-1], key.partition_key, key.lease_id]
        calls = (
            (self._scripts["record"], [*head, *booking.fields()]),
            (self._scripts["read_ahead"], [*head, token, allow_ms]),
        )
        keys = own[:-1]
        packed = self.packed

        async def send() -> list[Any]:
            if packed is not None:
                out = await packed.call([(script.sha, keys, argv) for script, argv in calls])
                for answer in out:
                    if isinstance(answer, ResponseError):
                        raise answer
                return out
            async with self.client.pipeline(transaction=False) as pipe:
                for script, argv in calls:
                    await _queue_script(pipe, script, keys, argv)
                return list(await pipe.execute())

        booked, marked = await self.roundtrip(send)
        return self.reply(booked, key.group), self.reply(marked, key.group)

    async def read_ahead_done(
        self, group: str, scope: str, partition_key: str, token: str, kept: str, cursor: int
    ) -> Reply:
        """End the read-ahead ``token``: ``kept`` (a kept-batch fence, ``""`` none) and
        ``cursor`` (-1 unknown) are stored (``ok``), or nothing when the mark is not this
        read's any more (``stale``; see ``GroupState.read_ahead_done``)."""
        return await self._run("read_ahead_done", group, scope, partition_key, token, kept, cursor)

    async def _run_leased(
        self, name: str, key: LeaseKey, *args: Any, extra_keys: Sequence[str] = ()
    ) -> Reply:
        return await self._run(
            name,
            key.group,
            key.scope,
            key.partition_key,
            key.lease_id,
            *args,
            extra_keys=extra_keys,
        )

    async def reset(
        self,
        group: str,
        scope: str,
        target: str,
        pairs: Sequence[tuple[str, int]],
        plist: Sequence[str] = (),
    ) -> Reply:
        """Move committed offsets (also writes the group's boot marker)."""
        return (await self.reset_scopes(group, [scope], target, pairs, plist))[0]

    async def reset_scopes(
        self,
        group: str,
        scopes: Sequence[str],
        target: str,
        pairs: Sequence[tuple[str, int]],
        plist: Sequence[str] = (),
    ) -> list[Reply]:
        """:meth:`reset` of many scopes, :data:`RESET_CHUNK` scripts per round trip."""
        flat: list[Any] = [x for pair in pairs for x in pair]
        script = self._scripts["reset"]
        out: list[Reply] = []
        for i in range(0, len(scopes), RESET_CHUNK):
            chunk = scopes[i : i + RESET_CHUNK]

            async def run(chunk: Sequence[str] = chunk) -> list[Any]:
                async with self.client.pipeline(transaction=False) as pipe:
                    for s in chunk:
                        args = [f"{group}|{s}", target, len(pairs), *flat, *plist]
                        await _queue_script(pipe, script, scope_keys(group, s), args)
                    return list(await pipe.execute())

            for raw in await self.roundtrip(run):
                vals = [text(v) for v in raw]
                out.append(Reply(str(vals[0]), int(vals[1]), tuple(vals[2:])))
        return out

    async def sync_parts(self, group: str, scope: str, plist: Sequence[str]) -> Reply:
        """Align the scope's partitions with the subscribable ones."""
        return await self._run("sync_parts", group, scope, *plist)

    # ---- plain commands ----------------------------------------------------------------------

    async def booted(self) -> bool:
        """Whether the store holds the boot marker (written by ``tubemq-gateway init``)."""
        return bool(await self.roundtrip(lambda: self.client.exists(BOOT_KEY)))

    async def boot(self, groups: Sequence[str], *, allow_init: bool) -> None:
        """Check the boot markers at start; write the missing ones only where it is safe.

        On a store with ``tgw:boot`` a newly configured group gets its marker. On a store
        without it nothing is written unless ``allow_init`` (``tubemq-gateway init``, or a test
        that starts on an empty Redis): such a store either never held gateway state or lost it,
        and a replica cannot tell which, so its groups answer ``lost`` until an admin acts.
        """
        if not await self.booted() and not allow_init:
            return

        async def mark() -> None:
            # the keys live in different slots of a cluster: no transaction, but the groups
            # first, so a store is never marked booted with a group left unmarked
            async with self.client.pipeline(transaction=False) as pipe:
                for g in groups:
                    pipe.hsetnx(scope_keys(g, "c")[0], "boot", "1")
                await pipe.execute()
            await self.client.set(BOOT_KEY, "1", nx=True)

        await self.roundtrip(mark)

    async def set_paused(self, group: str, paused: bool) -> None:
        """Pause or resume every replica's fetches of ``group`` at once."""
        cfg = scope_keys(group, "c")[0]
        await self.roundtrip(lambda: self.client.hset(cfg, "paused", "1" if paused else "0"))

    async def set_rate(self, group: str, rate: float, burst: int) -> Reply:
        """Set the shared consume limit (0 = off); what was admitted stays owed and a read in
        flight keeps its hold (see ``GroupState.set_rate``). Answers ``ok``."""
        return await self._run("rate", group, "c", repr(float(rate)), str(int(burst)))

    async def add_client(
        self, group: str, scope: str, cap: int = 0, owner: str = "", owner_cap: int = 0
    ) -> str:
        """Remember a broadcast scope (so a reset without client_id reaches it) and mark it
        seen now (the housekeeper deletes the state of scopes idle too long).

        Returns:
            ``ok``; ``group_full`` or ``owner_full`` (nothing written) when ``scope`` is new and
            the group has ``cap`` scopes, or ``owner`` has ``owner_cap`` (0: no cap).
        """
        keys = list(clients_keys(group))
        got = await self.roundtrip(
            lambda: self._seen(keys=keys, args=[scope, cap, owner, owner_cap])
        )
        return {1: "ok", 0: "group_full"}.get(int(got), "owner_full")

    async def clients(self, group: str) -> list[str]:
        """Every broadcast scope of ``group`` seen so far (and not collected since)."""
        key = clients_keys(group)[0]
        return sorted(text(m) for m in await self.roundtrip(lambda: self.client.smembers(key)))

    async def members(self, group: str, scope: str) -> list[str]:
        """The partitions known to a scope."""
        key = scope_keys(group, scope)[6]
        return sorted(text(m) for m in await self.roundtrip(lambda: self.client.smembers(key)))

    async def leased_partition(self, group: str, scope: str, lease_id: str) -> str | None:
        """The partition ``lease_id`` holds right now, or None (never taken, settled, expired)."""
        key = scope_keys(group, scope)[7]
        held = await self.roundtrip(lambda: self.client.hget(key, lease_id))
        return None if held is None else str(text(held))

    async def try_lock(self, key: str, token: str, px: int) -> bool:
        """``SET key token NX PX px``: True if this caller now holds the short mutex."""
        return bool(await self.roundtrip(lambda: self.client.set(key, token, nx=True, px=px)))

    async def renew_lock(self, key: str, token: str, px: int) -> bool:
        """Give the mutex ``key`` another ``px`` ms if ``token`` still holds it."""
        return bool(await self.roundtrip(lambda: self._renew(keys=[key], args=[token, px])))

    async def unlock(self, key: str, token: str) -> None:
        """Delete the mutex ``key`` if ``token`` still holds it (compare and delete)."""
        await self.roundtrip(lambda: self._unlock(keys=[key], args=[token]))

    async def ping(self) -> bool:
        """True if Redis answers ``PING``."""
        try:
            return bool(await self.roundtrip(self.client.ping))
        except GatewayError:
            return False

    async def dump(self, group: str, scope: str) -> GroupState:
        """Read the group's and one scope's state into a :class:`GroupState` (one round trip)."""
        keys = scope_keys(group, scope)

        async def read() -> list[Any]:
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.hgetall(keys[0])
                pipe.get(keys[1])
                pipe.hgetall(keys[2])
                pipe.hgetall(keys[3])
                pipe.zrange(keys[4], 0, -1, withscores=True)
                pipe.zrange(keys[5], 0, -1, withscores=True)
                pipe.smembers(keys[6])
                pipe.hgetall(keys[7])
                pipe.zrange(keys[8], 0, -1, withscores=True)
                return list(await pipe.execute())

        *answers, done = await self.roundtrip(read)
        state = state_from_redis(scope, RawScope(*answers))
        state.scopes[scope].done = {text(m): int(t) for m, t in done}
        return state
