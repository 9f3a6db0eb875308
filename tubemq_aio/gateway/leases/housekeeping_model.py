"""The housekeeper's part of the pure lease model: leadership and the broadcast client registry.

The reference the housekeeper's Lua scripts (``lua/hk_*.lua``) and the store's client stamp
implement, like :mod:`tubemq_aio.gateway.leases.model` is for the lease scripts: the same
operations with the same arguments and answers, ``now`` (Redis ``TIME`` in ms) an argument, so a
test can run one random sequence through both and compare.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tubemq_aio.gateway.leases.model import GroupState

__all__ = ["IDLE_LIMIT", "HousekeepingState"]

#: Idle partitions one ``hk_idle`` call returns at most.
IDLE_LIMIT = 256


@dataclass(slots=True)
class HousekeepingState:
    """The housekeeper's keys of one group (the model of ``…:hk``, ``…:clients``, ``…:seen``,
    ``…:owners``).

    Attributes:
        leader: who holds the group's housekeeper leadership (None: nobody).
        leader_until: when that leadership lapses, ms.
        clients: the broadcast scopes of the group.
        seen: broadcast scope → when it was last stamped by a fetch, ms.
        owners: broadcast scope → the API key that first used it.
    """

    leader: str | None = None
    leader_until: int = 0
    clients: set[str] = field(default_factory=set)
    seen: dict[str, int] = field(default_factory=dict)
    owners: dict[str, str] = field(default_factory=dict)

    def lead(self, now: int, me: str, lease_ms: int) -> tuple[bool, str]:
        """Take the leadership if free or lapsed, renew it if ``me`` holds it (``hk_lead``).

        Returns:
            ``(held, holder)``.
        """
        # Redis drops a key with PX once its clock is past the expiry, not at it.
        if self.leader is None or self.leader_until < now or self.leader == me:
            self.leader, self.leader_until = me, now + lease_ms
            return True, me
        return False, self.leader

    def resign(self, me: str) -> None:
        """Give the leadership up if ``me`` holds it (compare and delete; a lapsed one is free
        either way)."""
        if self.leader == me:
            self.leader = None

    def add_client(self, now: int, scope: str, cap: int, owner: str, owner_cap: int) -> str:
        """Stamp a broadcast scope as seen now; a new one only within the group's ``cap`` and its
        owner's ``owner_cap`` (0: no cap).

        Returns:
            ``ok``, ``group_full`` or ``owner_full`` (nothing written).
        """
        if scope not in self.clients:
            if cap > 0 and len(self.clients) >= cap:
                return "group_full"
            if owner_cap > 0 and sum(o == owner for o in self.owners.values()) >= owner_cap:
                return "owner_full"
            self.owners[scope] = owner
        self.clients.add(scope)
        self.seen[scope] = now
        return "ok"

    def listed(self) -> dict[str, int]:
        """Every broadcast scope with when it was last seen (-1: never stamped) (``hk_clients``)."""
        out = dict(self.seen)
        out.update({s: -1 for s in self.clients if s not in self.seen})
        return out

    @staticmethod
    def idle_partitions(group: GroupState, now: int, scope: str, older_than_ms: int) -> list[str]:
        """The scope's eligible partitions that became so at least ``older_than_ms`` ago, oldest
        first (``hk_idle``)."""
        ready = group.scope(scope).ready
        due = sorted((t, p.encode(), p) for p, t in ready.items() if t <= now - older_than_ms)
        return [p for _, _, p in due[:IDLE_LIMIT]]

    def collect(self, group: GroupState, now: int, scope: str, idle_ms: int) -> str:
        """Delete an idle broadcast scope's state, or say why not (``hk_gc``).

        Returns:
            ``refused`` (not broadcast, or ``idle_ms`` ≤ 0), ``absent``, ``adopted`` (no
            last-seen time yet: it starts now), ``active`` (seen within ``idle_ms``),
            ``leased`` (a live lease) or ``deleted``.
        """
        if not scope.startswith("b:") or idle_ms <= 0:
            return "refused"
        seen = self.seen.get(scope)
        if seen is None:
            if scope in self.clients:
                self.seen[scope] = now
                return "adopted"
            return "absent"
        if seen > now - idle_ms:
            return "active"
        if any(t > now for t in group.scope(scope).leased.values()):
            return "leased"
        group.scopes.pop(scope, None)
        self.clients.discard(scope)
        self.seen.pop(scope, None)
        self.owners.pop(scope, None)
        return "deleted"
