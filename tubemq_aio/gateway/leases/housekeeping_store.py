"""The housekeeper's Redis calls: leader election, idle partitions, broadcast client GC.

Each call is one Lua script (atomic, Redis ``TIME`` as the clock, safe to repeat) run through
the :class:`~tubemq_aio.gateway.leases.lease_store.LeaseStore`'s timeout and error mapping.
Keys share the
group's hash tag: ``tgw:{g:G}:hk`` (STRING PX: the leader's name), ``tgw:{g:G}:seen`` (ZSET
broadcast scope → last seen ms, stamped by fetches) next to the scope keys of
:func:`~tubemq_aio.gateway.leases.lease_store.scope_keys`.
"""

from __future__ import annotations

from importlib import resources
from typing import Any, NamedTuple

from tubemq_aio.gateway.leases.lease_store import LeaseStore
from tubemq_aio.gateway.leases.redis_keys import clients_keys, leader_key, scope_keys

__all__ = ["HousekeeperStore", "Leader"]

_SCRIPTS = ("hk_lead", "hk_idle", "hk_clients", "hk_gc")


class Leader(NamedTuple):
    """Answer of a take-or-renew: whether the caller holds it, the key's TTL, the holder."""

    held: bool
    ttl_ms: int
    holder: str


def _text(v: Any) -> Any:
    return v.decode() if isinstance(v, bytes) else v


class HousekeeperStore:
    """The housekeeper's scripts on a lease store's Redis client.

    Args:
        store: the consume engine's store (its client, timeout and error mapping are used).
    """

    def __init__(self, store: LeaseStore) -> None:
        self.store = store
        pkg = resources.files("tubemq_aio.gateway.leases") / "lua"
        self._scripts = {
            n: store.client.register_script((pkg / f"{n}.lua").read_text(encoding="utf-8"))
            for n in _SCRIPTS
        }

    async def _call(self, name: str, keys: list[str], args: list[Any]) -> Any:
        return await self.store.roundtrip(lambda: self._scripts[name](keys=keys, args=args))

    async def lead(self, group: str, me: str, lease_ms: int) -> Leader:
        """Take the group's leadership if free, renew it if ``me`` holds it."""
        raw = await self._call("hk_lead", [leader_key(group)], [me, lease_ms])
        return Leader(bool(int(raw[0])), int(raw[1]), str(_text(raw[2])))

    async def resign(self, group: str, me: str) -> None:
        """Give the leadership up if ``me`` still holds it (compare and delete)."""
        await self.store.unlock(leader_key(group), me)

    async def holder(self, group: str) -> str | None:
        """Who leads ``group`` now (None: nobody)."""
        key = leader_key(group)
        raw = await self.store.roundtrip(lambda: self.store.client.get(key))
        return None if raw is None else str(_text(raw))

    async def idle_partitions(self, group: str, scope: str, older_than_ms: int) -> list[str]:
        """Eligible partitions of a scope that nobody leased for ``older_than_ms``."""
        ready = scope_keys(group, scope)[4]
        raw = await self._call("hk_idle", [ready], [older_than_ms])
        return [str(_text(p)) for p in raw]

    async def clients(self, group: str) -> tuple[int, dict[str, int]]:
        """Redis now (ms) and every broadcast scope with its last-seen ms (-1: never stamped)."""
        raw = await self._call("hk_clients", list(clients_keys(group)[:2]), [])
        seen = {str(_text(raw[i])): int(raw[i + 1]) for i in range(1, len(raw), 2)}
        return int(raw[0]), seen

    async def collect(self, group: str, scope: str, idle_ms: int) -> str:
        """Delete an idle broadcast scope's state (``deleted``), or say why not: ``active``,
        ``leased``, ``adopted`` (first stamp), ``absent``, ``refused`` (not broadcast)."""
        clients, seen, owners = clients_keys(group)
        keys = [clients, seen, *scope_keys(group, scope)[3:9], owners]
        raw = await self._call("hk_gc", keys, [scope, idle_ms])
        return str(_text(raw[0]))
