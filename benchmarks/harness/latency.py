"""Open-loop send latency: an HDR-style histogram and the fixed-rate sender of the aio worker.

Sends are *scheduled* at ``t0 + i / rate``; each latency is measured from that intended time to
the broker's acknowledgement, so a stalled client or broker shows up as latency of every message
that should have gone out meanwhile (no coordinated omission). The Java peer's ``latency`` mode
(``Latency.java``) does the same with the official client's asynchronous send and callback.

A second histogram, the *schedule lag*, records how late each send call actually started against
its due time: the sender's own share (timer resolution of the event loop, a busy loop) of the
latency.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field

from tubemq_aio import Producer

#: Sub-buckets per power of two: relative bucket width 2**(1/64) - 1 ≈ 1.1 %.
_SUB = 64


@dataclass
class Histogram:
    """Log-bucketed latency histogram in microseconds (≈ 1 % relative precision, HDR-like)."""

    counts: dict[int, int] = field(default_factory=dict)
    total: int = 0
    max_us: float = 0.0

    def record(self, us: float) -> None:
        """Add one value (microseconds)."""
        b = 0 if us < 1 else int(math.log2(us) * _SUB)
        self.counts[b] = self.counts.get(b, 0) + 1
        self.total += 1
        self.max_us = max(self.max_us, us)

    def percentile(self, p: float) -> float | None:
        """Upper edge of the bucket holding the ``p``-th percentile (``p`` in 0..100)."""
        if not self.total:
            return None
        rank = math.ceil(p / 100 * self.total)
        seen = 0
        for b in sorted(self.counts):
            seen += self.counts[b]
            if seen >= rank:
                return min(2 ** ((b + 1) / _SUB), self.max_us)
        return self.max_us

    def summary(self) -> dict[str, float | int | None]:
        """p50 / p90 / p99 / p99.9 / max in milliseconds, and the count."""
        out: dict[str, float | int | None] = {"count": self.total}
        for name, p in (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p999", 99.9)):
            v = self.percentile(p)
            out[f"{name}_ms"] = None if v is None else round(v / 1000, 3)
        out["max_ms"] = round(self.max_us / 1000, 3)
        return out

    def cdf(self) -> list[tuple[float, float]]:
        """(latency ms, cumulative fraction) per non-empty bucket, for plots."""
        points, seen = [], 0
        for b in sorted(self.counts):
            seen += self.counts[b]
            points.append((round(2 ** ((b + 1) / _SUB) / 1000, 4), seen / self.total))
        return points


@dataclass
class OpenLoopResult:
    """Outcome of one fixed-rate phase."""

    histogram: Histogram
    lag: Histogram
    sent: int
    errors: int
    first_error: str | None
    seconds: float


async def open_loop(
    producer: Producer, topic: str, body: bytes, rate: float, seconds: float
) -> OpenLoopResult:
    """Send at ``rate`` msg/s for ``seconds``; latency from each intended send time to its ack."""
    hist, lag = Histogram(), Histogram()
    errors = 0
    first: str | None = None
    pending: set[asyncio.Task[None]] = set()
    n = int(rate * seconds)
    clock = time.perf_counter

    async def one(intended: float) -> None:
        nonlocal errors, first
        lag.record(max(0.0, clock() - intended) * 1e6)
        try:
            await producer.send(topic, body)
        except Exception as exc:
            errors += 1
            first = first or f"{type(exc).__name__}: {exc}"
        else:
            hist.record((clock() - intended) * 1e6)

    t0 = clock()
    for i in range(n):
        intended = t0 + i / rate
        # A loop: uvloop's millisecond timers can wake a little early, and a send must never
        # leave before its due time (its latency would read as less than the truth).
        while (delay := intended - clock()) > 0:  # noqa: ASYNC110 (a timer, not a wait)
            await asyncio.sleep(delay)
        task = asyncio.ensure_future(one(intended))
        pending.add(task)
        task.add_done_callback(pending.discard)
    if pending:
        await asyncio.gather(*pending)
    return OpenLoopResult(hist, lag, n, errors, first, clock() - t0)
