"""What ``redis_ack_replicas`` costs an ack: the settle script alone vs the script and
``WAIT 1`` on its connection, against a real primary with one replica on loopback.

Run ``python -m benchmarks.micro.ack_wait [--acks N] [--concurrency C]``. A
:class:`~tubemq_aio.testing.RedisSentinelSet` is started; for each mode (``off``: no WAIT,
``wait``: ``redis_ack_replicas = 1``) the same
:class:`~tubemq_aio.gateway.leases.lease_store.LeaseStore` calls are made: a lease is taken, a
batch booked and acked, ``N`` times, by ``C`` tasks at once on groups of their own; only the ack
is timed. Modes alternate over several rounds. Output: one JSON line per mode with the median
and 99th percentile of one ack (µs), acks per second, and the acks whose WAIT ended short; then
the load average. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from collections.abc import Sequence

from tubemq_aio.gateway.leases.lease_key import LeaseKey
from tubemq_aio.gateway.leases.lease_store import LeaseStore
from tubemq_aio.gateway.leases.model import Booking
from tubemq_aio.gateway.leases.redis_client import open_redis, parse_redis_url
from tubemq_aio.testing import RedisSentinelSet


async def _acks(store: LeaseStore, group: str, count: int) -> list[float]:
    """``count`` lease → book → ack cycles on the one partition of ``group``; the acks'
    seconds."""
    p = "1:t:0"
    await store.sync_parts(group, "c", [p])
    took = []
    for i in range(count):
        lid = f"{group}-{i}"
        got = await store.acquire(group, "c", lid, 60_000, "bench", want=p)
        assert got.status == "leased", got
        if i == 0:
            await store.init(LeaseKey(group, "c", p, lid), 0, 1 << 40)
        base = i * 10
        assert (
            await store.record(
                LeaseKey(group, "c", p, lid), Booking(base, base + 10, 1 << 40, 10, 0, -1)
            )
        ).status == "ok"
        began = time.perf_counter()
        assert (await store.settle(LeaseKey(group, "c", p, lid), "ack")).status == "acked"
        took.append(time.perf_counter() - began)
    return took


async def _round(url: str, mode: str, n: int, acks: int, concurrency: int) -> dict[str, object]:
    client = open_redis(parse_redis_url(url), max_connections=concurrency + 2, timeout=5.0)
    store = LeaseStore(
        client, timeout=5.0, ack_replicas=1 if mode == "wait" else 0, ack_wait_ms=1000
    )
    groups = [f"bench{n}{mode}w{w}" for w in range(concurrency)]
    try:
        await store.boot(groups, allow_init=True)
        began = time.perf_counter()
        per_worker = await asyncio.gather(*(_acks(store, g, acks // concurrency) for g in groups))
        wall = time.perf_counter() - began
    finally:
        await client.aclose()
    took = sorted(t for ts in per_worker for t in ts)
    return {
        "mode": mode,
        "acks": len(took),
        "median_us": round(1e6 * statistics.median(took), 1),
        "p99_us": round(1e6 * took[max(0, int(0.99 * len(took)) - 1)], 1),
        "cycles_per_s": round(len(took) / wall),
        "wait_short": store.wait_short,
    }


async def run(acks: int, concurrency: int, rounds: int) -> list[dict[str, object]]:
    """Alternate the modes for ``rounds`` rounds; the first round of each is a warm-up."""
    out: list[dict[str, object]] = []
    async with RedisSentinelSet() as redis_set:
        for n in range(rounds + 1):
            for mode in ("off", "wait") if n % 2 == 0 else ("wait", "off"):
                result = await _round(redis_set.url, mode, n, acks, concurrency)
                if n:
                    out.append({"round": n, "concurrency": concurrency, **result})
    return out


def main(argv: Sequence[str]) -> int:
    """Entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.micro.ack_wait")
    parser.add_argument("--acks", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    for line in asyncio.run(run(args.acks, args.concurrency, args.rounds)):
        print(json.dumps(line))
    print(json.dumps({"load_average": [round(x, 2) for x in os.getloadavg()]}))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
