"""Lag probes: read the max offset of partitions nobody fetches, under a normal lease.

A probe is acquire(want=p) → Register at the committed offset (the broker answers the
partition's max and leaves the group's cursor at the committed offset, which the cursor record
then states) → record an empty read (raises ``mx``, releases the lease). A partition without a
committed offset runs the fetch's first step instead (register at the group's ``start``, then
``init``), so the lag of a group nobody ever fetched is known too. Broadcast scopes also take
the per-partition cursor mutex, as fetches do.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Callable

from tubemq_aio.gateway.engine.data import FetchArgs
from tubemq_aio.gateway.engine.fetch_attempt import rewind_committed
from tubemq_aio.gateway.leases.lease_key import LeaseKey
from tubemq_aio.gateway.leases.lease_store import LeaseStore
from tubemq_aio.gateway.leases.model import Booking
from tubemq_aio.gateway.leases.redis_keys import cursor_lock_key
from tubemq_aio.gateway.tubemq.tube_group import LATEST_OFFSET, TubeGroup
from tubemq_aio.protocol.call_outcome import ANSWERED

__all__ = ["probe_partition"]

#: Broadcast cursor mutex life (ms), the same as a fetch's.
_CURSOR_LOCK_MS = 5000


async def probe_partition(
    store: LeaseStore,
    tube: TubeGroup,
    request: FetchArgs,
    p: str,
    *,
    on_rewind: Callable[[], None] = lambda: None,
) -> bool:
    """Refresh the max offset of partition ``p``, leased as ``request`` asks (its group, scope,
    holder and lease length); False when it was busy or gone (nothing changed).

    When the broker's partition now ends below the committed offset (two registers agree; a
    broker came back without its unflushed tail), the offset is moved back there, as a fetch
    does, and ``on_rewind`` is called: an idle group is repaired before new messages fill the
    reused offsets past it.

    A register that was sent and not answered (a timeout, a lost connection, the probe
    cancelled) may still reach the broker until the lease's expiry: the lease (and a broadcast
    scope's cursor mutex) is then left to lapse instead of being released, so that no fetch
    reads the partition while it can land (``docs/gateway.md``, "Read-ahead off the critical
    path").

    Raises:
        GatewayError: Redis failed (the lease is released first when possible).
        TubeMQError: the broker refused the register (the lease is released), or did not
            answer it (the lease lapses).
    """
    spec, scope = request.spec, request.scope
    lid = secrets.token_hex(16)
    released = False  # a cancel while the acquire is in flight still gives p back below
    unlock: str | None = None
    astray = False  # a register sent and not answered: it may still reach the broker

    async def register(offset: int) -> tuple[int, int]:
        nonlocal astray
        astray = True
        try:
            answer = await tube.register(p, offset)
        except ANSWERED:
            astray = False
            raise
        astray = False
        return answer

    try:
        got = await store.acquire(spec.name, scope, lid, request.lease_ms, request.holder, want=p)
        if got.status != "leased" or got.leased().partition_key != p:
            released = True
            return False
        leased = got.leased()
        cmt = -1 if leased.committed is None else leased.committed
        start = leased.start
        if scope != "c":
            key = cursor_lock_key(spec.name, p)
            if not await store.try_lock(key, lid, _CURSOR_LOCK_MS):
                return False
            unlock = key
        if cmt < 0:
            target = start or spec.start
            begin, top = await register(0 if target == "earliest" else LATEST_OFFSET)
            first = await store.init(LeaseKey(spec.name, scope, p, lid), begin, top)
            if first.status != "ok":
                return False
            cmt = -1 if first.committed is None else first.committed
        else:
            begin, top = await register(cmt)
            if begin < cmt:  # the partition ends below cmt: a second answer must agree
                begin, top = await register(cmt)
                if begin < cmt:
                    lease = LeaseKey(spec.name, scope, p, lid)
                    if not await rewind_committed(store, lease, cmt, begin, top):
                        return False
                    on_rewind()
                    cmt = begin
        booking = Booking(base=cmt, next=cmt, max=top, count=0, wait_ms=0, cursor=begin)
        rec = await store.record(LeaseKey(spec.name, scope, p, lid), booking)
        released = rec.status in ("released", "stale")
        return rec.status == "released"
    finally:
        if not released and not astray:
            with contextlib.suppress(Exception):
                await asyncio.shield(store.settle(LeaseKey(spec.name, scope, p, lid), "release", 0))
        if unlock is not None and not astray:
            with contextlib.suppress(Exception):  # it lapses on its own
                await store.unlock(unlock, lid)
