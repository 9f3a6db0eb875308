"""What OpenTelemetry costs a producer: produce with telemetry off and on, interleaved.

``python -m benchmarks.otel_cost [--rounds 5] [--messages 20000] [--window 256]`` starts a local
cluster (one broker), then runs the closed-loop produce worker of the harness alternately with
``--otel off`` and ``--otel sdk`` (the OpenTelemetry SDK recording every span and metric, spans
batched to an exporter that drops them). The first round of each is discarded as warm-up. It
prints, and writes as JSON next to the other results, the client CPU seconds per 10⁶ messages and
the throughput of each, and their ratios (medians of per-round ratios).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from datetime import date
from pathlib import Path
from typing import Any

from benchmarks.harness.proc import option_args
from tubemq_aio.testing import LocalCluster

RESULTS = Path(__file__).resolve().parent / "results"


async def _worker(master: str, topic: str, otel: str, ns: argparse.Namespace) -> dict[str, Any]:
    options = option_args(
        ("--master", master),
        ("--topic", topic),
        ("--count", ns.messages),
        ("--size", ns.size),
        ("--concurrency", ns.window),
        ("--otel", otel),
        ("--warmup-seconds", 1),
    )
    argv = [sys.executable, "-m", "benchmarks.harness.aio_worker", "produce", *options]
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(proc.communicate(), 600)
    if proc.returncode != 0:
        raise RuntimeError(f"worker --otel {otel} exited {proc.returncode}")
    record: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return record


async def run(ns: argparse.Namespace) -> dict[str, Any]:
    """Start the cluster, run the interleaved rounds, return the summary."""
    rows: dict[str, list[dict[str, Any]]] = {"off": [], "sdk": []}
    async with LocalCluster(brokers=1) as cluster:
        topic = "otel_cost"
        await cluster.create_topic(topic, 3)
        for rnd in range(ns.rounds + 1):
            for otel in ("off", "sdk") if rnd % 2 == 0 else ("sdk", "off"):
                record = await _worker(cluster.master_addr, topic, otel, ns)
                if rnd > 0:
                    rows[otel].append(record)
                print(
                    f"round {rnd} otel={otel}: {record['messages'] / record['seconds']:.0f} "
                    f"msg/s, {record['cpu_seconds']:.2f} CPU-s",
                    flush=True,
                )

    def cpu_per_million(r: dict[str, Any]) -> float:
        return float(r["cpu_seconds"]) / float(r["messages"]) * 1e6

    def rate(r: dict[str, Any]) -> float:
        return float(r["messages"]) / float(r["seconds"])

    pairs = list(zip(rows["off"], rows["sdk"], strict=True))
    return {
        "date": date.today().isoformat(),
        "messages": ns.messages,
        "size": ns.size,
        "window": ns.window,
        "rounds": ns.rounds,
        "cpu_s_per_million": {
            k: statistics.median(map(cpu_per_million, v)) for k, v in rows.items()
        },
        "msg_per_s": {k: statistics.median(map(rate, v)) for k, v in rows.items()},
        "cpu_ratio_sdk_over_off": statistics.median(
            cpu_per_million(s) / cpu_per_million(o) for o, s in pairs
        ),
        "throughput_ratio_sdk_over_off": statistics.median(rate(s) / rate(o) for o, s in pairs),
    }


def main(argv: list[str] | None = None) -> int:
    """Parse the options, run, print and store the summary."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.otel_cost", description=__doc__)
    parser.add_argument("--rounds", type=int, default=5, help="measured rounds per setting")
    parser.add_argument("--messages", type=int, default=20_000, help="messages per run")
    parser.add_argument("--size", type=int, default=1024, help="body bytes")
    parser.add_argument("--window", type=int, default=256, help="concurrent sends")
    ns = parser.parse_args(argv)
    summary = asyncio.run(run(ns))
    text = json.dumps(summary, indent=2)
    print(text)
    out = RESULTS / f"{summary['date']}-otel-cost.json"
    out.write_text(text + "\n")
    print(f"written to {out.relative_to(RESULTS.parent.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
