"""The gateway app's own cost per request, in process: the direct JSON path vs FastAPI's.

Run ``python -m benchmarks.micro.gateway_routes [--requests N] [--rounds R] [--batch B]``. One
gateway app (no server, no socket: ASGI calls with a prepared scope) answers ``POST /v1/noop``,
``POST /v1/topics/demo/messages`` and ``…/messages/batch`` (``B`` messages) with a stand-in
producer that answers at once, so what is timed is the app: the edge middleware, routing, auth,
body parsing, the handler and the answer. Each request is sent twice per round, with
``Content-Type: application/json`` (the direct path of ``DirectJsonRoute``) and with
``application/json; charset="utf-8"`` (a spelling the direct route leaves to FastAPI's own
handler, the path before it), alternating.
Output: one JSON line per route and path with the median µs per request over the rounds, then
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

import orjson
from starlette.types import Message

from tubemq_aio.gateway.app import create_app
from tubemq_aio.gateway.config.gateway_config import GatewayConfig
from tubemq_aio.producer import Producer
from tubemq_aio.protocol.producer_send import SendResult

KEY = "bench-key-1"
PATHS = {"direct": b"application/json", "fastapi": b'application/json; charset="utf-8"'}


class _InstantProducer:
    """Stands in for the SDK producer: every send is stored at once."""

    def __init__(self) -> None:
        self.config = Producer("127.0.0.1:1", topics=["demo"]).config
        self._result = SendResult("demo", "1:demo:0", 0, 1, 7, 1, 9)

    async def send(self, topic: str, body: bytes, **_options: object) -> SendResult:
        """One stored message."""
        return self._result

    async def send_many(
        self, topic: str, bodies: Sequence[bytes], **_options: object
    ) -> list[SendResult]:
        """Every message stored."""
        return [self._result] * len(bodies)


def _app(batch: int) -> tuple[object, dict[str, bytes]]:
    config = GatewayConfig.from_mapping(
        {
            "masters": "127.0.0.1:1",
            "redis": "redis://127.0.0.1:1/0",
            "secret": "0123456789abcdef0123",
            "produce_topics": ["demo"],
            "noop_route": True,
            "max_batch": max(batch, 1),
            "keys": [{"key": KEY, "scopes": ["produce:*"]}],
        }
    )
    app = create_app(config)
    app.state.gateway.producer = _InstantProducer()
    one = {"value": "hello gateway " * 8, "attributes": {"k": "v"}}
    bodies = {
        "/v1/noop": orjson.dumps(one),
        "/v1/topics/demo/messages": orjson.dumps(one),
        "/v1/topics/demo/messages/batch": orjson.dumps({"messages": [one] * batch}),
    }
    return app, bodies


async def _run(app: object, path: str, body: bytes, content_type: bytes, count: int) -> float:
    headers = [
        (b"content-type", content_type),
        (b"content-length", str(len(body)).encode()),
        (b"authorization", f"Bearer {KEY}".encode()),
    ]
    statuses: list[int] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    started = time.perf_counter()
    for _ in range(count):
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "root_path": "",
            "query_string": b"",
            "headers": headers,
            "server": ("127.0.0.1", 8000),
            "client": ("127.0.0.1", 5000),
            "state": {},
        }
        await app(scope, receive, send)  # type: ignore[operator]
    took = time.perf_counter() - started
    assert set(statuses) == {200}, statuses[:3]
    return took / count * 1e6


async def main(argv: Sequence[str] | None = None) -> None:
    """Time each route on both paths, alternating, and print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=100)
    args = parser.parse_args(argv)
    app, bodies = _app(args.batch)
    load_before = os.getloadavg()
    times: dict[tuple[str, str], list[float]] = {}
    for round_no in range(args.rounds + 1):  # the first round warms up and is dropped
        order = list(PATHS.items())
        if round_no % 2:
            order.reverse()
        for path, body in bodies.items():
            count = args.requests // (args.batch // 10 or 1) if "batch" in path else args.requests
            for name, content_type in order:
                took = await _run(app, path, body, content_type, count)
                if round_no:
                    times.setdefault((path, name), []).append(took)
    for (path, name), samples in times.items():
        line = {"route": path, "path": name, "us_per_request": round(statistics.median(samples), 1)}
        print(json.dumps(line))
    print(json.dumps({"load_before": load_before, "load_after": os.getloadavg()}))


if __name__ == "__main__":
    asyncio.run(main())
