"""The Spark rows of a result: cold round apart, per-round ratios, the summary section, the
figure (pure, no Spark)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.harness.plots import spark_figure
from benchmarks.harness.spark_report import analyse_spark, spark_markdown


def rec(rnd: int, case: str, variant: str, rows_per_s: float, ok: bool = True) -> dict[str, Any]:
    """One run record as the Spark worker prints it."""
    return {
        "round": rnd,
        "case": case,
        "variant": variant,
        "rows": 1000,
        "ok": ok,
        "seconds": 1000 / rows_per_s,
        "rows_per_s": rows_per_s,
    }


RUNS = [
    rec(0, "read", "aio", 10),
    rec(0, "read", "floor", 100),
    rec(1, "read", "aio", 40),
    rec(1, "read", "floor", 100),
    rec(2, "read", "aio", 60),
    rec(2, "read", "floor", 100),
    rec(1, "stream", "aio", 30),
    rec(1, "stream", "floor", 1.0, ok=False),
    rec(1, "sink", "aio", 70),
    rec(1, "producer", "aio", 100),
    rec(2, "sink", "aio", 90),
    rec(2, "producer", "aio", 100),
    {"case": "check", "variant": "aio", "rows": 1000},
]
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


def test_client_alone_sink_floor_and_cpu_per_row() -> None:
    runs = [
        {**rec(1, "read", "aio", 40), "cpu_seconds": 0.006, "server_cpu_seconds": 0.004},
        {**rec(1, "read", "client", 80), "cpu_seconds": 0.003, "server_cpu_seconds": 0.004},
        {**rec(1, "read", "floor", 100), "cpu_seconds": 0.004, "server_cpu_seconds": 0.0},
        {**rec(1, "sink", "aio", 30), "cpu_seconds": 0.05},
        {**rec(1, "sink", "floor", 120), "cpu_seconds": 0.02},
        {**rec(1, "producer", "aio", 60), "cpu_seconds": 0.02},
    ]
    result = analyse_spark({**SPARK, "runs": runs})
    ratios = {r["label"]: r["warm"] for r in result["ratios"]}
    assert ratios["batch read: ours / our client alone, no Spark"] == 0.5
    assert ratios["our client alone, no Spark / PySpark floor"] == 0.8
    assert ratios["sink floor (Spark drops the rows) / our producer alone"] == 2.0
    assert ratios["sink / sink floor"] == 0.25
    assert ratios["sink / our producer alone"] == 0.5
    absolute = {(a["case"], a["variant"]): a for a in result["absolute"]}
    assert absolute[("read", "aio")]["cpu_per_1e6"] == 6.0  # 0.006 s over 1 000 rows
    assert absolute[("read", "aio")]["server_cpu_per_1e6"] == 4.0
    assert absolute[("sink", "aio")]["server_cpu_per_1e6"] is None  # not measured
    text = "\n".join(spark_markdown({**SPARK, "runs": runs}))
    assert "| read | client | 1 | 80 | – | 3.0 | 4.0 |" in text


def test_run_plan_pairs_each_case_with_its_baselines() -> None:
    from benchmarks.harness.spark_worker import run_plan

    plan = run_plan(["read", "stream", "sink"], ["aio", "floor", "client"])
    assert plan == [
        ("read", "aio"),
        ("read", "floor"),
        ("read", "client"),
        ("stream", "aio"),
        ("stream", "floor"),
        ("sink", "aio"),
        ("sink", "floor"),
        ("producer", "aio"),
    ]
    assert run_plan(["sink"], ["aio"]) == [("sink", "aio"), ("producer", "aio")]


def test_tree_cpu_keeps_the_time_of_children_that_ended() -> None:
    import subprocess
    import sys

    from benchmarks.harness.spark_worker import tree_cpu

    before = tree_cpu()
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass",
        ]
    )
    child.wait(timeout=60)
    after = tree_cpu()
    assert after - before >= 0.25  # the ended child's CPU, counted through its reaper (us)


def test_sink_floor_counts_and_drops_what_it_is_handed() -> None:
    from benchmarks.harness.spark_floor import FloorCommit, count_rows, prepared_batch

    batch = prepared_batch(7, 16)
    assert batch.num_rows == 7
    assert batch.column("body")[0].as_py() == b"x" * 16
    assert count_rows(iter([batch, batch.slice(0, 3)])) == FloorCommit(10)
    assert count_rows(iter([])) == FloorCommit(0)
