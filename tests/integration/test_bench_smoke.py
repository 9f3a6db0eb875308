"""Smoke test of the benchmark harness (``python -m benchmarks``) on the session cluster.

One tiny round (2 000 messages, no warm-up, not pinned) of every client: tubemq-aio produce +
consume (``async for`` and ``getmany``), open-loop send latency (2 s at 500 msg/s) and
end-to-end latency (producer and tailing consumer, 2 s at 500 msg/s) in its own process, and the
Java peer produce + consume + latency + e2e. It checks that
the result files exist and hold numbers for each client; it makes no
timing assertions (the machine is shared).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.harness.config import BenchConfig
from benchmarks.harness.plan import TopicPlan
from benchmarks.harness.session import run_bench
from tubemq_aio.testing import LocalCluster

EXPECTED = {
    ("produce", "aio-asyncio"),
    ("produce", "java"),
    ("consume", "aio-asyncio-iter"),
    ("consume", "aio-asyncio-batch"),
    ("consume", "java"),
    ("latency", "aio-asyncio"),
    ("latency", "java"),
    ("e2e", "aio-asyncio"),
    ("e2e", "java"),
}


# Nine client processes (two JVMs cold-starting each) on a shared two-core machine.
@pytest.mark.timeout(600)
async def test_one_tiny_round_per_client_writes_numbers(
    cluster: LocalCluster, topic: str, tmp_path: Path
) -> None:
    cfg = BenchConfig(
        sizes=[1024],
        windows=[16],
        rounds=1,
        discard_first=False,
        messages=2000,
        warmup_seconds=0.0,
        java_warmup_seconds=0.0,
        loops=["asyncio"],
        clients=["aio", "java", "go"],
        scenarios=["produce", "consume", "latency", "e2e"],
        rates=[500],
        latency_seconds=2.0,
        latency_warmup_seconds=0.5,
        e2e_rates=[500],
        e2e_seconds=2.0,
        e2e_warmup_seconds=0.5,
        out=tmp_path,
        pin=False,
        floor=False,
        run_timeout=120.0,
    )
    plan = TopicPlan.single(topic, ["aio-asyncio", "java", "go"], [1024])
    out = await run_bench(cfg, cluster=cluster, topics=plan)

    raw = json.loads((out / "raw.json").read_text())
    summary = (out / "summary.md").read_text()
    runs = {(r["scenario"], r["variant"]): r for r in raw["runs"]}
    go_status = raw["peers"]["go"]["status"]
    # The module proxy refuses the Go client module; with a local copy of it the peer runs.
    go_ok = go_status == "ok"
    if not go_ok:
        assert go_status.startswith("blocked: the Go module proxy does not serve"), go_status
    assert set(runs) == EXPECTED | ({("produce", "go"), ("consume", "go")} if go_ok else set())
    for key, run in runs.items():
        assert run["ok"], (key, run["error"], run["peer"])
        if key[0] == "latency":
            # every send of the measured 2 s at 500 msg/s was answered, timed from its due time
            assert run["peer"]["messages"] == 1000, (key, run["peer"])
            latency = run["peer"]["latency"]
            assert latency["count"] == 1000, latency
            assert 0 < latency["p50_ms"] <= latency["p99_ms"] <= latency["max_ms"], latency
            assert run["peer"]["schedule_lag"]["count"] == 1000, run["peer"]
            assert run["latency_p50_ms"] == latency["p50_ms"], run
            continue
        if key[0] == "e2e":
            # every message sent in the measured 2 s at 500 msg/s reached the consumer once
            assert run["peer"]["messages"] == 1000, (key, run["peer"])
            assert run["peer"]["missing"] == 0, (key, run["peer"])
            latency = run["peer"]["latency"]
            assert latency["count"] == 1000, latency
            assert 0 < latency["p50_ms"] <= latency["p99_ms"] <= latency["max_ms"], latency
            assert run["latency_p99_ms"] == latency["p99_ms"], run
            continue
        assert run["peer"]["messages"] >= 2000, key
        for field in ("msg_per_s", "cpu_s_per_1e6", "peak_rss_mb"):
            assert isinstance(run[field], int | float), (key, field)
            assert run[field] > 0, (key, field, run[field])
        assert isinstance(run.get("broker_cpu_s"), int | float), key
    for cell in raw["summary"]["cells"]:
        for variant, ratio in cell["ratios"].items():
            assert isinstance(ratio["throughput"], float), (cell["scenario"], variant)
            assert isinstance(ratio["cpu"], float), (cell["scenario"], variant)
        for variant, ratio in cell["ratios_go"].items():
            assert go_ok
            assert isinstance(ratio["throughput"], float), (cell["scenario"], variant)
    assert raw["env"]["python"]
    assert raw["env"]["git_revision"]
    assert "End-to-end latency" in summary
    assert "Open-loop send latency" in summary
    (latency_cell,) = [c for c in raw["summary"]["cells"] if c["scenario"] == "latency"]
    assert isinstance(latency_cell["ratios"]["aio-asyncio"]["p99"], float), latency_cell
    for name in ("aio-asyncio", "aio-asyncio-iter", "aio-asyncio-batch", "java"):
        assert name in summary
    assert ("Ratios tubemq-aio / Go" in summary) == go_ok
