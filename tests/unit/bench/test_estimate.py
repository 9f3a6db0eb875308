"""The duration estimate printed before a run (pure arithmetic over the configuration)."""

from __future__ import annotations

import pytest

from benchmarks.harness.config import parse_args
from benchmarks.harness.estimate import estimate


def test_fewer_rounds_scale_the_per_round_parts_only() -> None:
    six = estimate(parse_args(["--rounds", "6"]), java_ok=True, go_ok=True)
    four = estimate(parse_args([]), java_ok=True, go_ok=True)
    assert four.runs * 6 == six.runs * 4
    assert four.parts["produce"] * 6 == pytest.approx(six.parts["produce"] * 4)
    assert four.parts["set-up"] == six.parts["set-up"]
    assert 0.6 < four.seconds / six.seconds < 0.7


def test_the_full_matrix_takes_hours_and_the_quick_profile_minutes() -> None:
    full = estimate(parse_args([]), java_ok=True, go_ok=False)
    quick = estimate(parse_args(["--quick"]), java_ok=True, go_ok=True)
    assert 3600 < full.seconds < 3 * 3600
    assert 5 * 60 < quick.seconds < 30 * 60
    assert full.line().startswith("estimated duration ≈ ")
    assert " h for " in full.line()
    assert " min for " in quick.line()


def test_a_peer_that_cannot_run_costs_nothing() -> None:
    cfg = parse_args(["--clients", "aio,java,go"])
    assert estimate(cfg, java_ok=True, go_ok=False).runs < estimate(cfg, True, True).runs


def test_run_sizes_follow_the_scenario_and_window_and_only_java_warms_up_long() -> None:
    cfg = parse_args([])
    assert cfg.count_for(1024, "produce", 1) < cfg.count_for(1024, "produce", 256)
    assert cfg.count_for(10240, "produce", 256) < cfg.count_for(1024, "produce", 256)
    assert cfg.count_for(1024) >= cfg.count_for(1024, "produce", 256)
    assert cfg.warmup_for("java") == 30.0
    assert cfg.warmup_for("aio") == cfg.warmup_for("go") == 5.0
    fixed = parse_args(["--messages", "777", "--java-warmup-seconds", "9"])
    assert fixed.count_for(100, "produce", 1) == fixed.count_for(10240) == 777
    assert fixed.warmup_for("java") == 9.0
