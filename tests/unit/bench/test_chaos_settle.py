"""The settle after a chaos event: a fixed ``settle_seconds`` for ``make chaos``; with
``settle_when_flowing`` (the short run in ``make test``) it ends that long after produce and both
consumer groups flowed again after the event, and never later than ``settle_seconds``."""

from __future__ import annotations

import time

from benchmarks.chaos.events import EventRecord
from benchmarks.chaos.run import ChaosPlan, _settle
from benchmarks.chaos.traffic import Ack, Traffic, TrafficPlan


def _traffic(ack_at: float, receipts_at: tuple[float, float]) -> Traffic:
    """One acknowledgement at ``ack_at`` and one receipt per group at ``receipts_at``."""
    traffic = Traffic(TrafficPlan("127.0.0.1:1", "t"), uvloop_producer=False)
    traffic.producers[0].acked[b"m"] = Ack(at=ack_at, broker_id=1)
    for log, at in zip(traffic.consumer_logs, receipts_at, strict=True):
        log.record(b"m", at)
    return traffic


def test_flowing_needs_an_ack_and_a_receipt_of_each_group_after_the_time() -> None:
    assert _traffic(13.0, (14.0, 14.5)).flowing_since(12.5)
    assert not _traffic(12.0, (14.0, 14.5)).flowing_since(12.5)  # no ack since
    assert not _traffic(13.0, (14.0, 12.0)).flowing_since(12.5)  # client-balanced not back
    assert not _traffic(13.0, (12.0, 14.0)).flowing_since(12.5)  # server-balanced not back
    empty = Traffic(TrafficPlan("127.0.0.1:1", "t"), uvloop_producer=False)
    assert not empty.flowing_since(0.0)


async def _settle_seconds(traffic: Traffic, healed: float, plan: ChaosPlan) -> float:
    t0 = time.monotonic()
    await _settle(traffic, EventRecord("network_cut", began=healed - 1, healed=healed), plan)
    return time.monotonic() - t0


async def test_a_flowing_run_settles_early_a_stalled_one_waits_the_whole_settle() -> None:
    healed = time.monotonic() - 1.0
    flowing = _traffic(healed + 0.5, (healed + 0.6, healed + 0.7))
    stalled = _traffic(healed - 0.5, (healed + 0.6, healed + 0.7))
    early = ChaosPlan(settle_seconds=1.0, settle_when_flowing=0.1)
    assert await _settle_seconds(flowing, healed, early) < 0.6
    assert await _settle_seconds(stalled, healed, early) >= 1.0


async def test_without_settle_when_flowing_the_whole_settle_is_waited() -> None:
    healed = time.monotonic() - 1.0
    flowing = _traffic(healed + 0.5, (healed + 0.6, healed + 0.7))
    assert await _settle_seconds(flowing, healed, ChaosPlan(settle_seconds=0.5)) >= 0.5
