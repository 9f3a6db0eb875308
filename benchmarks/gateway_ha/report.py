"""Figures of the HA run: counts, and fetch latency percentiles between the kills."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from benchmarks.gateway_ha.traffic import Traffic


def p99(samples: Sequence[float]) -> float | None:
    """The 99th percentile (nearest rank) in milliseconds, None without samples."""
    if not samples:
        return None
    ordered = sorted(samples)
    return 1000 * ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


def windows(
    traffic: Traffic, began: float, events: Sequence[tuple[str, float, float]], ended: float
) -> list[dict[str, Any]]:
    """p99 of the fetches that returned a batch in each window: before the first event,
    during each event (from the kill to its recovery) and after it (until the next event or
    the end)."""
    edges: list[tuple[str, float, float]] = []
    at = began
    before = ""
    for name, start, recovered in events:
        edges.append((f"{before}before {name}", at, start))
        edges.append((f"during {name}", start, recovered))
        at, before = recovered, f"after {name}, "
    edges.append((before.rstrip(", ") or "whole run", at, ended))
    out = []
    for label, low, high in edges:
        inside = [s for t, s in traffic.fetches if low <= t < high]
        out.append(
            {
                "window": label,
                "seconds": round(high - low, 1),
                "fetches": len(inside),
                "p99_ms": None if (v := p99(inside)) is None else round(v, 1),
            }
        )
    return out


def markdown(result: dict[str, Any]) -> str:
    """The summary table of one run."""
    c = result["counts"]
    lines = [
        f"# Gateway HA run ({result['seconds']} s of load, {result['replicas']} replicas, "
        f"{result['consumers']} consumers, Redis {result['redis']}, "
        f"TubeMQ {result.get('tubemq', 'FakeCluster')})",
        "",
        "| produced | delivered (unique) | acked | duplicated | skipped | redelivered batches |",
        "|---:|---:|---:|---:|---:|---:|",
        f"| {c['produced']} | {c['delivered_unique']} | {c['acked_messages']} | "
        f"{c['duplicated']} | {c['skipped']} | {c['redelivered_batches']} |",
        "",
        "| window | seconds | fetches | fetch p99 (ms) |",
        "|---|---:|---:|---:|",
    ]
    for w in result["windows"]:
        lines.append(f"| {w['window']} | {w['seconds']} | {w['fetches']} | {w['p99_ms']} |")
    lines += [
        "",
        "Answers other than 200: "
        + (", ".join(f"{k}: {v}" for k, v in sorted(result["answers"].items())) or "none"),
    ]
    kills = ", ".join(
        f"{e} after {at:.1f} s (its window: {back:.1f} s)" for e, at, back in result["events"]
    )
    lines.append(f"Kills: {kills}")
    lines.append(
        "A replica kill's window is the lease its leased batches wait out; a Redis kill's "
        "lasts until a fetch answered a batch again after the failover."
    )
    lines.append(
        f"Load average (1, 5, 15 min) at start {result['load_start']}, at end {result['load_end']}"
    )
    return "\n".join(lines)
