"""Housekeeper decisions without I/O or an event loop."""

from __future__ import annotations

from tubemq_aio.gateway.housekeeper.decisions import (
    LEADER_SAFETY,
    LagSample,
    Leadership,
    clients_to_collect,
    lag_samples,
    sessions_to_close,
)


def test_leadership_ends_before_the_redis_key_even_without_an_answer() -> None:
    lead = Leadership(lease_ms=15_000)
    assert not lead.is_leader(0.0)
    assert lead.observe(True, sent_at=100.0)  # gained
    assert lead.is_leader(100.0 + LEADER_SAFETY * 15 - 0.001)
    assert not lead.is_leader(100.0 + LEADER_SAFETY * 15)  # no renewal came: stop acting
    assert not lead.is_leader(115.0)  # never beyond what Redis granted from the send time
    assert not lead.observe(True, sent_at=105.0)  # a renewal is no change
    assert lead.is_leader(116.0)
    assert lead.observe(False, sent_at=110.0)  # someone else holds it: at once not leader
    assert not lead.is_leader(110.0)
    assert lead.changes == 2
    lead.observe(True, sent_at=120.0)
    lead.resign()
    assert not lead.is_leader(120.0)


def test_sessions_to_close_skips_busy_and_recent_and_never_when_zero() -> None:
    open_groups = ["a", "b", "c", "d"]
    last_use = {"a": 0.0, "b": 95.0, "c": 0.0}
    busy = {"c": 1}
    assert sessions_to_close(open_groups, last_use, busy, now=100.0, idle_s=10) == ["a", "d"]
    assert sessions_to_close(open_groups, last_use, busy, now=100.0, idle_s=0) == []
    assert sessions_to_close([], last_use, busy, now=100.0, idle_s=1) == []


def test_clients_to_collect_only_broadcast_idle_or_unstamped() -> None:
    seen = {"b:old": 1_000, "b:new": 9_500, "b:unstamped": -1, "c": 0}
    assert clients_to_collect(seen, now_ms=10_000, idle_ms=5_000) == ["b:old", "b:unstamped"]
    assert clients_to_collect(seen, now_ms=10_000, idle_ms=0) == []
    assert clients_to_collect(seen, now_ms=10_000, idle_ms=500) == [
        "b:new",
        "b:old",
        "b:unstamped",
    ]


def test_lag_samples_skip_unknown_and_add_a_total() -> None:
    got = lag_samples("g", "c", [("2:t:0", 56), ("1:t:0", 28), ("1:t:1", None)])
    assert got == [
        LagSample("g", "c", "1:t:0", 28),
        LagSample("g", "c", "2:t:0", 56),
        LagSample("g", "c", "", 84),
    ]
    assert lag_samples("g", "b:x", []) == [LagSample("g", "b:x", "", 0)]
