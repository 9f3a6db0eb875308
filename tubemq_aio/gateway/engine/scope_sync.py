"""Keeping a scope's partitions in Redis in step with the master's metadata, on a fetch.

At most once per ``sync_interval`` per scope and replica a fetch asks its group's session for
the subscribable partitions and writes them (``sync_parts``); a broadcast scope is stamped as
seen first (and refused beyond the group's or the key's ``max_clients``).
"""

from __future__ import annotations

import asyncio
import math

from tubemq_aio.errors import TubeMQError
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.engine.data import GatewayStats
from tubemq_aio.gateway.errors import TooManyClientsError, TubeUnavailableError
from tubemq_aio.gateway.leases.lease_store import LeaseStore
from tubemq_aio.gateway.tubemq.session_table import SessionTable

__all__ = ["ScopeSync"]

#: Scopes a replica remembers as synced before it forgets those not synced lately.
_SYNCED_MAX = 4096


class ScopeSync:
    """When each scope of this replica was synced last, and the sync itself.

    Args:
        sessions: the replica's TubeMQ sessions.
        stats: the engine's counters (updated in place).
        interval: seconds between two syncs of one scope.
    """

    def __init__(self, sessions: SessionTable, stats: GatewayStats, interval: float) -> None:
        self._sessions = sessions
        self._stats = stats
        self._interval = interval
        self._synced: dict[tuple[str, str], float] = {}

    def forget(self, group: str, scope: str) -> None:
        """Sync ``scope`` again at its next fetch (after a reset)."""
        self._synced.pop((group, scope), None)

    async def __call__(self, spec: GroupSpec, scope: str, store: LeaseStore, owner: str) -> None:
        """Sync the scope unless it was synced within the interval.

        Raises:
            TubeUnavailableError: the master cannot be asked.
            TooManyClientsError: a new broadcast ``client_id`` beyond a cap.
        """
        now = asyncio.get_running_loop().time()
        if now - self._synced.get((spec.name, scope), -math.inf) < self._interval:
            return
        tube = await self._sessions.get(spec)
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
            horizon = now - self._interval
            self._synced = {k: t for k, t in self._synced.items() if t > horizon}
