"""A group's backlog per partition, read from its stored state."""

from __future__ import annotations

from tubemq_aio.gateway.engine.data import LagEntry, LagReport
from tubemq_aio.gateway.errors import StateLostError
from tubemq_aio.gateway.leases.lease_store import LeaseStore
from tubemq_aio.gateway.leases.partition_state import ScopeState

__all__ = ["lag_report", "read_lag"]


async def read_lag(store: LeaseStore, group: str, scope: str) -> LagReport:
    """The backlog of ``scope`` in ``group`` as Redis holds it.

    Raises:
        StateLostError: the group's state is missing in Redis (never a zero backlog).
    """
    state = await store.dump(group, scope)
    if not state.booted:  # a lost store must not read as "no backlog": alerts go quiet
        store.lost += 1
        raise StateLostError(f"the gateway state of group {group!r} is missing in Redis")
    return lag_report(group, scope, state.scopes[scope])


def lag_report(group: str, scope: str, sc: ScopeState) -> LagReport:
    """The backlog of each partition of a scope, in index bytes, from its stored state."""
    entries: list[LagEntry] = []
    for p in sorted(sc.members):
        ps = sc.part(p)
        top = None if ps.max_offset < 0 else ps.max_offset
        lag = None if ps.committed is None or top is None else max(0, top - ps.committed)
        live = ps.lease_id is not None and p in sc.leased
        entries.append(
            LagEntry(
                p,
                ps.committed,
                top,
                lag,
                lease_holder=ps.holder if live else None,
                lease_expires_at=ps.lease_expiry if live else None,
                redelivery=ps.redeliveries,
                gone=ps.gone,
            )
        )
    total = sum(e.lag_bytes or 0 for e in entries)
    return LagReport(group, scope, tuple(entries), total)
