"""The duration estimate printed before a run (pure arithmetic over the configuration)."""

from __future__ import annotations

import pytest

from benchmarks.harness.config import parse_args
from benchmarks.harness.estimate import estimate


def test_fewer_rounds_scale_the_per_round_parts_only() -> None:
    six = estimate(parse_args([]), java_ok=True, go_ok=True)
    four = estimate(parse_args(["--rounds", "4"]), java_ok=True, go_ok=True)
    assert four.runs * 6 == six.runs * 4
    assert four.parts["produce"] * 6 == pytest.approx(six.parts["produce"] * 4)
    assert four.parts["set-up"] == six.parts["set-up"]
    assert 0.6 < four.seconds / six.seconds < 0.7


def test_the_full_matrix_takes_hours_and_the_quick_profile_minutes() -> None:
    full = estimate(parse_args([]), java_ok=True, go_ok=False)
    quick = estimate(parse_args(["--quick"]), java_ok=True, go_ok=True)
    assert 3 * 3600 < full.seconds < 24 * 3600
    assert 5 * 60 < quick.seconds < 30 * 60
    assert full.line().startswith("estimated duration ≈ ")
    assert " h for " in full.line()
    assert " min for " in quick.line()


def test_a_peer_that_cannot_run_costs_nothing() -> None:
    cfg = parse_args(["--clients", "aio,java,go"])
    assert estimate(cfg, java_ok=True, go_ok=False).runs < estimate(cfg, True, True).runs
