"""A pure model of one partition of one group at a TubeMQ broker, for the gateway's fence
simulations (``tests/unit/gateway/test_gateway_fence_model.py``,
``tests/unit/gateway/test_gateway_read_ahead_model.py``).

The auto-commit rules of ``docs/protocol/consumer.md`` §4.2: one batch in flight per group and
partition whoever read it (the gateway's replicas share one consumer id); a GetMessage with
``lastPackConsumed`` first commits it, one without reads again from the committed offset; a
CommitOffset with true commits it, with false discards it; a register discards it and puts the
committed offset anywhere (clamped to the store's end); a crash loses the unflushed tail, whose
offsets later messages reuse (``gen`` tells them apart), and drops the registration. Offsets
count messages here (the real ones count 28-byte index records).
"""

from __future__ import annotations

import dataclasses

__all__ = ["Broker"]


@dataclasses.dataclass
class Broker:
    """One partition of one group at a TubeMQ broker (auto-commit offsets)."""

    messages: list[tuple[int, int]] = dataclasses.field(default_factory=list)  # (offset, gen)
    committed: int = 0
    in_flight: int = 0
    registered: bool = True
    gen: int = 0
    rpcs: int = 0

    def produce(self, n: int) -> None:
        base = len(self.messages)
        self.messages += [(base + i, self.gen) for i in range(n)]

    def crash(self, keep: int) -> None:
        """A restart that lost the tail past ``keep``; later messages reuse those offsets."""
        del self.messages[keep:]
        self.gen += 1
        self.committed, self.in_flight = min(self.committed, len(self.messages)), 0
        self.registered = False

    def register(self, offset: int) -> int:
        self.rpcs += 1
        self.registered, self.in_flight = True, 0
        self.committed = min(offset, len(self.messages))
        return self.committed

    def commit(self, consumed: bool) -> int:
        """CommitOffset: where the committed cursor is after it (-1: refused, not
        registered)."""
        self.rpcs += 1
        if not self.registered:
            return -1
        if consumed:
            self.committed += self.in_flight
        self.in_flight = 0
        return self.committed

    def get(self, last_consumed: bool, size: int) -> tuple[str, int, tuple[tuple[int, int], ...]]:
        """``("ok", start, batch)``, ``("404", -1, ())`` or ``("411", -1, ())``."""
        self.rpcs += 1
        if not self.registered:
            return ("411", -1, ())
        if last_consumed:
            self.committed, self.in_flight = self.committed + self.in_flight, 0
        start = self.committed
        if start >= len(self.messages):
            return ("404", -1, ())
        batch = tuple(self.messages[start : start + size])
        self.in_flight = len(batch)
        return ("ok", start, batch)
