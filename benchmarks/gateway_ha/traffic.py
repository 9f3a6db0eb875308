"""The load of the HA run: one SDK producer and HTTP consumers spreading calls over replicas.

Every fetch is timed and stamped; every delivered body, every ack and every answer that was not
a 200 is counted, so the report can say what was produced, delivered, acked, duplicated and
skipped, and how long fetches took before, during and after each kill.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import httpx

from tubemq_aio import Producer

KEY = "ha-run-key-0123"
HEADERS = {"Authorization": f"Bearer {KEY}"}


class ConsumerShape(Protocol):
    """What a consumer reads of the run's settings."""

    @property
    def max_messages(self) -> int:
        """Messages per fetch at most."""

    @property
    def work_s(self) -> float:
        """Seconds a consumer works on a batch before its ack."""


@dataclass
class Traffic:
    """What the producer and the consumers did."""

    produced: list[str] = field(default_factory=list)
    deliveries: Counter[str] = field(default_factory=Counter)
    acked_messages: int = 0
    acks: int = 0
    answers: Counter[str] = field(default_factory=Counter)  # "503 store_unavailable", ...
    fetches: list[tuple[float, float]] = field(default_factory=list)  # batches: (start, s)
    redelivered_batches: int = 0

    @property
    def duplicates(self) -> int:
        """Deliveries beyond the first of each body."""
        return sum(n - 1 for n in self.deliveries.values())

    def skipped(self) -> list[str]:
        """Produced bodies never delivered."""
        return [b for b in self.produced if b not in self.deliveries]


async def produce(masters: str, topic: str, rate: float, seconds: float, traffic: Traffic) -> None:
    """Send ``p<i>`` at ``rate`` messages per second for ``seconds`` (SDK producer)."""
    async with Producer(masters, topics=[topic]) as producer:
        began = time.monotonic()
        for i in itertools.count():
            due = began + i / rate
            if due - began >= seconds:
                return
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            body = f"p{i}"
            await producer.send(topic, body.encode())
            traffic.produced.append(body)


def _answer(status: int, body: bytes) -> str:
    try:
        code = httpx.Response(status, content=body).json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        code = "?"
    return f"{status} {code}"


async def consume(
    clients: Sequence[httpx.AsyncClient],
    group: str,
    traffic: Traffic,
    stop: asyncio.Event,
    *,
    offset: int,
    settings: ConsumerShape,
) -> None:
    """Fetch and ack until ``stop``, each call through the next replica; a replica that does
    not answer (killed) is skipped for the next one, a 503 is retried after a short pause."""
    turn = itertools.count(offset)
    body = {"wait_ms": 500, "max_messages": settings.max_messages}
    while not stop.is_set():
        client = clients[next(turn) % len(clients)]
        began = time.monotonic()
        try:
            r = await client.post(f"/v1/groups/{group}/fetch", json=body, headers=HEADERS)
        except httpx.TransportError:
            traffic.answers["replica down"] += 1
            continue
        if r.status_code != 200:
            traffic.answers[_answer(r.status_code, r.content)] += 1
            await asyncio.sleep(0.1)
            continue
        reply = r.json()
        if reply["status"] != "ok":  # an empty long poll's time is waiting, not latency
            continue
        traffic.fetches.append((began, time.monotonic() - began))
        traffic.deliveries.update(m["value"] for m in reply["messages"])
        traffic.redelivered_batches += bool(reply["lease"]["redelivery"])
        await asyncio.sleep(settings.work_s)
        token = reply["lease"]["token"]
        for _ in range(len(clients)):  # an ack goes to any replica that answers
            client = clients[next(turn) % len(clients)]
            try:
                a = await client.post(f"/v1/leases/{token}/ack", headers=HEADERS)
            except httpx.TransportError:
                traffic.answers["replica down"] += 1
                continue
            if a.status_code == 200:
                traffic.acks += 1
                traffic.acked_messages += len(reply["messages"])
            else:
                traffic.answers[_answer(a.status_code, a.content)] += 1
            break
