"""How long a benchmark configuration takes, before it runs (printed at the start of a run and
by ``python -m benchmarks --estimate``).

The model adds up, per round, every run of every cell: the client's start-up and connect time,
its warm-up, and its measured phase (messages / the client's usual rate), plus the one-off costs
(cluster and topics, pre-fill, floor, Spark). The rates and per-run overheads are the medians of
the interleaved quick runs of 2026-11-22 on a nearly idle machine (``benchmarks/results/
2026-11-22-b52690b-dirty`` at 1 KB, ``2026-11-22-63f95a3-produce-sizes`` at 100 B and 10 KB).
The Go producer at W = 1 was never measured: its rate is assumed (1 500 msg/s, 30 % of its
W = 16 rate; the Java client's W = 1 rate is 26 % of its W = 16 rate). On a loaded machine
runs take 2-5 times as long; read the figure as a lower bound.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.harness.config import BenchConfig
from benchmarks.harness.plan import cells, variants

#: Closed-loop produce rate (msg/s) by client and window at <= 1 KB (10 KB: ``_PRODUCE_10K``).
_PRODUCE = {
    "aio": {1: 4_500, 16: 35_000, 256: 50_000},
    "java": {1: 5_000, 16: 19_000, 256: 25_000},
    "go": {1: 1_500, 16: 5_000, 256: 4_800},
}
_PRODUCE_10K = {
    "aio": {1: 4_000, 16: 15_000, 256: 16_000},
    "java": {1: 4_500, 16: 11_000, 256: 14_500},
    "go": {1: 1_200, 16: 3_000, 256: 3_000},
}
#: Consume rate (msg/s) by client.
_CONSUME = {"aio": 140_000, "java": 36_000, "go": 110_000}
#: Seconds per run outside the warm-up and the measured phase (process start, connect, ready).
_OVERHEAD = {
    "produce": {"aio": 0.5, "java": 2.0, "go": 1.0},
    "consume": {"aio": 2.5, "java": 4.5, "go": 5.0},
    "latency": {"aio": 1.0, "java": 2.5, "go": 1.5},
    "e2e": {"aio": 4.5, "java": 6.5, "go": 6.5},
}
#: Cluster start, topic creation and the final report.
_SETUP_SECONDS = 120.0
#: The client-side floor (codec and transport micro benchmarks).
_FLOOR_SECONDS = 90.0
#: Spark rows: session start plus, per round and 10**6 rows, read (ours, floor, our client
#: alone) + stream (ours, floor) + sink (ours, floor) + producer.
_SPARK_START_SECONDS = 60.0
_SPARK_ROUND_SECONDS_PER_1E6 = 150.0


@dataclass(frozen=True)
class Estimate:
    """Seconds a configuration is expected to take, in total and by part."""

    runs: int
    parts: dict[str, float]

    @property
    def seconds(self) -> float:
        """The whole run."""
        return sum(self.parts.values())

    def line(self) -> str:
        """``≈ 5.9 h for 1 458 client runs (produce 4.1 h, consume ...)`` for the log."""
        parts = ", ".join(f"{name} {_human(s)}" for name, s in self.parts.items() if s >= 1)
        return (
            f"estimated duration ≈ {_human(self.seconds)} for {self.runs} client runs "
            f"({parts}) on a quiet machine; 2-5× that when the machine is loaded"
        )


def _human(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def _produce_rate(client: str, size: int, window: int) -> float:
    table = _PRODUCE_10K if size >= 10240 else _PRODUCE
    by_window = table[client]
    nearest = min(by_window, key=lambda w: abs(w - window))
    return by_window[nearest]


def estimate(cfg: BenchConfig, java_ok: bool = True, go_ok: bool = False) -> Estimate:
    """Expected duration of ``cfg`` with the peers that can run (``java_ok``, ``go_ok``)."""
    parts = {"set-up": _SETUP_SECONDS, "produce": 0.0, "consume": 0.0, "latency": 0.0, "e2e": 0.0}
    runs = 0
    for cell in cells(cfg):
        for v in variants(cfg, cell.scenario, java_ok, go_ok):
            runs += cfg.rounds
            overhead = _OVERHEAD[cell.scenario][v.client]
            count = cfg.count_for(cell.size, cell.scenario, cell.window)
            if cell.scenario == "produce":
                rate = _produce_rate(v.client, cell.size, cell.window or 1)
                one = overhead + cfg.warmup_for(v.client) + count / rate
            elif cell.scenario == "consume":
                one = overhead + count / _CONSUME[v.client]
            elif cell.scenario == "latency":
                one = overhead + cfg.latency_warmup_seconds + cfg.latency_seconds
            else:
                one = overhead + cfg.e2e_warmup_seconds + cfg.e2e_seconds
            parts[cell.scenario] += one * cfg.rounds
    if "consume" in cfg.scenarios:
        parts["pre-fill"] = sum(
            1.1 * cfg.count_for(s) / _produce_rate("aio", s, 256) for s in cfg.sizes
        )
    if cfg.floor:
        parts["floor"] = _FLOOR_SECONDS
    if "spark" in cfg.scenarios:
        per_round = _SPARK_ROUND_SECONDS_PER_1E6 * cfg.spark_rows / 1e6
        fill = cfg.spark_rows / _produce_rate("aio", 1024, 256)
        parts["spark"] = _SPARK_START_SECONDS + fill + per_round * cfg.rounds
    return Estimate(runs, parts)
