"""Orchestration of ``make bench-gateway``: one cluster, one Redis, a one-worker and a two-worker
replica and a bare FastAPI app; interleaved rounds.

Each round measures, back to back and in an order that flips every round: wrk against the bare
FastAPI app (the framework floor, same uvicorn setup), ``POST /v1/noop`` (auth, body model,
middlewares, no send) and the produce route of both replicas; batch produce through HTTP against
the SDK's own ``send``; consume through fetch → ack against the SDK's client-balanced consumer;
Redis round trips per fetch and per ack read from ``/metrics``. The gateway's CPU (the replica's
processes) and the benchmark client's (wrk, or this process) are taken apart, per 10⁶ requests or
messages. Ratios are taken per round; the report gives medians with bootstrap intervals and the
goals met or missed, with the load averages before and after. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks.gateway import measure, summary
from benchmarks.gateway.bare_server import bare_server
from benchmarks.harness.env import collect, git_revision, load_average
from benchmarks.harness.session import out_dir_for
from tubemq_aio import Producer
from tubemq_aio.gateway.config.engine_settings import DEFAULT_KEPT_BATCH_BYTES
from tubemq_aio.testing import LocalCluster, RedisServer
from tubemq_aio.testing.gateway import GatewayReplica

KEY = "bench-key-123"
_CPUS = os.cpu_count() or 1
#: ``max_messages`` of the gathering consume run (the other run leaves the gateway's default).
GATHER = 5000
T_PRODUCE, T_CONSUME, GROUP = "gwb_produce", "gwb_consume", "gwb_group"
RESULTS = Path(__file__).resolve().parents[1] / "results"


def _config(path: Path, masters: str, redis_url: str, kept_batch_bytes: int) -> Path:
    path.write_text(
        f'masters = "{masters}"\nredis = "{redis_url}"\nsecret = "bench-secret-0123456789"\n'
        f"kept_batch_bytes = {kept_batch_bytes}\n"
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
            f"{url}/v1/groups/{GROUP}/offsets/reset",
            json={"to": "earliest"},
            headers={"Authorization": f"Bearer {KEY}"},
        )
        r.raise_for_status()


@dataclass(frozen=True)
class _Servers:
    """What the rounds measure: the bare app and the replicas with one and two workers."""

    bare_url: str
    bare_pid: int
    one: GatewayReplica
    two: GatewayReplica


async def _wrk(name: str, url: str, pid: int, seconds: int) -> dict[str, Any]:
    """One wrk run with the server's CPU (``pid`` and its workers) and wrk's, per 10⁶ requests."""
    cpu0, machine0 = measure.tree_cpu_seconds(pid), measure.machine_busy_seconds()
    began = time.monotonic()
    result = await measure.wrk(url, KEY, seconds)
    elapsed = time.monotonic() - began
    busy_cores = _busy_cores(machine0)
    gw_cpu = measure.tree_cpu_seconds(pid) - cpu0
    requests = max(1.0, result.rps * seconds)
    out = vars(result)
    out["gw_cpu_s_per_1e6"] = gw_cpu / requests * 1e6
    out["client_cpu_s_per_1e6"] = result.client_cpu_s / requests * 1e6
    # cores kept busy during the run: by the server alone, and on the whole machine (the
    # server, wrk, the broker and Redis), against all the machine's cores
    out["gw_cores"] = gw_cpu / elapsed
    out["machine_busy_cores"] = busy_cores
    return out


def _busy_cores(since: tuple[float, float]) -> float:
    """Cores of the machine kept busy since ``since`` (a :func:`measure.machine_busy_seconds`
    reading), by whoever: the replica, the clients, the broker, Redis. A consume run near the
    machine's core count is bound by CPU, one well below it by waiting."""
    busy1, all1 = measure.machine_busy_seconds()
    return (busy1 - since[0]) / max(1e-9, all1 - since[1]) * _CPUS


async def _costed(
    run: Callable[[], Awaitable[float]], pid: int | None, seconds: float
) -> dict[str, float]:
    """A messages/s run with the replica's (``pid``) and this process's CPU per 10⁶ messages."""
    gw0, own0 = (measure.tree_cpu_seconds(pid) if pid else 0.0), measure.own_cpu_seconds()
    rate = await run()
    messages = max(1.0, rate * seconds)
    out = {
        "rate": rate,
        "client_cpu_s_per_1e6": (measure.own_cpu_seconds() - own0) / messages * 1e6,
    }
    if pid:
        out["gw_cpu_s_per_1e6"] = (measure.tree_cpu_seconds(pid) - gw0) / messages * 1e6
    return out


async def _round(
    n: int, servers: _Servers, masters: str, seconds: int, count: int
) -> dict[str, Any]:
    out: dict[str, Any] = {"round": n, "load_average": load_average()}
    gw, gw2 = servers.one, servers.two
    targets = [
        ("bare", servers.bare_url, servers.bare_pid),
        ("noop", f"{gw.url}/v1/noop", gw.pid),
        ("produce", f"{gw.url}/v1/topics/{T_PRODUCE}/messages", gw.pid),
        ("noop_w2", f"{gw2.url}/v1/noop", gw2.pid),
        ("produce_w2", f"{gw2.url}/v1/topics/{T_PRODUCE}/messages", gw2.pid),
    ]
    for name, url, pid in targets if n % 2 == 0 else targets[::-1]:
        assert pid is not None
        out[f"wrk_{name}"] = await _wrk(name, url, pid, seconds)

    def http_batch() -> Awaitable[float]:
        return measure.http_batch_produce(gw.url, KEY, T_PRODUCE, seconds)

    def sdk_send() -> Awaitable[float]:
        return measure.sdk_send(masters, T_PRODUCE, seconds)

    pair: list[tuple[str, Callable[[], Awaitable[dict[str, float]]]]] = [
        ("http_batch", lambda: _costed(http_batch, gw.pid, seconds)),
        ("sdk_send", lambda: _costed(sdk_send, None, seconds)),
    ]
    for name, run in pair if n % 2 == 0 else pair[::-1]:
        out[name] = await run()

    async def sdk() -> dict[str, Any]:
        own0, machine0 = measure.own_cpu_seconds(), measure.machine_busy_seconds()
        rate = await measure.sdk_consume(masters, T_CONSUME, f"gwb_sdk_{n}", count)
        own = measure.own_cpu_seconds() - own0
        return {
            "sdk_consume": {
                "rate": rate,
                "client_cpu_s_per_1e6": own / count * 1e6,
                "machine_busy_cores": _busy_cores(machine0),
            }
        }

    consumes: list[Callable[[], Awaitable[dict[str, Any]]]] = [
        lambda: _consume(gw, count, "http_consume", None),
        lambda: _consume(gw, count, "http_consume_gather", GATHER),
        sdk,
    ]
    for consume in consumes if n % 2 == 0 else consumes[::-1]:
        out.update(await consume())
    out["standalone_acks"] = await _standalone_acks(gw)
    return out


async def _standalone_acks(gw: GatewayReplica, pairs: int = 20) -> dict[str, float]:
    """Redis round trips of ``POST /v1/leases/{token}/ack`` alone (fetches send no acks)."""
    await _reset(gw.url)
    before = await _engine_stats(gw.url)
    acked = await measure.http_fetch_then_ack(gw.url, KEY, GROUP, pairs)
    after = await _engine_stats(gw.url)
    delta = {k: after[k] - before.get(k, 0.0) for k in after}
    return {
        "acks": acked,
        "redis_per_ack": delta.get("settle_redis_roundtrips", 0.0) / max(1, acked),
    }


async def _consume(
    gw: GatewayReplica, count: int, name: str, max_messages: int | None
) -> dict[str, Any]:
    """One fetch → ack run from the start of the topic, with its cost read from ``/metrics``."""
    pid = gw.pid
    assert pid is not None
    await _reset(gw.url)
    before, cpu0 = await _engine_stats(gw.url), measure.tree_cpu_seconds(pid)
    own0, machine0 = measure.own_cpu_seconds(), measure.machine_busy_seconds()
    rate, last_acks = await measure.http_consume(
        gw.url, KEY, GROUP, count, max_messages=max_messages
    )
    busy_cores = _busy_cores(machine0)
    cpu, own = measure.tree_cpu_seconds(pid) - cpu0, measure.own_cpu_seconds() - own0
    after = await _engine_stats(gw.url)
    delta = {k: after[k] - before.get(k, 0.0) for k in after}
    fetches = max(1.0, delta.get("fetches_ok", 0.0))
    batches = max(1.0, delta.get("broker_batches", 0.0))
    messages = max(1.0, delta.get("messages", 1.0))
    # as the issue counts a fetch: its own round trips and those of the acks it carried,
    # without the one-offs of a run (first offsets, the last acks)
    with_acks = (
        delta.get("ok_redis_roundtrips", 0.0)
        - delta.get("offset_inits", 0.0)
        + delta.get("settle_redis_roundtrips", 0.0)
        - last_acks
    )
    return {
        name: rate,
        f"{name}_cost": {
            # the attempt that returned the batch
            "broker_rpcs": delta.get("ok_broker_rpcs", 0.0) / fetches,
            "redis_roundtrips": delta.get("ok_redis_roundtrips", 0.0) / fetches,
            # every Redis round trip of the run (piggy-backed acks, syncs, the first
            # offsets of a reset group, the consumers' last acks) per fetch that got a batch
            "redis_all": delta.get("redis_roundtrips", 0.0) / fetches,
            "redis_with_acks": with_acks / fetches,
            "broker_rpcs_all": delta.get("broker_rpcs", 0.0) / fetches,
            "broker_batches": batches / fetches,
            "broker_rpcs_per_batch": delta.get("ok_broker_rpcs", 0.0) / batches,
            "messages": delta.get("messages", 0.0) / fetches,
            "fetches_not_ok": delta.get("fetches", 0.0) - delta.get("fetches_ok", 0.0),
            "cpu_s_per_1e6_msgs": cpu / messages * 1e6,
            "client_cpu_s_per_1e6_msgs": own / messages * 1e6,
            "machine_busy_cores": busy_cores,
        },
    }


@contextlib.asynccontextmanager
async def _servers(config: Path) -> AsyncIterator[_Servers]:
    async with (
        bare_server() as (bare_url, bare_pid),
        GatewayReplica(config) as one,
        GatewayReplica(config, workers=2, init_store=False) as two,
    ):
        yield _Servers(bare_url, bare_pid, one, two)


async def _fill(masters: str, count: int) -> None:
    async with Producer(masters, topics=[T_CONSUME]) as producer:
        payload = measure.BODY.encode()
        left = iter(range(count))

        async def fill() -> None:
            for _ in left:
                await producer.send(T_CONSUME, payload)

        await asyncio.gather(*(fill() for _ in range(256)))


async def run(rounds: int, seconds: int, count: int, kept_batch_bytes: int) -> dict[str, Any]:
    """Bring everything up, run the rounds, return raw rounds + summary + goals.

    ``kept_batch_bytes`` is the replicas' read-ahead setting (0: off).
    """
    env = collect()
    env["kept_batch_bytes"] = kept_batch_bytes
    print(f"load average at the start: {env['load_average_start']}", flush=True)
    print("starting cluster, Redis, the bare app and two gateway replicas ...", flush=True)
    with tempfile.TemporaryDirectory(prefix="tubemq-gw-bench-") as tmp:
        async with (
            LocalCluster(brokers=1, topics=[T_PRODUCE, T_CONSUME], topic_partitions=3) as cluster,
            RedisServer() as redis,
        ):
            config = _config(
                Path(tmp) / "gw.toml", cluster.master_addr, redis.url, kept_batch_bytes
            )
            async with _servers(config) as servers:
                await _fill(cluster.master_addr, count)
                print(f"pre-filled {count} messages", flush=True)
                raw = []
                for n in range(rounds):
                    began = time.monotonic()
                    raw.append(await _round(n, servers, cluster.master_addr, seconds, count))
                    print(
                        f"round {n + 1}/{rounds} in {time.monotonic() - began:.0f} s: "
                        f"{json.dumps(raw[-1])}",
                        flush=True,
                    )
    env["load_average_end"] = load_average()
    figures = summary.summary(raw)
    return {"env": env, "rounds": raw, "summary": figures, "goals": summary.goals(figures)}


def main(argv: Sequence[str]) -> int:
    """Entry point: ``--quick`` (3 rounds of 3 s) or the full run (5 rounds of 10 s)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gateway")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--out", type=Path, help="result directory (default benchmarks/results)")
    parser.add_argument(
        "--kept-batch-bytes",
        type=int,
        default=DEFAULT_KEPT_BATCH_BYTES,
        help="the replicas' kept_batch_bytes (read-ahead; default the gateway's, 0 = off)",
    )
    args = parser.parse_args(argv)
    if args.kept_batch_bytes < 0:
        parser.error("--kept-batch-bytes must be 0 or more")
    rounds = args.rounds or (3 if args.quick else 5)
    # A full run reads 300 000 messages per consume run: at 60 000 the SDK consumer's run took
    # 0.1-0.2 s, so its start (connecting the partitions) moved its rate 2.5-fold between rounds.
    seconds, count = (3, 30_000) if args.quick else (10, 300_000)
    began = time.monotonic()
    result = asyncio.run(run(rounds, seconds, count, args.kept_batch_bytes))
    env = result["env"]
    if args.out is None:
        rev = git_revision() + ("-gateway-quick" if args.quick else "-gateway")
        rev += (
            ""
            if args.kept_batch_bytes == DEFAULT_KEPT_BATCH_BYTES
            else f"-kept{args.kept_batch_bytes}"
        )
        out = out_dir_for(RESULTS, rev)
    else:
        out = args.out
        out.mkdir(parents=True, exist_ok=True)
    (out / "raw.json").write_text(json.dumps(result, indent=2))
    head = (
        f"# Gateway benchmark, {'quick' if args.quick else 'full'} run, {env['git_revision']}\n\n"
        f"{rounds} rounds of {seconds} s, {count} messages per consume run, "
        f"{time.monotonic() - began:.0f} s in all; {env['cpus']} CPUs ({env['cpu_model']}); "
        f"load average (1, 5, 15 min) {env['load_average_start']} before, "
        f"{env['load_average_end']} after; kept_batch_bytes {args.kept_batch_bytes}. "
        "Medians over the rounds, ratios per round."
    )
    table = summary.markdown(result["summary"], result["goals"], head)
    (out / "summary.md").write_text(table + "\n")
    print(table)
    print(f"results in {out}")
    return 0
