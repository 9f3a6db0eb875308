"""Orchestration of ``make bench-gateway``: one cluster, one Redis, one replica; interleaved rounds.

Each round measures, back to back and in alternating order: wrk against the produce route and
against ``POST /v1/noop`` (same uvicorn, same auth and body parsing, no send: the framework
floor); batch produce through HTTP against the SDK's own ``send``; consume through fetch → ack
against the SDK's client-balanced consumer; and the broker RPCs / Redis round trips per fetch
read from ``/metrics``. Ratios are taken per round; the report gives medians with bootstrap
intervals. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from benchmarks.gateway import measure
from benchmarks.harness.env import collect
from benchmarks.harness.stats import bootstrap_ci, median
from tubemq_aio import Producer
from tubemq_aio.testing import LocalCluster, RedisServer
from tubemq_aio.testing.gateway import GatewayReplica

KEY = "bench-key-123"
#: ``max_messages`` of the gathering consume run (the other run leaves the gateway's default).
GATHER = 5000
T_PRODUCE, T_CONSUME, GROUP = "gwb_produce", "gwb_consume", "gwb_group"
RESULTS = Path(__file__).resolve().parents[1] / "results"


def _config(path: Path, masters: str, redis_url: str) -> Path:
    path.write_text(
        f'masters = "{masters}"\nredis = "{redis_url}"\nsecret = "bench-secret-0123456789"\n'
        f'produce_topics = ["{T_PRODUCE}", "{T_CONSUME}"]\nnoop_route = true\n'
        f'[[groups]]\nname = "{GROUP}"\ntopics = ["{T_CONSUME}"]\nlease_ms = 30000\n'
        f'[[keys]]\nkey = "{KEY}"\nscopes = ["produce:*", "consume:*", "admin:*"]\n'
    )
    return path


async def _engine_stats(url: str) -> dict[str, float]:
    async with httpx.AsyncClient(timeout=10) as client:
        text = (await client.get(f"{url}/metrics")).text
    return {
        m.group(1): float(m.group(2))
        for m in re.finditer(r"^tubemq_gateway_engine_(\w+) ([\d.e+]+)$", text, re.M)
    }


async def _reset(url: str) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        r = await client.post(
            f"{url}/v1/groups/{GROUP}/offsets/reset", json={"to": "earliest"},
            headers={"Authorization": f"Bearer {KEY}"},
        )  # fmt: skip
        r.raise_for_status()


async def _round(
    n: int, gw: GatewayReplica, masters: str, seconds: int, count: int
) -> dict[str, Any]:
    out: dict[str, Any] = {"round": n}
    pid = gw.pid
    assert pid is not None
    targets = [
        ("noop", f"{gw.url}/v1/noop"),
        ("produce", f"{gw.url}/v1/topics/{T_PRODUCE}/messages"),
    ]
    for name, url in targets if n % 2 == 0 else targets[::-1]:
        cpu0 = measure.cpu_seconds(pid)
        result = await measure.wrk(url, KEY, seconds)
        out[f"wrk_{name}"] = vars(result)
        requests = result.rps * seconds
        out[f"wrk_{name}"]["cpu_s_per_1e6"] = (measure.cpu_seconds(pid) - cpu0) / requests * 1e6
    pair: list[tuple[str, Callable[[], Awaitable[float]]]] = [
        ("http_batch", lambda: measure.http_batch_produce(gw.url, KEY, T_PRODUCE, seconds)),
        ("sdk_send", lambda: measure.sdk_send(masters, T_PRODUCE, seconds)),
    ]
    for name, run in pair if n % 2 == 0 else pair[::-1]:
        out[name] = await run()

    async def sdk() -> dict[str, Any]:
        return {"sdk_consume": await measure.sdk_consume(masters, T_CONSUME, f"gwb_sdk_{n}", count)}

    consumes: list[Callable[[], Awaitable[dict[str, Any]]]] = [
        lambda: _consume(gw, pid, count, "http_consume", None),
        lambda: _consume(gw, pid, count, "http_consume_gather", GATHER),
        sdk,
    ]
    for consume in consumes if n % 2 == 0 else consumes[::-1]:
        out.update(await consume())
    return out


async def _consume(
    gw: GatewayReplica, pid: int, count: int, name: str, max_messages: int | None
) -> dict[str, Any]:
    """One fetch → ack run from the start of the topic, with its cost read from ``/metrics``."""
    await _reset(gw.url)
    before, cpu0 = await _engine_stats(gw.url), measure.cpu_seconds(pid)
    rate = await measure.http_consume(gw.url, KEY, GROUP, count, max_messages=max_messages)
    cpu = measure.cpu_seconds(pid) - cpu0
    after = await _engine_stats(gw.url)
    delta = {k: after[k] - before.get(k, 0.0) for k in after}
    fetches = max(1.0, delta.get("fetches_ok", 0.0))
    batches = max(1.0, delta.get("broker_batches", 0.0))
    acks = max(1.0, delta.get("acks", 0.0))
    return {
        name: rate,
        f"{name}_cost": {
            # the attempt that returned the batch (the per-fetch goal: 2 RPCs, <= 3 Redis)
            "broker_rpcs": delta.get("ok_broker_rpcs", 0.0) / fetches,
            "redis_roundtrips": delta.get("ok_redis_roundtrips", 0.0) / fetches,
            # everything the fetch path spent (empty scans and retries included), per batch
            "broker_rpcs_all": delta.get("broker_rpcs", 0.0) / fetches,
            "redis_roundtrips_all": delta.get("fetch_redis_roundtrips", 0.0) / fetches,
            "broker_batches": batches / fetches,
            "broker_rpcs_per_batch": delta.get("ok_broker_rpcs", 0.0) / batches,
            "messages": delta.get("messages", 0.0) / fetches,
            "fetches_not_ok": delta.get("fetches", 0.0) - delta.get("fetches_ok", 0.0),
            "redis_per_ack": (
                delta.get("redis_roundtrips", 0.0) - delta.get("fetch_redis_roundtrips", 0.0)
            ) / acks,
            "cpu_s_per_1e6_msgs": cpu / max(1.0, delta.get("messages", 1.0)) * 1e6,
        },
    }  # fmt: skip


def _summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    def stat(values: Sequence[float]) -> dict[str, Any]:
        ci = bootstrap_ci(values)
        return {"median": median(values), "ci95": list(ci) if ci else None, "n": len(values)}

    out = {
        "produce_rps": stat([r["wrk_produce"]["rps"] for r in rounds]),
        "noop_rps": stat([r["wrk_noop"]["rps"] for r in rounds]),
        "produce_vs_floor": stat([r["wrk_produce"]["rps"] / r["wrk_noop"]["rps"] for r in rounds]),
        "produce_p50_ms": stat([r["wrk_produce"]["p50_ms"] for r in rounds]),
        "produce_p99_ms": stat([r["wrk_produce"]["p99_ms"] for r in rounds]),
        "noop_p50_ms": stat([r["wrk_noop"]["p50_ms"] for r in rounds]),
        "noop_p99_ms": stat([r["wrk_noop"]["p99_ms"] for r in rounds]),
        "produce_cpu_s_per_1e6": stat([r["wrk_produce"]["cpu_s_per_1e6"] for r in rounds]),
        "batch_msgs_s": stat([r["http_batch"] for r in rounds]),
        "sdk_send_msgs_s": stat([r["sdk_send"] for r in rounds]),
        "batch_vs_sdk": stat([r["http_batch"] / r["sdk_send"] for r in rounds]),
        "consume_msgs_s": stat([r["http_consume"] for r in rounds]),
        "consume_gather_msgs_s": stat([r["http_consume_gather"] for r in rounds]),
        "sdk_consume_msgs_s": stat([r["sdk_consume"] for r in rounds]),
        "consume_vs_sdk": stat([r["http_consume"] / r["sdk_consume"] for r in rounds]),
        "consume_gather_vs_sdk": stat(
            [r["http_consume_gather"] / r["sdk_consume"] for r in rounds]
        ),
    }
    for tag, key in (("", "http_consume_cost"), ("gather_", "http_consume_gather_cost")):
        for figure, field in (
            ("broker_rpcs_per_fetch", "broker_rpcs"),
            ("redis_roundtrips_per_fetch", "redis_roundtrips"),
            ("broker_rpcs_per_batch_all", "broker_rpcs_all"),
            ("redis_per_batch_all", "redis_roundtrips_all"),
            ("broker_batches_per_fetch", "broker_batches"),
            ("broker_rpcs_per_broker_batch", "broker_rpcs_per_batch"),
            ("redis_roundtrips_per_ack", "redis_per_ack"),
            ("messages_per_fetch", "messages"),
            ("consume_cpu_s_per_1e6_msgs", "cpu_s_per_1e6_msgs"),
        ):
            out[tag + figure] = stat([r[key][field] for r in rounds])
    return out


def _markdown(summary: dict[str, Any]) -> str:
    lines = ["| figure | median | 95 % interval | rounds |", "|---|---:|---|---:|"]
    for name, s in summary.items():
        ci = "–" if s["ci95"] is None else f"{s['ci95'][0]:,.3g} – {s['ci95'][1]:,.3g}"
        lines.append(f"| {name} | {s['median']:,.3g} | {ci} | {s['n']} |")
    return "\n".join(lines)


async def run(rounds: int, seconds: int, count: int) -> dict[str, Any]:
    """Bring everything up, run the rounds, return raw rounds + summary."""
    print("starting cluster, Redis and a gateway replica ...", flush=True)
    with tempfile.TemporaryDirectory(prefix="tubemq-gw-bench-") as tmp:
        async with LocalCluster(brokers=1, topics=[T_PRODUCE, T_CONSUME], topic_partitions=3) \
                as cluster, RedisServer() as redis:  # fmt: skip
            config = _config(Path(tmp) / "gw.toml", cluster.master_addr, redis.url)
            async with (
                GatewayReplica(config) as gw,
                Producer(cluster.master_addr, topics=[T_CONSUME]) as producer,
            ):
                payload = measure.BODY.encode()
                left = iter(range(count))

                async def fill() -> None:
                    for _ in left:
                        await producer.send(T_CONSUME, payload)

                await asyncio.gather(*(fill() for _ in range(256)))
                print(f"pre-filled {count} messages; replica at {gw.url}", flush=True)
                raw = []
                for n in range(rounds):
                    began = time.monotonic()
                    raw.append(await _round(n, gw, cluster.master_addr, seconds, count))
                    print(f"round {n + 1}/{rounds} in {time.monotonic() - began:.0f} s: "
                          f"{json.dumps(raw[-1])}", flush=True)  # fmt: skip
    return {"env": collect(), "rounds": raw, "summary": _summary(raw)}


def main(argv: Sequence[str]) -> int:
    """Entry point: ``--quick`` (3 rounds of 5 s) or the full run (5 rounds of 15 s)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gateway")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--out", type=Path, help="result directory (default benchmarks/results)")
    args = parser.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 5)
    seconds, count = 5 if args.quick else 15, 60_000
    result = asyncio.run(run(rounds, seconds, count))
    out = (
        args.out or RESULTS / f"{time.strftime('%Y-%m-%d')}-gateway{'-quick' if args.quick else ''}"
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "raw.json").write_text(json.dumps(result, indent=2))
    table = _markdown(result["summary"])
    (out / "summary.md").write_text(table + "\n")
    print(table)
    print(f"results in {out}")
    return 0
