"""``main`` of ``python -m benchmarks``: parse options, run, print where the results are."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from benchmarks.harness.config import parse_args
from benchmarks.harness.estimate import estimate
from benchmarks.harness.session import log, run_bench


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark described by ``argv``; return the process exit code."""
    cfg = parse_args(argv)
    if cfg.estimate_only:
        clients = set(cfg.clients)
        print(estimate(cfg, java_ok="java" in clients, go_ok="go" in clients).line())
        return 0
    try:
        out = asyncio.run(run_bench(cfg))
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    print(out / "summary.md")
    return 0
