"""The Spark rows of a result: cold round apart, per-round ratios, the summary section, the
figure (pure, no Spark)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.harness.plots import spark_figure
from benchmarks.harness.spark_report import analyse_spark, spark_markdown


def rec(rnd: int, case: str, variant: str, rows_per_s: float, ok: bool = True) -> dict[str, Any]:
    """One run record as the Spark worker prints it."""
    return {"round": rnd, "case": case, "variant": variant, "rows": 1000, "ok": ok,
            "seconds": 1000 / rows_per_s, "rows_per_s": rows_per_s}  # fmt: skip


RUNS = [
    rec(0, "read", "aio", 10), rec(0, "read", "floor", 100),
    rec(1, "read", "aio", 40), rec(1, "read", "floor", 100),
    rec(2, "read", "aio", 60), rec(2, "read", "floor", 100),
    rec(1, "stream", "aio", 30), rec(1, "stream", "floor", 1.0, ok=False),
    rec(1, "sink", "aio", 70), rec(1, "producer", "aio", 100),
    rec(2, "sink", "aio", 90), rec(2, "producer", "aio", 100),
    {"case": "check", "variant": "aio", "rows": 1000},
]  # fmt: skip
SPARK = {"rows": 1000, "size": 1024, "partitions": 4, "seconds": 5.0, "runs": RUNS}


def test_ratios_are_per_round_with_round_zero_reported_as_cold() -> None:
    result = analyse_spark(SPARK)
    ratios = {r["case"]: r for r in result["ratios"]}
    assert ratios["read"]["cold"] == 0.1
    assert ratios["read"]["rounds"] == [0.4, 0.6]
    assert ratios["read"]["warm"] == 0.5
    assert ratios["read"]["n"] == 2
    assert ratios["sink"]["warm"] == 0.8
    assert ratios["sink"]["cold"] is None
    assert "stream" not in ratios  # its baseline failed: no ratio rather than a wrong one
    assert result["failed_runs"] == 1
    assert result["check_rows"] == 1000
    absolute = {(a["case"], a["variant"]): a for a in result["absolute"]}
    assert absolute[("read", "aio")]["cold"] == 10
    assert absolute[("read", "aio")]["warm"] == 50


def test_summary_section_and_figure(tmp_path: Path) -> None:
    text = "\n".join(spark_markdown(SPARK))
    assert "| batch read: ours / PySpark floor | 2 | 0.50 [" in text
    assert "untimed count: 1000; failed runs: 1" in text
    assert spark_markdown(None) == []
    assert spark_figure(tmp_path, SPARK) == "spark.png"
    assert (tmp_path / "spark.png").stat().st_size > 0
    assert spark_figure(tmp_path, None) is None
