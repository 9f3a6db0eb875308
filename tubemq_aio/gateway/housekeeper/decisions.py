"""Pure decisions of the housekeeper (no I/O, no event loop): leadership, idle sessions,
broadcast clients to collect, lag gauge samples.

Times are plain numbers passed in by the caller: local monotonic seconds for leadership and
sessions (they only ever shorten what Redis granted), Redis milliseconds for client idleness.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = [
    "LEADER_SAFETY",
    "LagSample",
    "Leadership",
    "clients_to_collect",
    "lag_samples",
    "sessions_to_close",
]

#: A leader acts only during this fraction of its lease, counted from when the renewal was
#: SENT: Redis set the expiry later than that, so the local belief ends before Redis's does
#: even if the two clocks run a little apart.
LEADER_SAFETY = 0.8


@dataclass(slots=True)
class Leadership:
    """What one replica believes about its leadership of one group.

    Args:
        lease_ms: life of the leader key in Redis.
    """

    lease_ms: int
    held_until: float = -math.inf
    changes: int = 0

    def observe(self, held: bool, sent_at: float) -> bool:
        """Record the answer of a take-or-renew sent at ``sent_at``; True if leadership
        changed (gained or lost)."""
        before = self.held_until > sent_at
        if held:
            self.held_until = sent_at + LEADER_SAFETY * self.lease_ms / 1000
        else:
            self.held_until = -math.inf
        changed = before != held
        self.changes += int(changed)
        return changed

    def is_leader(self, now: float) -> bool:
        """Whether the replica may act as leader at local time ``now``: a renewal that failed
        or never came back leaves it leader only until its last grant runs out."""
        return now < self.held_until

    def resign(self) -> None:
        """Stop acting as leader at once (on close)."""
        self.held_until = -math.inf


def sessions_to_close(
    open_groups: Iterable[str],
    last_use: Mapping[str, float],
    busy: Mapping[str, int],
    now: float,
    idle_s: float,
) -> list[str]:
    """Groups whose TubeMQ session no client used for ``idle_s`` seconds and that no fetch is
    using now (``idle_s <= 0``: never). A session never used by a client (opened by a lag probe)
    counts as idle."""
    if idle_s <= 0:
        return []
    return sorted(
        g for g in open_groups if busy.get(g, 0) <= 0 and now - last_use.get(g, -math.inf) >= idle_s
    )


def clients_to_collect(seen: Mapping[str, int], now_ms: int, idle_ms: int) -> list[str]:
    """Broadcast scopes to hand to the collect script: last seen ``idle_ms`` or longer ago, or
    never stamped (-1; the script adopts those). Clustering scopes are never returned; the
    script checks again atomically, so a client seen meanwhile survives."""
    if idle_ms <= 0:
        return []
    return sorted(
        s for s, at in seen.items() if s.startswith("b:") and (at < 0 or now_ms - at >= idle_ms)
    )


@dataclass(frozen=True, slots=True)
class LagSample:
    """One lag gauge value: ``partition`` is empty for a scope's total."""

    group: str
    scope: str
    partition: str
    lag_bytes: int


def lag_samples(group: str, scope: str, lags: Iterable[tuple[str, int | None]]) -> list[LagSample]:
    """Gauge samples of one scope's lag report: one per partition whose lag is known (a
    committed offset and a max exist) and the scope's total over those."""
    known = [(p, lag) for p, lag in lags if lag is not None]
    out = [LagSample(group, scope, p, lag) for p, lag in sorted(known)]
    out.append(LagSample(group, scope, "", sum(lag for _, lag in known)))
    return out
