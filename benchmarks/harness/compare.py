"""Compare a run's medians with the newest committed run of the same cells (a report only).

A cell (scenario, size, W, rate) × variant has *moved* on a metric when the earlier run's
median lies outside this run's bootstrap 95 % interval of the median. ``make bench-quick``
prints the moved cells at the end; nothing here ever fails a run.
"""

from __future__ import annotations

import json
import subprocess
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.harness.stats import bootstrap_ci, median

#: Metrics compared, with a short name and whether higher is better.
METRICS = (("msg_per_s", "msg/s", True), ("cpu_s_per_1e6", "CPU-s/1e6", False))

CellKey = tuple[str, int, int | None, int | None, str]


@dataclass(frozen=True)
class Move:
    """One cell whose median moved out of this run's interval."""

    cell: CellKey
    metric: str
    before: float
    now: float
    ci: tuple[float, float]
    better: bool

    def line(self) -> str:
        """``consume 1024 B aio-asyncio-batch msg/s: 155,700 -> 120,000 (-23 %, CI ...)``."""
        scenario, size, window, rate, variant = self.cell
        where = f"{scenario} {size} B" + (f" W={window}" if window is not None else "")
        where += f" {rate}/s" if rate is not None else ""
        change = (self.now / self.before - 1) * 100 if self.before else float("inf")
        verdict = "better" if self.better else "worse"
        return (
            f"{where} {variant} {self.metric}: {self.before:,.1f} -> {self.now:,.1f} "
            f"({change:+.0f} %, {verdict}; this run's 95 % CI [{self.ci[0]:,.1f}, "
            f"{self.ci[1]:,.1f}])"
        )


def _values(runs: Sequence[dict[str, Any]]) -> dict[CellKey, dict[str, list[float]]]:
    out: dict[CellKey, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in runs:
        if not r.get("ok") or r.get("discarded"):
            continue
        key = (r["scenario"], r["size"], r.get("window"), r.get("rate"), r["variant"])
        for metric, _, _ in METRICS:
            if r.get(metric) is not None:
                out[key][metric].append(float(r[metric]))
    return out


def moved_cells(now: Sequence[dict[str, Any]], before: Sequence[dict[str, Any]]) -> list[Move]:
    """The (cell, metric) pairs of ``now`` whose median in ``before`` lies outside ``now``'s
    bootstrap 95 % interval of the median (cells only in one of the runs are skipped)."""
    cur, old = _values(now), _values(before)
    moves = []
    for key in sorted(set(cur) & set(old), key=str):
        for metric, name, higher_better in METRICS:
            xs, ys = cur[key].get(metric, []), old[key].get(metric, [])
            ci = bootstrap_ci(xs)
            m_now, m_before = median(xs), median(ys)
            if ci is None or m_now is None or m_before is None:
                continue
            if ci[0] <= m_before <= ci[1]:
                continue
            better = (m_now > m_before) == higher_better
            moves.append(Move(key, name, m_before, m_now, ci, better))
    return moves


def committed_runs(results: Path, repo: Path) -> list[Path]:
    """``raw.json`` files of result directories committed to git, newest first (by the
    commit that added them)."""
    try:
        relative = str(results.relative_to(repo))
        out = subprocess.run(
            ["git", "log", "--format=", "--name-only", "--diff-filter=A", "--", relative],
            capture_output=True,
            text=True,
            check=True,
            cwd=repo,
            timeout=60,
        ).stdout
    except (subprocess.SubprocessError, OSError, ValueError):
        return []
    seen: list[Path] = []
    for line in out.splitlines():  # git log lists the newest commit first
        if line.endswith("/raw.json") and (repo / line).is_file() and repo / line not in seen:
            seen.append(repo / line)
    return seen


def compare_with_committed(
    raw: dict[str, Any], results: Path, repo: Path, exclude: Path | None = None
) -> tuple[Path | None, list[Move]]:
    """This run against the newest committed run sharing at least one cell with it."""
    cells = set(_values(raw["runs"]))
    for path in committed_runs(results, repo):
        if exclude is not None and path.parent == exclude:
            continue
        try:
            earlier = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if cells & set(_values(earlier.get("runs", []))):
            return path.parent, moved_cells(raw["runs"], earlier["runs"])
    return None, []


def report(base: Path | None, moves: list[Move], repo: Path) -> str:
    """The text printed after a quick run."""
    if base is None:
        return "No committed run with the same cells to compare with."
    where = base.relative_to(repo) if base.is_relative_to(repo) else base
    head = f"Compared with {where}: "
    if not moves:
        return head + "no cell moved out of this run's 95 % interval."
    lines = [head + f"{len(moves)} cell(s) moved out of this run's 95 % interval:"]
    lines += [f"  {m.line()}" for m in moves]
    return "\n".join(lines)
