"""The pure lease model's state of one partition and of one scope, and the rate limiter's math.

Part of :mod:`tubemq_aio.gateway.leases.model` (which re-exports these names), split off to keep
each module small.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["DONE_MAX", "HOLD_RETRY_MS", "PartState", "ScopeState", "gcra"]


@dataclass(slots=True)
class PartState:
    """One partition in one scope.

    Each attribute is one field ``<partition>|<name>`` of the scope's Redis hash; the short
    Redis name (kept short: it is stored once per partition and scope) is in brackets.

    Attributes:
        committed: the committed offset [``cmt``] (None: not started yet; ``init`` decides).
        max_offset: largest max offset the broker reported [``mx``] (-1 unknown).
        lease_id: lease id of the current or last unsettled lease [``lid``] (kept after expiry
            for late acks).
        lease_expiry: lease expiry, ms [``lexp``].
        leased_at: when the lease was taken, ms [``lat``].
        holder: lease holder text [``lh``].
        batch_start: batch start of the lease [``ls``] (set by ``record``).
        batch_end: offset after the batch [``ln``].
        last_settled: lease id settled last [``last``] (a retried settle answers ``already``).
        redeliveries: how often the batch at ``committed`` was delivered again [``rc``].
        empty_reads: consecutive empty reads [``zc``].
        last_ack_at: when the last ack happened, ms [``la``].
        gone: the partition left the metadata (its ``committed`` is kept) [``gone``].
        start: pending start ``earliest``/``latest`` set by a reset [``start``] (None: the
            group's default).
    """

    committed: int | None = None
    max_offset: int = -1
    lease_id: str | None = None
    lease_expiry: int = 0
    leased_at: int = 0
    holder: str = ""
    batch_start: int | None = None
    batch_end: int | None = None
    last_settled: str | None = None
    redeliveries: int = 0
    empty_reads: int = 0
    last_ack_at: int = 0
    gone: bool = False
    start: str | None = None

    def take_lease(self, lease_id: str, expiry: int, now: int, holder: str) -> None:
        """Lease the partition (no batch booked yet)."""
        self.lease_id, self.lease_expiry, self.leased_at, self.holder = (
            lease_id,
            expiry,
            now,
            holder,
        )
        self.batch_start = self.batch_end = None

    def clear_lease(self, *, last_settled: str | None) -> None:
        """Forget the lease and its batch; ``last_settled`` is what a retried settle finds."""
        self.last_settled = last_settled
        self.lease_id, self.lease_expiry, self.leased_at, self.holder = None, 0, 0, ""
        self.batch_start = self.batch_end = None


#: A fetch of a rate-limited group that finds another read running retries this soon (ms).
HOLD_RETRY_MS = 20
#: Settled lease ids a scope remembers at most (``DONE_MAX`` in ``lua/common.lua``).
DONE_MAX = 10_000


@dataclass(slots=True)
class ScopeState:
    """The partitions and schedules of one scope."""

    members: set[str] = field(default_factory=set)  # the partitions of the scope
    parts: dict[str, PartState] = field(default_factory=dict)  # fields (may outlive members)
    ready: dict[str, int] = field(default_factory=dict)
    leased: dict[str, int] = field(default_factory=dict)
    acq: dict[str, str] = field(default_factory=dict)  # live lease id -> partition
    done: dict[str, int] = field(default_factory=dict)  # "<lease id>|<outcome>" -> kept until

    def settled_as(self, lid: str, now: int) -> str | None:
        """How lease ``lid`` was settled (``acked``/``nacked``/``released``), if remembered."""
        for outcome in ("acked", "nacked", "released"):
            if self.done.get(f"{lid}|{outcome}", now) > now:
                return outcome
        return None

    def remember(self, lid: str, outcome: str, life_ms: int, now: int) -> None:
        """Keep how ``lid`` ended for ``life_ms``; at most :data:`DONE_MAX`, oldest out first."""
        self.done = {m: t for m, t in self.done.items() if t > now}
        self.done[f"{lid}|{outcome}"] = now + life_ms
        if len(self.done) > DONE_MAX:
            keep = sorted(self.done.items(), key=lambda kv: (kv[1], kv[0].encode()))[-DONE_MAX:]
            self.done = dict(keep)

    def part(self, p: str) -> PartState:
        """The fields of ``p`` (created empty if unknown, like missing Redis hash fields)."""
        return self.parts.setdefault(p, PartState())


def gcra(
    tat_us: int | None, now_us: int, rate: float, burst: int, cost: int
) -> tuple[int, int | None]:
    """Generic cell rate algorithm over microseconds (float math as in the Lua scripts).

    Args:
        tat_us: the theoretical arrival time stored (None: never charged).
        now_us: now.
        rate: messages per second (> 0).
        burst: messages allowed at once (≥ 1).
        cost: messages to charge (0: only check).

    Returns:
        ``(wait_us, tat_us)``: with ``cost`` 0 the wait before the next fetch may start (0: now)
        and the unchanged TAT; with a cost, 0 and the TAT after charging it.
    """
    interval = 1e6 / rate
    tat = now_us if tat_us is None else max(tat_us, now_us)
    if cost == 0:
        allow_at = tat - interval * burst
        return (math.ceil(allow_at - now_us) if allow_at > now_us else 0), tat_us
    return 0, math.floor(tat + interval * cost)
