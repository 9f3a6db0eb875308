"""Figures: a cell whose runs had errors (an overloaded client) does not set the scale and is
not compared against (pure, matplotlib objects, no pixels)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.harness.plots import _pyplot, _scenario_panel, main, overloaded


def run(variant: str, rnd: int, p50: float, errors: int = 0) -> dict[str, Any]:
    """One kept e2e run record of the 1 KB, 10 000 msg/s cell."""
    return {
        "round": rnd,
        "scenario": "e2e",
        "size": 1024,
        "window": None,
        "rate": 10_000,
        "variant": variant,
        "ok": True,
        "discarded": False,
        "errors": errors,
        "latency_p50_ms": p50,
        "peer": {},
    }


RUNS = [
    *(run("aio-asyncio", r, 2.0 + r) for r in (1, 2, 3)),
    *(run("java", r, 16_000.0, errors=(0, 5_000, 7_000)[r - 1]) for r in (1, 2, 3)),
]


def texts(ax: Any) -> list[str]:
    return [t.get_text() for t in ax.texts]


def test_a_cell_with_errors_in_any_run_is_flagged() -> None:
    flags = overloaded(RUNS)
    assert set(flags) == {("java", "1 KB\n10,000/s")}
    assert flags[("java", "1 KB\n10,000/s")] == "errors in 2/3 runs (≤ 7,000)"
    assert overloaded([run("java", 1, 3.0)]) == {}


def test_the_flagged_bar_neither_scales_the_axis_nor_gets_a_ratio() -> None:
    plt = _pyplot()
    fig, ax = plt.subplots()
    try:
        _scenario_panel(ax, RUNS, "latency_p50_ms", "p50", "e2e")
        low, high = ax.get_ylim()
        assert low == 0
        assert high < 20  # set by our 3-5 ms bars, not by the 16 000 ms one
        written = texts(ax)
        assert any(t.startswith("↑16,000\nerrors in 2/3 runs") for t in written)
        assert not any("×J" in t for t in written)  # no ratio against an overloaded peer
        assert "overloaded" in ax.get_xlabel()
    finally:
        plt.close(fig)


def test_without_errors_the_peer_scales_and_is_compared() -> None:
    runs = [
        *(run("aio-asyncio", r, 2.0) for r in (1, 2, 3)),
        *(run("java", r, 4.0) for r in (1, 2, 3)),
    ]
    plt = _pyplot()
    fig, ax = plt.subplots()
    try:
        _scenario_panel(ax, runs, "latency_p50_ms", "p50", "e2e")
        assert any("0.5×J" in t for t in texts(ax))
        assert ax.get_ylim()[1] > 4.0
        assert ax.get_xlabel() == ""
    finally:
        plt.close(fig)


def test_figures_are_drawn_again_from_raw_json(tmp_path: Path) -> None:
    import json

    (tmp_path / "raw.json").write_text(json.dumps({"runs": RUNS, "spark": None}))
    assert main([str(tmp_path), "--out", str(tmp_path / "png")]) == 0
    assert (tmp_path / "png" / "latency.png").stat().st_size > 0
