"""The gateway benchmark's figures: machine CPU accounting and the goal table."""

from __future__ import annotations

from typing import Any

from benchmarks.gateway import measure, summary


def test_machine_busy_seconds_never_exceed_the_machines_and_only_grow() -> None:
    busy0, all0 = measure.machine_busy_seconds()
    sum(i * i for i in range(200_000))  # some CPU between the two readings
    busy1, all1 = measure.machine_busy_seconds()
    assert 0 < busy0 <= all0
    assert busy0 <= busy1 <= all1
    assert all1 >= all0


def _wrk(rps: float) -> dict[str, float]:
    return {
        "rps": rps,
        "p50_ms": 1.0,
        "p99_ms": 2.0,
        "gw_cpu_s_per_1e6": 100.0,
        "client_cpu_s_per_1e6": 20.0,
        "gw_cores": 0.9,
        "machine_busy_cores": 1.9,
    }


def _round(scale: float) -> dict[str, Any]:
    cost = {field: 1.0 for _, field in summary._COSTS}
    cost["redis_with_acks"] = 2.0
    return {
        "wrk_bare": _wrk(1000 * scale),
        "wrk_noop": _wrk(800 * scale),
        "wrk_produce": _wrk(700 * scale),
        "wrk_noop_w2": _wrk(1400 * scale),
        "wrk_produce_w2": _wrk(1000 * scale),
        "http_batch": {"rate": 60.0, "gw_cpu_s_per_1e6": 15.0, "client_cpu_s_per_1e6": 4.0},
        "sdk_send": {"rate": 100.0, "client_cpu_s_per_1e6": 9.0},
        "http_consume": 30.0,
        "http_consume_gather": 60.0,
        "sdk_consume": {"rate": 100.0, "client_cpu_s_per_1e6": 2.0, "machine_busy_cores": 1.5},
        "http_consume_cost": cost,
        "http_consume_gather_cost": cost,
        "standalone_acks": {"acks": 20, "redis_per_ack": 1.0},
    }


def test_summary_takes_ratios_per_round_and_reports_machine_cores() -> None:
    figures = summary.summary([_round(1.0), _round(2.0), _round(3.0)])
    assert figures["produce_vs_bare"]["median"] == 0.7
    assert figures["workers2_vs_1_produce"]["median"] == 1000 / 700
    assert figures["produce_w2_machine_busy_cores"]["median"] == 1.9
    assert figures["consume_machine_busy_cores"]["median"] == 1.0  # every cost field is 1.0
    assert figures["sdk_consume_machine_busy_cores"]["median"] == 1.5
    goals = summary.goals(figures)
    assert goals["produce_vs_bare"]["met"] is False  # 0.7 against 0.8
    assert goals["batch_vs_sdk"]["met"] is False  # 0.6 against 0.8
    assert goals["consume_vs_sdk"]["met"] is False
    assert goals["workers2_vs_1_produce"]["met"] is False
    table = summary.markdown(figures, goals, "# head")
    assert "| consume_vs_sdk | 0.3 | ≥ 0.6 | NO |" in table
    assert "| ≥ 1.6 | NO (machine busy on 1.9 cores) |" in table


def test_a_ratio_at_the_issue_target_is_met() -> None:
    rounds = [_round(1.0) for _ in range(3)]
    for one in rounds:
        one["wrk_produce"] = _wrk(850.0)
        one["http_batch"] = {"rate": 80.0, "gw_cpu_s_per_1e6": 15.0, "client_cpu_s_per_1e6": 4.0}
    goals = summary.goals(summary.summary(rounds))
    assert goals["produce_vs_bare"]["met"] is True
    assert goals["batch_vs_sdk"]["met"] is True
