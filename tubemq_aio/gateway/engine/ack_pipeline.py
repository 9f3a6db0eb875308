"""Acks carried by a fetch, settled in the same Redis round trip as the fetch's acquire.

A fetch that carries acks sends their ``settle`` scripts and its ``acquire`` in one
non-transactional pipeline: one round trip (one AOF fsync with ``appendfsync always``) instead
of one per ack plus one for the acquire. The acks go first, so a partition they free can be
leased by this very acquire. Each script stays atomic on its own and idempotent for its
arguments, so a pipeline sent again after a lost connection answers the same. The commands are
``EVALSHA`` of the registered scripts (redis-py's pipeline would ask ``SCRIPT EXISTS`` first, a
round trip more); a Redis that lost them (restart, ``SCRIPT FLUSH``) answers ``NOSCRIPT`` to
each, and only those commands, which did not run, are sent again through the scripts, which
load themselves.

Acks of the acquire's own scope publish no wake-up: the acquire, which usually leases the
partition an ack just freed, wakes the scope's long polls only when a partition is still due
after it (a waiter woken for a partition already leased again would spend a Redis round trip
to find nothing). An ack sent again after ``NOSCRIPT`` runs after the acquire and wakes them
itself; when the acquire fails, a wake-up is published on its own.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Sequence
from typing import Any, Literal

import redis.exceptions as rexc
from redis.commands.core import AsyncScript

from tubemq_aio.errors import TubeMQError
from tubemq_aio.gateway.engine.data import FetchArgs, GatewayStats
from tubemq_aio.gateway.engine.port import PiggybackAcks
from tubemq_aio.gateway.errors import LeaseConflictError, LeaseStaleError
from tubemq_aio.gateway.leases.lease_key import LeaseKey
from tubemq_aio.gateway.leases.lease_store import RECLAIM_MAX, LeaseStore
from tubemq_aio.gateway.leases.redis_keys import WAKE_CHANNEL, script_keys
from tubemq_aio.gateway.leases.replies import Reply
from tubemq_aio.gateway.leases.roundtrips import refusal_error

__all__ = ["acquire_with_acks", "settle_result", "settle_then_acquire"]

SettleAnswer = Literal["acked", "already_acked", "nacked", "released"]


def settle_result(stats: GatewayStats, got: Reply, action: str) -> SettleAnswer:
    """What a ``settle`` script's answer means for the client, counted in ``stats``.

    Raises:
        LeaseStaleError: the partition was leased again (or reset) since, or an ack finds the
            lease ended otherwise (nacked, released: nothing was committed).
        LeaseConflictError: the committed offset moved under the lease.
    """
    if got.status == "stale":
        stats.stale += 1
        raise LeaseStaleError("the lease was taken over or reset")
    if got.status == "conflict":
        stats.conflicts += 1
        raise LeaseConflictError("the committed offset moved under the lease (reset)")
    if got.status == "already":  # the answer says how the lease really ended
        ended = got.ended_as
        if action == "ack" and ended != "acked":
            stats.stale += 1
            raise LeaseStaleError(
                f"the lease was already {ended}: nothing was committed and its batch is "
                "delivered again"
            )
        stats.already_settled += 1
        return "already_acked" if ended == "acked" else ended  # type: ignore[return-value]
    counter = {"acked": "acks", "nacked": "nacks", "released": "releases"}[got.status]
    setattr(stats, counter, getattr(stats, counter) + 1)
    return got.status  # type: ignore[return-value]


async def settle_then_acquire(
    store: LeaseStore,
    acks: Sequence[LeaseKey],
    group: str,
    scope: str,
    lease_id: str,
    lease_ms: int,
    holder: str,
) -> tuple[list[Reply | Exception], Reply]:
    """Ack ``acks``, then lease a partition of ``group``/``scope``, in one round trip.

    Returns:
        Each ack's script answer (or the error it met), and the acquire's answer.

    Raises:
        StoreUnavailableError: Redis is down or not ready.
        StateLostError / GatewayError: the acquire found the state lost / was refused.
    """
    settle, acquire = store.script("settle"), store.script("acquire")
    quiet = any(a.group == group and a.scope == scope for a in acks)
    calls: list[tuple[AsyncScript, tuple[bytes, ...], list[Any], str]] = [
        (
            settle,
            script_keys(a.group, a.scope)[:-1],
            [_wake_of(a, group, scope), a.partition_key, a.lease_id, "ack", 0],
            a.group,
        )
        for a in acks
    ]
    named = script_keys(group, scope)
    own, wake = named[:-1], named[-1]
    calls.append(
        (
            acquire,
            own,
            [
                wake,
                lease_id,
                lease_ms,
                holder,
                "",
                RECLAIM_MAX,
                "1" if quiet else "0",
            ],
            group,
        )
    )

    async def send() -> list[Any]:
        async with store.client.pipeline(transaction=False) as pipe:
            for script, keys, args, _ in calls:
                pipe.evalsha(script.sha, len(keys), *keys, *args)
            return list(await pipe.execute(raise_on_error=False))

    packed = store.packed
    if packed is not None:  # a single server: the same commands, packed by the gateway
        packed_calls = [(script.sha, keys, args) for script, keys, args, _ in calls]
        raw = await store.roundtrip(lambda: packed.call(packed_calls))
    else:
        raw = await store.roundtrip(send)
    answers: list[Reply | Exception] = []
    for (script, keys, args, owner), got in zip(calls, raw, strict=True):
        if isinstance(got, rexc.NoScriptError):  # it did not run: once more, loading it
            if script is settle and not args[0]:  # now after the acquire: it wakes on its own
                args = [f"{group}|{scope}", *args[1:]]
            got = await store.roundtrip(functools.partial(script, keys=keys, args=args))
        try:
            if isinstance(got, rexc.ResponseError):
                raise refusal_error(got) from got
            answers.append(store.reply(got, owner))
        except Exception as exc:
            answers.append(exc)
    acquired = answers.pop()
    if isinstance(acquired, Exception):
        if quiet:  # the acks' partitions may be free and nobody told the scope's waiters
            await _wake(store, f"{group}|{scope}")
        raise acquired
    return answers, acquired


async def _wake(store: LeaseStore, message: str) -> None:
    """Publish one wake-up, best effort: a lost one only delays the long polls until their own
    timers, and the error the caller is about to raise must not be masked by one of Redis."""
    with contextlib.suppress(Exception):
        await store.roundtrip(functools.partial(store.client.publish, WAKE_CHANNEL, message))


def _wake_of(ack: LeaseKey, group: str, scope: str) -> str:
    """The wake message an ack's settle publishes: none for the acquire's own scope, whose
    script wakes the waiters only when a partition is still due after it has leased one."""
    return "" if ack.group == group and ack.scope == scope else f"{ack.group}|{ack.scope}"


async def acquire_with_acks(
    store: LeaseStore,
    stats: GatewayStats,
    acks: PiggybackAcks,
    request: FetchArgs,
    lease_id: str,
) -> Reply:
    """:func:`settle_then_acquire` for a fetch: sets ``acks.results`` (each ack's answer or its
    error), counts them in ``stats`` and returns the acquire's answer.

    Raises:
        StoreUnavailableError / StateLostError / GatewayError: as the acquire met them (the
            acks stay pending then).
    """
    answers, got = await settle_then_acquire(
        store,
        acks.refs,
        request.spec.name,
        request.scope,
        lease_id,
        request.lease_ms,
        request.holder,
    )
    results: list[str | Exception] = []
    for answer in answers:
        try:
            if isinstance(answer, Exception):
                raise answer
            results.append(settle_result(stats, answer, "ack"))
        except TubeMQError as exc:
            results.append(exc)
    acks.results = results
    stats.piggyback_acks += len(results)
    return got
