"""Bad-broker blocking (docs/protocol/wire.md §5.11): the 503 rule and the low-success-rate
evaluation."""

from __future__ import annotations

import pytest

from tubemq_aio.protocol.broker_blocking import BrokerBlocker, BrokerBlockingConfig


def feed(blocker: BrokerBlocker, broker_id: int, sends: int, successes: int, now: float) -> None:
    for i in range(sends):
        blocker.record(broker_id, i < successes, now)


def test_java_defaults() -> None:
    cfg = BrokerBlockingConfig()
    assert (cfg.evaluation_interval, cfg.block_duration) == (30.0, 30.0)
    assert (cfg.max_blocked_ratio, cfg.threshold_ratio, cfg.min_success_ratio) == (0.15, 0.2, 0.1)
    assert (cfg.min_expected_successes, cfg.unavailable_duration) == (2, 50.0)


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="evaluation_interval"):
        BrokerBlockingConfig(evaluation_interval=0)
    with pytest.raises(ValueError, match="max_blocked_ratio"):
        BrokerBlockingConfig(max_blocked_ratio=2)


def test_503_blocks_for_50_seconds_after_the_last() -> None:
    b = BrokerBlocker()
    b.record(1, False, 0.0, err_code=503)
    assert b.blocked(0.0) == {1}
    b.record(1, False, 10.0, err_code=503)
    assert b.blocked(59.9) == {1}
    assert b.blocked(60.0) == frozenset()


def test_other_errors_do_not_block_immediately() -> None:
    b = BrokerBlocker()
    b.record(1, False, 0.0, err_code=500)
    assert b.blocked(0.0) == frozenset()


def healthy_plus_bad(b: BrokerBlocker, *, bad_successes: int, now: float = 1.0) -> None:
    for broker_id in range(1, 7):  # six healthy brokers: 100 sends, 100 successes
        feed(b, broker_id, 100, 100, now)
    feed(b, 7, 100, bad_successes, now)


def test_low_success_broker_blocked_at_evaluation() -> None:
    b = BrokerBlocker()
    b.blocked(0.0)  # the first window starts
    healthy_plus_bad(b, bad_successes=5)
    assert b.blocked(29.0) == frozenset()  # not evaluated yet
    # n=7: hold = round(7*0.15) = 1; T = (700+5 - 5 - 100 - 100) / 4 * 0.2 = 125 * 0.2 = 25;
    # broker 7: 5 < 25, floor(100*0.1) = 10 > 2, 5 < 10 -> blocked.
    assert b.blocked(30.0) == {7}
    snap = b.snapshot()
    assert snap.low_success == {7: 30.0}
    assert snap.window[1] == (0, 0)  # windows restart at an evaluation


def test_block_lifted_by_a_later_evaluation() -> None:
    b = BrokerBlocker()
    b.blocked(0.0)
    healthy_plus_bad(b, bad_successes=5)
    assert b.blocked(30.0) == {7}
    assert b.blocked(60.0) == {7}  # blocked exactly 30 s ago: not "more than" 30 s
    assert b.blocked(90.0) == frozenset()


def test_not_blocked_when_successes_reach_ten_percent_of_sends() -> None:
    b = BrokerBlocker()
    b.blocked(0.0)
    healthy_plus_bad(b, bad_successes=10)
    assert b.blocked(30.0) == frozenset()


def test_quiet_broker_never_blocked() -> None:
    b = BrokerBlocker()
    b.blocked(0.0)
    for broker_id in range(1, 7):
        feed(b, broker_id, 100, 100, 1.0)
    feed(b, 7, 29, 0, 1.0)  # floor(29 * 0.1) = 2, not > 2
    assert b.blocked(30.0) == frozenset()


def test_too_few_brokers_for_any_block() -> None:
    b = BrokerBlocker()
    b.blocked(0.0)
    feed(b, 1, 100, 100, 1.0)
    feed(b, 2, 100, 100, 1.0)
    feed(b, 3, 100, 0, 1.0)  # n=3: hold = round(0.45) = 0
    assert b.blocked(30.0) == frozenset()


def test_hold_limits_number_blocked() -> None:
    b = BrokerBlocker()
    b.blocked(0.0)
    for broker_id in range(1, 9):
        feed(b, broker_id, 100, 100, 1.0)
    feed(b, 9, 100, 0, 1.0)
    feed(b, 10, 100, 1, 1.0)
    # n=10: hold = round(1.5) = 2 (half to even); both bad brokers go.
    assert b.blocked(30.0) == {9, 10}
    # Next window: the blocked ones are out of the ranking; hold = round(10*0.15) - 2 = 0.
    for broker_id in range(1, 9):
        feed(b, broker_id, 100, 100 if broker_id > 1 else 0, 31.0)
    assert b.blocked(60.0) == {9, 10}


def test_walk_stops_at_first_healthy_broker() -> None:
    b = BrokerBlocker(BrokerBlockingConfig(max_blocked_ratio=0.5))
    b.blocked(0.0)
    for broker_id in range(1, 7):
        feed(b, broker_id, 100, 100, 1.0)
    feed(b, 7, 100, 0, 1.0)
    assert b.blocked(30.0) == {7}


def test_disabled_rule_keeps_503() -> None:
    b = BrokerBlocker(BrokerBlockingConfig(enabled=False))
    b.blocked(0.0)
    healthy_plus_bad(b, bad_successes=0)
    b.record(3, False, 29.0, err_code=503)
    assert b.blocked(30.0) == {3}


def test_forget_and_repr() -> None:
    b = BrokerBlocker()
    b.record(1, False, 0.0, err_code=503)
    assert "unavailable=[1]" in repr(b)
    b.forget(1)
    assert b.blocked(0.0) == frozenset()
    assert b.snapshot().window == {}


def test_connect_failures_forbid_address_after_more_than_five() -> None:
    b = BrokerBlocker()
    for i in range(4):  # four known addresses: round(4 * 0.3) = 1 may be forbidden
        b.record_connect(f"h{i}:8123", True, 0.0)
    for _ in range(5):
        b.record_connect("h0:8123", False, 1.0)
    assert b.blocked_addresses(1.0) == frozenset()
    b.record_connect("h0:8123", False, 2.0)
    assert b.blocked_addresses(2.0) == {"h0:8123"}
    assert b.blocked_addresses(1802.0) == {"h0:8123"}
    assert b.blocked_addresses(1802.1) == frozenset()
    assert b.snapshot().connect_failures["h0:8123"] == 6


def test_connect_forbidden_share_is_capped() -> None:
    b = BrokerBlocker()
    for i in range(4):
        b.record_connect(f"h{i}:1", True, 0.0)
    for address in ("h0:1", "h1:1"):
        for _ in range(6):
            b.record_connect(address, False, 1.0)
    assert b.blocked_addresses(1.0) == {"h0:1"}  # only one of four may be forbidden


def test_connect_window_restarts_and_success_lifts() -> None:
    b = BrokerBlocker(BrokerBlockingConfig(link_max_blocked_ratio=1.0))
    for t in (0.0, 10.0, 20.0, 30.0, 40.0):
        b.record_connect("a:1", False, t)
    b.record_connect("a:1", False, 61.0)  # more than 60 s after the window start: count restarts
    assert b.blocked_addresses(61.0) == frozenset()
    for _ in range(5):
        b.record_connect("a:1", False, 62.0)
    assert b.blocked_addresses(62.0) == {"a:1"}
    b.record_connect("a:1", True, 63.0)
    assert b.blocked_addresses(63.0) == frozenset()
    assert "forbidden_addresses=[]" in repr(b)
