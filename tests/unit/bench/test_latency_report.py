"""Open-loop latency against the Java peer: per-round p50/p99 ratios, intervals, the summary and
the latency figure (pure: hand-made runs, no cluster)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.harness.plots import all_plots
from benchmarks.harness.report import analyse, markdown


def run(variant: str, rnd: int, rate: int, p50: float, p99: float) -> dict[str, Any]:
    """One kept open-loop latency run."""
    client = "java" if variant == "java" else "aio"
    latency = {
        "count": 1000,
        "p50_ms": p50,
        "p90_ms": p50 * 2,
        "p99_ms": p99,
        "p999_ms": p99 * 1.2,
        "max_ms": p99 * 1.5,
    }
    return {
        "ok": True,
        "discarded": False,
        "scenario": "latency",
        "size": 1024,
        "window": None,
        "rate": rate,
        "variant": variant,
        "client": client,
        "round": rnd,
        "msg_per_s": float(rate),
        "mb_per_s": rate / 1000,
        "cpu_s_per_1e6": 100.0,
        "peak_rss_mb": 30.0,
        "errors": 0,
        "lag_p50_ms": 0.1,
        "lag_p99_ms": 0.9,
        **{f"latency_{k}": v for k, v in latency.items() if k.endswith("_ms")},
        "peer": {"latency": latency, "latency_cdf": [[p50, 0.5], [p99, 0.99], [p99 * 1.5, 1.0]]},
    }


RUNS = [
    *(run("aio-asyncio", r, 1000, 1.0 + r / 10, 5.0) for r in (1, 2, 3)),
    *(run("java", r, 1000, 2.0, 20.0) for r in (1, 2, 3)),
    *(run("aio-asyncio", r, 10000, 400.0, 900.0) for r in (1, 2, 3)),
    *(run("java", r, 10000, 100.0, 300.0) for r in (1, 2, 3)),
]


def test_latency_cells_carry_per_round_p50_p99_ratios_with_intervals() -> None:
    cells = {c["rate"]: c for c in analyse(RUNS)["cells"]}
    low = cells[1000]["ratios"]["aio-asyncio"]
    assert low["p50_rounds"] == [0.55, 0.6, 0.65]
    assert low["p50"] == 0.6
    assert low["p50_ci95"] is not None
    assert low["p50_ci95"][0] <= 0.6 <= low["p50_ci95"][1]
    assert low["p99"] == 0.25
    assert cells[10000]["ratios"]["aio-asyncio"]["p99"] == 3.0
    ours = cells[1000]["absolute"]["aio-asyncio"]
    assert ours["latency_p50_ms"] == 1.2
    assert ours["latency_p50_ms_ci95"] is not None
    assert ours["lag_p99_ms"] == 0.9


def test_produce_cells_have_no_latency_ratios() -> None:
    produce = [dict(r, scenario="produce", window=16, rate=None) for r in RUNS[:6]]
    for r in produce:
        for key in [k for k in r if k.startswith("latency_")]:
            del r[key]
    (cell,) = analyse(produce)["cells"]
    assert "p50" not in cell["ratios"]["aio-asyncio"]


def test_summary_lists_both_clients_and_the_ratio_table() -> None:
    raw: dict[str, Any] = {
        "env": {
            "git_revision": "abc",
            "python": "3.11",
            "protobuf": "x",
            "uvloop": "y",
            "jdk": "17",
            "cpu_model": "cpu",
            "cpus": 2,
            "kernel": "k",
        },
        "config": {
            "sizes": [1024],
            "windows": [],
            "rounds": 4,
            "discard_first": True,
            "messages": {},
            "warmup_seconds": 0,
            "partitions": 4,
        },
        "pinning": {"servers": True, "client": True, "note": ""},
        "cluster": {"version": "2.4.0"},
        "peers": {
            "java": {"status": "ok"},
            "go": {"status": "ok", "client_source": "local source"},
        },
        "runs": RUNS,
    }
    text = markdown(raw, analyse(RUNS))
    assert "Open-loop send latency" in text
    assert "| latency 1024 B, 1,000 msg/s offered | java | 3 | 1,000 | 2.00 [2.00, 2.00]" in text
    ratio = "| latency 1024 B, 10,000 msg/s offered | aio-asyncio | 3 | 4.00 [4.00, 4.00] | 3.00 "
    assert ratio in text
    assert "0.10 / 0.90" in text  # schedule lag
    assert "built from a local source" in text


def test_latency_figure_has_a_panel_per_rate(tmp_path: Path) -> None:
    names = all_plots(tmp_path, RUNS, None)
    assert "latency.png" in names
    assert "latency_cdf.png" in names
    assert (tmp_path / "latency.png").stat().st_size > 10_000
