"""Orchestration of ``make gateway-ha-run``: load through several replicas while one replica is
SIGKILLed and then the Redis primary, with a Sentinel failover.

One TubeMQ stand-in (:class:`~tubemq_aio.testing.FakeCluster`, in this process; with
``--real-cluster`` a real :class:`~tubemq_aio.testing.LocalCluster`, one broker), a Sentinel
set (primary, replica, three sentinels), ``replicas`` uvicorn replica processes, one SDK
producer at a fixed rate and ``consumers`` HTTP clients that send each call to the next replica.
A third into the load one replica is killed; two thirds in, the Redis primary. After the load,
the consumers go on until every produced message was delivered (or ``drain_timeout``). The
result says what was produced, delivered, acked, duplicated and skipped (must be 0) and the
fetch p99 before, during and after each kill. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks.gateway_ha import report
from benchmarks.gateway_ha.traffic import KEY, Traffic, consume, produce
from benchmarks.harness.env import collect
from tubemq_aio.testing import FakeCluster, LocalCluster, RedisSentinelSet, wait_until
from tubemq_aio.testing.gateway import GatewayReplica

RESULTS = Path(__file__).resolve().parents[1] / "results"
TOPIC, GROUP = "ha_t", "ha_group"


@dataclass(frozen=True, slots=True)
class HaRunSettings:
    """Size of one run (the defaults are the full ``make gateway-ha-run``)."""

    seconds: float = 60.0
    rate: float = 200.0
    replicas: int = 3
    consumers: int = 4
    partitions: int = 8
    max_messages: int = 50
    work_s: float = 0.01
    lease_ms: int = 10_000
    redis_ack_replicas: int = 0
    drain_timeout: float = 120.0
    real_cluster: bool = False


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _cluster(s: HaRunSettings) -> FakeCluster | LocalCluster:
    """The TubeMQ side: the in-process stand-in, or a real Master and Broker."""
    if s.real_cluster:
        return LocalCluster(brokers=1, topics=[TOPIC], topic_partitions=s.partitions)
    return FakeCluster(topics={TOPIC: s.partitions}, max_batch=s.max_messages)


def _config(path: Path, masters: str, redis_url: str, s: HaRunSettings) -> Path:
    path.write_text(
        f'masters = "{masters}"\nredis = "{redis_url}"\nsecret = "ha-run-secret-0123456789"\n'
        f"rpc_timeout = 3.0\nredis_ack_replicas = {s.redis_ack_replicas}\n"
        f'[[groups]]\nname = "{GROUP}"\ntopics = ["{TOPIC}"]\n'
        f"lease_ms = {s.lease_ms}\nlease_ms_min = 1000\n"
        f'[[keys]]\nkey = "{KEY}"\nscopes = ["consume:*", "admin:*"]\n'
    )
    return path


def error_lines(log: str, limit: int = 40) -> list[str]:
    """The lines of a replica's log from each logged error or traceback on (at most ``limit``
    each): what a run keeps of its replicas' logs, so an unexpected answer can be traced."""
    lines = log.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if " ERROR " in line or line.startswith(("ERROR:", "Traceback")):
            out.extend(lines[i : i + limit])
            i += limit
        else:
            i += 1
    return out


@contextlib.asynccontextmanager
async def _replicas(
    config: Path, count: int, errors: list[str]
) -> AsyncIterator[list[GatewayReplica]]:
    """``count`` replicas; their logged errors are appended to ``errors`` when they stop."""
    started = [GatewayReplica(config, init_store=i == 0) for i in range(count)]
    try:
        for replica in started:  # the first one initialises the store
            await replica.start()
        yield started
    finally:
        await asyncio.gather(*(r.stop() for r in started), return_exceptions=True)
        for n, r in enumerate(started):
            with contextlib.suppress(OSError):
                found = error_lines(r.log_file.read_text(errors="replace"))
                errors.extend(f"replica {n}: {line}" for line in found)
            r.cleanup()


async def _first_fetch_after(traffic: Traffic, moment: float, timeout: float) -> float:
    """When the first fetch that started after ``moment`` answered 200."""
    await wait_until(
        lambda: any(t >= moment for t, _ in traffic.fetches), timeout, "a fetch after the kill"
    )
    return min(t + d for t, d in traffic.fetches if t >= moment)


async def run_ha(s: HaRunSettings) -> dict[str, Any]:
    """One run; returns the figures (see the module docstring)."""
    load_start = _load()
    traffic = Traffic()
    events: list[tuple[str, float, float]] = []
    replica_errors: list[str] = []
    with tempfile.TemporaryDirectory(prefix="tubemq-gw-ha-") as tmp:
        async with (
            _cluster(s) as cluster,
            RedisSentinelSet() as redis_set,
        ):
            config = _config(Path(tmp) / "gw.toml", cluster.master_addr, redis_set.url, s)
            async with _replicas(config, s.replicas, replica_errors) as replicas:
                clients = [httpx.AsyncClient(base_url=r.url, timeout=15) for r in replicas]
                stop = asyncio.Event()
                began = time.monotonic()
                consumers = [
                    asyncio.create_task(
                        consume(clients, GROUP, traffic, stop, offset=i, settings=s)
                    )
                    for i in range(s.consumers)
                ]
                producer = asyncio.create_task(
                    produce(cluster.master_addr, TOPIC, s.rate, s.seconds, traffic)
                )
                try:
                    await asyncio.sleep(s.seconds / 3)
                    killed_at = time.monotonic()
                    await replicas[1].kill()
                    # its leased batches are stuck until their leases expire
                    events.append(("replica kill", killed_at, killed_at + s.lease_ms / 1000))
                    await asyncio.sleep(max(0.0, began + 2 * s.seconds / 3 - time.monotonic()))
                    killed_at = time.monotonic()
                    await redis_set.wait_failover(await redis_set.kill_primary())
                    back = await _first_fetch_after(traffic, time.monotonic(), s.drain_timeout)
                    events.append(("Redis primary kill", killed_at, back))
                    await producer
                    await wait_until(
                        lambda: not traffic.skipped(), s.drain_timeout, "every message delivered"
                    )
                    ended = time.monotonic()
                finally:
                    stop.set()
                    producer.cancel()
                    await asyncio.gather(producer, return_exceptions=True)
                    await asyncio.wait(consumers, timeout=20)
                    for task in consumers:
                        task.cancel()
                    await asyncio.gather(*consumers, return_exceptions=True)
                    for client in clients:
                        await client.aclose()
                for task in consumers:  # a consumer that crashed is a failed run
                    if not task.cancelled() and task.exception() is not None:
                        raise task.exception()  # type: ignore[misc]
    return {
        "settings": asdict(s),
        "seconds": s.seconds,
        "replicas": s.replicas,
        "consumers": s.consumers,
        "redis": "Sentinel (primary, replica, 3 sentinels)",
        "tubemq": "LocalCluster (1 broker)" if s.real_cluster else "FakeCluster",
        "counts": {
            "produced": len(traffic.produced),
            "delivered_unique": len(traffic.deliveries),
            "delivered": sum(traffic.deliveries.values()),
            "acked_messages": traffic.acked_messages,
            "duplicated": traffic.duplicates,
            "skipped": len(traffic.skipped()),
            "redelivered_batches": traffic.redelivered_batches,
        },
        "answers": dict(traffic.answers),
        "replica_errors": replica_errors,
        "events": [(name, start - began, end - start) for name, start, end in events],
        "windows": report.windows(traffic, began, events, ended),
        "load_start": load_start,
        "load_end": _load(),
        "env": collect(),
    }


def main(argv: Sequence[str]) -> int:
    """Entry point: ``--quick`` (20 s of load) or the full run (60 s)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gateway_ha")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--ack-replicas", type=int, default=0)
    parser.add_argument("--lease-ms", type=int, default=10_000, help="the group's lease")
    parser.add_argument(
        "--real-cluster", action="store_true", help="a real Master and Broker, not the stand-in"
    )
    parser.add_argument("--out", type=Path, help="result directory (default benchmarks/results)")
    args = parser.parse_args(argv)
    seconds = args.seconds or (20.0 if args.quick else 60.0)
    settings = HaRunSettings(
        seconds=seconds,
        redis_ack_replicas=args.ack_replicas,
        lease_ms=args.lease_ms,
        real_cluster=args.real_cluster,
    )
    result = asyncio.run(run_ha(settings))
    tags = ("-real" if args.real_cluster else "") + ("-quick" if args.quick else "")
    name = f"{time.strftime('%Y-%m-%d')}-gateway-ha{tags}"
    out = args.out or RESULTS / name
    out.mkdir(parents=True, exist_ok=True)
    (out / "raw.json").write_text(json.dumps(result, indent=2))
    table = report.markdown(result)
    (out / "summary.md").write_text(table + "\n")
    print(table)
    print(f"results in {out}")
    return 0 if result["counts"]["skipped"] == 0 else 1
