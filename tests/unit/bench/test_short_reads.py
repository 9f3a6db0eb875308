"""A consume run that read fewer messages than asked is not a consume measurement."""

from __future__ import annotations

from typing import Any

from benchmarks.harness.report import analyse, mark_short_reads


def _run(rnd: int, variant: str, read: int, requested: int | None) -> dict[str, Any]:
    run: dict[str, Any] = {
        "round": rnd,
        "discarded": False,
        "scenario": "consume",
        "size": 1024,
        "window": None,
        "rate": None,
        "variant": variant,
        "client": variant,
        "ok": True,
        "error": None,
        "peer": {"messages": read},
        "msg_per_s": 1000.0,
        "cpu_s_per_1e6": 5.0,
        "errors": 0,
    }
    if requested is not None:
        run["requested"] = requested
    return run


def test_short_consume_runs_fail_with_the_reason_and_leave_the_cell() -> None:
    runs = [
        _run(1, "aio-asyncio-batch", 300_000, 300_000),
        _run(1, "java", 300_000, 300_000),
        _run(2, "aio-asyncio-batch", 65_936, 300_000),
        _run(2, "java", 65_936, 300_000),
    ]
    assert mark_short_reads(runs, {}) == 2
    assert [r["ok"] for r in runs] == [True, True, False, False]
    assert runs[2]["error"].startswith("read 65936 of 300000 messages")
    summary = analyse(runs)
    assert summary["failed_runs"] == 2
    (cell,) = summary["cells"]
    assert cell["absolute"]["java"]["n"] == 1


def test_older_runs_take_the_count_from_the_configuration() -> None:
    nested = {"messages": {"1024": {"produce W=1": 20_000, "consume": 300_000}}}
    flat = {"messages": {"1024": 20_000}}
    short = [_run(1, "java", 580, None)]
    assert mark_short_reads(short, nested) == 1
    full = [_run(1, "java", 20_000, None)]
    assert mark_short_reads(full, flat) == 0
    assert full[0]["ok"]


def test_other_scenarios_and_failed_runs_are_left_alone() -> None:
    produce = _run(1, "java", 10, 300_000) | {"scenario": "produce"}
    failed = _run(1, "go", 0, 300_000) | {"ok": False, "error": "boom"}
    assert mark_short_reads([produce, failed], {}) == 0
    assert produce["ok"]
    assert failed["error"] == "boom"
