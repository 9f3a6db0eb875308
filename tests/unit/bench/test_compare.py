"""``make bench-quick``'s comparison with the newest committed run (pure, plus a real git)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from benchmarks.harness.compare import compare_with_committed, moved_cells, report


def run(variant: str, rnd: int, msg_per_s: float, cpu: float, **kw: Any) -> dict[str, Any]:
    """One kept run of the consume 1 KB cell."""
    entry = {
        "ok": True,
        "discarded": False,
        "scenario": "consume",
        "size": 1024,
        "window": None,
        "rate": None,
        "variant": variant,
        "round": rnd,
        "msg_per_s": msg_per_s,
        "cpu_s_per_1e6": cpu,
    }
    entry.update(kw)
    return entry


def test_a_median_outside_the_interval_is_reported_with_its_direction() -> None:
    now = [run("aio", r, v, 6.0 + r / 10) for r, v in enumerate([100, 104, 98, 102], start=1)]
    before = [run("aio", r, 150, 6.1) for r in range(1, 4)]
    moves = moved_cells(now, before)
    assert [(m.metric, m.better) for m in moves] == [("msg/s", False)]
    text = moves[0].line()
    assert "consume 1024 B aio msg/s: 150.0 -> 101.0" in text
    assert "worse" in text


def test_within_the_interval_discarded_failed_and_new_cells_are_quiet() -> None:
    now = [run("aio", r, v, 6.0) for r, v in enumerate([100, 110, 90], start=1)]
    now += [run("java", 1, 40, 20.0), run("go", 1, 1, 1.0, discarded=True)]
    before = [run("aio", 1, 105, 6.0), run("aio", 2, 500, 1.0, ok=False)]
    before += [run("go", 1, 999, 9.0)]
    assert moved_cells(now, before) == []


def test_cpu_going_down_is_better() -> None:
    now = [run("aio", r, 100, c) for r, c in enumerate([4.0, 4.2, 3.9], start=1)]
    before = [run("aio", 1, 100, 6.0)]
    (move,) = moved_cells(now, before)
    assert move.metric == "CPU-s/1e6"
    assert move.better


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def test_the_newest_committed_run_with_the_same_cells_is_used(tmp_path: Path) -> None:
    repo = tmp_path
    results = repo / "benchmarks" / "results"
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.invalid")
    _git(repo, "config", "user.name", "t")

    def commit(name: str, runs: list[dict[str, Any]]) -> Path:
        path = results / name
        path.mkdir(parents=True)
        (path / "raw.json").write_text(json.dumps({"runs": runs}))
        _git(repo, "add", ".")
        _git(repo, "commit", "-q", "-m", name)
        return path

    old = commit("a-old", [run("aio", 1, 50, 6.0)])
    newer = commit("b-newer", [run("aio", 1, 200, 6.0)])
    commit("c-other-cells", [run("aio", 1, 1, 1.0, scenario="produce", window=16)])
    uncommitted = results / "d-uncommitted"
    uncommitted.mkdir()
    (uncommitted / "raw.json").write_text(json.dumps({"runs": [run("aio", 1, 100, 6.0)]}))
    now = {"runs": [run("aio", r, v, 6.0) for r, v in enumerate([100, 101, 99], start=1)]}
    base, moves = compare_with_committed(now, results, repo)
    assert base == newer
    assert [m.before for m in moves] == [200.0]
    assert report(base, moves, repo).startswith("Compared with benchmarks/results/b-newer: 1 ")
    # Excluding the newer one (e.g. it is this very run) falls back to the older.
    base, _ = compare_with_committed(now, results, repo, exclude=newer)
    assert base == old
    assert "No committed run" in report(None, [], repo)
