"""Cookbook benchmark: the FastAPI recipe's request rate next to the raw SDK's send rate.

Sends ``--messages`` bodies straight through :class:`~tubemq_aio.Producer` with
``--concurrency`` tasks, then the same number of ``POST`` requests to the running service
(``examples/fastapi_service.py``) with as many concurrent httpx requests, and prints one JSON
object: counts, seconds and rates of both, and the HTTP statuses seen. Figures depend on the
machine; the cookbook page shows one run.

    python examples/fastapi_bench.py --master 127.0.0.1:8715 --topic demo \\
        --url http://127.0.0.1:8000 --messages 2000 --concurrency 32
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections import Counter
from typing import Any

import httpx

from tubemq_aio import Producer

BODY = b"x" * 256


async def _fan_out(count: int, concurrency: int, one: Any) -> float:
    """Run ``one(i)`` for ``i < count`` with ``concurrency`` tasks; returns the seconds taken."""
    numbers = iter(range(count))

    async def worker() -> None:
        for i in numbers:
            await one(i)

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - began


async def bench_sdk(masters: str, topic: str, count: int, concurrency: int) -> dict[str, Any]:
    """Raw SDK: ``await producer.send`` from ``concurrency`` tasks."""
    async with Producer(masters, topics=[topic]) as producer:

        async def one(i: int) -> None:
            await producer.send(topic, BODY)

        seconds = await _fan_out(count, concurrency, one)
        sent = producer.sent
    return {"messages": sent, "seconds": round(seconds, 3), "rate": round(sent / seconds)}


async def bench_http(url: str, topic: str, count: int, concurrency: int) -> dict[str, Any]:
    """The service: ``POST /topics/{topic}/messages`` from ``concurrency`` concurrent requests."""
    statuses: Counter[int] = Counter()
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30.0) as client:

        async def one(i: int) -> None:
            reply = await client.post(f"/topics/{topic}/messages", content=BODY)
            statuses[reply.status_code] += 1

        seconds = await _fan_out(count, concurrency, one)
    ok = statuses[201]
    return {
        "requests": count,
        "ok": ok,
        "seconds": round(seconds, 3),
        "rate": round(ok / seconds),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Both measurements, SDK first."""
    sdk = await bench_sdk(args.master, args.topic, args.messages, args.concurrency)
    http = await bench_http(args.url, args.topic, args.messages, args.concurrency)
    return {"concurrency": args.concurrency, "body_bytes": len(BODY), "sdk": sdk, "http": http}


def main() -> int:
    """Run and print the JSON result; exit 1 if a send or a request failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--master",
        default=os.environ.get("TUBEMQ_AIO_MASTER"),
        help="the master's HOST:PORT (default $TUBEMQ_AIO_MASTER)",
    )
    parser.add_argument("--topic", required=True)
    parser.add_argument("--url", required=True, help="base URL of the running service")
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    if not args.master:
        parser.error("give --master HOST:PORT or set $TUBEMQ_AIO_MASTER")
    result = asyncio.run(run(args))
    print(json.dumps(result))
    complete = result["sdk"]["messages"] == result["http"]["ok"] == result["http"]["requests"]
    return 0 if complete else 1


if __name__ == "__main__":
    raise SystemExit(main())
