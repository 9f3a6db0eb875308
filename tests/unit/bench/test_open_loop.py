"""The open-loop sender of the latency benchmark: every send leaves at or after its due time
(uvloop's millisecond timers can wake a sleeper early), and latency counts from the due time."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import uvloop

from benchmarks.harness.latency import OpenLoopResult, open_loop
from tubemq_aio import Producer


class InstantProducer:
    """Answers every send at the next loop iteration."""

    def __init__(self) -> None:
        self.sent = 0

    async def send(self, topic: str, body: bytes) -> None:
        self.sent += 1
        await asyncio.sleep(0)


def run(loop_runner: Any) -> tuple[OpenLoopResult, int]:
    fake = InstantProducer()

    async def main() -> OpenLoopResult:
        async with asyncio.timeout(30):
            return await open_loop(cast(Producer, fake), "t", b"x", rate=2000, seconds=0.5)

    return loop_runner(main()), fake.sent


def test_no_send_leaves_before_its_due_time_on_uvloop() -> None:
    res, sent = run(uvloop.run)
    assert sent == res.sent == 1000
    assert res.errors == 0
    assert res.lag.total == res.histogram.total == 1000
    # Bucket 0 holds values below 1 µs: a send started early is recorded there (lag clamped at
    # 0); one started after its due time waits at least one loop iteration.
    assert 0 not in res.lag.counts, sorted(res.lag.counts.items())[:3]
    assert 0 not in res.histogram.counts


def test_latency_counts_from_the_due_time_on_asyncio() -> None:
    res, _ = run(asyncio.run)
    summary = res.histogram.summary()
    assert summary["count"] == 1000
    p50, lag50 = summary["p50_ms"], res.lag.summary()["p50_ms"]
    assert isinstance(p50, float)
    assert isinstance(lag50, float)
    assert p50 >= lag50  # the answer comes after the send started
