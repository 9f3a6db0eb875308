"""Helpers of the gateway end-to-end tests: config files, replicas, HTTP consumers."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tubemq_aio.testing import LocalCluster
from tubemq_aio.testing.gateway import GatewayReplica

ADMIN_KEY = "k-admin-e2e"
READER_KEY = "k-reader-e2e"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
READER = {"Authorization": f"Bearer {READER_KEY}"}
SECRET = "e2e-secret-0123456789abcdef"


@dataclass
class Group:
    """A ``[[groups]]`` entry of a test config."""

    name: str
    topics: Sequence[str]
    mode: str = "clustering"
    start: str = "earliest"
    lease_ms: int = 3000
    lease_ms_min: int = 1000


def write_config(
    path: Path,
    cluster: LocalCluster,
    redis_url: str,
    produce_topics: Sequence[str],
    groups: Sequence[Group] = (),
    extra: str = "",
    masters: str | None = None,
) -> Path:
    """Write a gateway TOML with an admin key (every scope) and a reader key (consume:*);
    ``masters`` replaces the cluster's plain master address (e.g. a ``tubemqs://`` URL)."""
    lines = [
        f'masters = "{masters or cluster.master_addr}"',
        f'redis = "{redis_url}"',
        f'secret = "{SECRET}"',
        f"produce_topics = {list(produce_topics)!r}".replace("'", '"'),
        "produce_timeout = 20",
        extra,
    ]
    for g in groups:
        lines += [
            "[[groups]]",
            f'name = "{g.name}"',
            f"topics = {list(g.topics)!r}".replace("'", '"'),
            f'mode = "{g.mode}"',
            f'start = "{g.start}"',
            f"lease_ms = {g.lease_ms}",
            f"lease_ms_min = {g.lease_ms_min}",
        ]
    lines += [
        "[[keys]]",
        f'key = "{ADMIN_KEY}"',
        'scopes = ["produce:*", "consume:*", "admin:*"]',
        "[[keys]]",
        f'key = "{READER_KEY}"',
        'scopes = ["consume:*"]',
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


@contextlib.asynccontextmanager
async def replicas(config: Path, count: int) -> AsyncIterator[list[GatewayReplica]]:
    """Start ``count`` replica processes on one config (concurrently); stop them all after."""
    started = [GatewayReplica(config) for _ in range(count)]
    try:
        await asyncio.gather(*(r.start() for r in started))
        yield started
    finally:
        await asyncio.gather(*(r.stop() for r in started), return_exceptions=True)
        for r in started:
            r.cleanup()


async def produce_numbered(
    client: httpx.AsyncClient, topic: str, count: int, batch: int = 500, prefix: str = "n"
) -> dict[str, str]:
    """Send ``prefix<i>`` for i in [0, count) through the batch route; every one must be 200.

    Returns:
        value -> partition key it was stored in.
    """
    stored: dict[str, str] = {}

    async def one(start: int) -> None:
        values = [f"{prefix}{i}" for i in range(start, min(count, start + batch))]
        body = {"messages": [{"value": v} for v in values]}
        r = await client.post(f"/v1/topics/{topic}/messages/batch", json=body, headers=ADMIN)
        assert r.status_code == 200, r.text
        for item in r.json()["results"]:
            stored[values[item["index"]]] = item["partition_key"]

    sem = asyncio.Semaphore(4)

    async def guarded(start: int) -> None:
        async with sem:
            await one(start)

    await asyncio.gather(*(guarded(s) for s in range(0, count, batch)))
    return stored


@dataclass
class Tally:
    """What HTTP consumers saw."""

    delivered: list[str] = field(default_factory=list)
    acked: int = 0
    nacked_msgs: int = 0
    abandoned_msgs: int = 0
    failed_ack_msgs: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    leases: list[tuple[str, int]] = field(default_factory=list)  # (partition_key, redelivery)


async def consume_until(
    clients: Sequence[httpx.AsyncClient],
    group: str,
    want: set[str],
    tally: Tally,
    *,
    consumers: int,
    ack_p: float = 1.0,
    nack_p: float = 0.0,
    timeout: float = 180.0,
    client_id: str | None = None,
    seed: int = 7,
) -> None:
    """Run ``consumers`` fetch loops spread over ``clients`` until every value in ``want`` was
    delivered (at least once) and acked; abandon = neither ack nor nack (the lease expires)."""
    rng = random.Random(seed)
    seen: set[str] = set()
    done = asyncio.Event()

    async def loop(n: int) -> None:
        client = clients[n % len(clients)]
        body: dict[str, Any] = {"wait_ms": 1000}
        if client_id is not None:
            body["client_id"] = client_id
        while not done.is_set():
            try:
                r = await client.post(f"/v1/groups/{group}/fetch", json=body, headers=READER)
            except httpx.TransportError:
                await asyncio.sleep(0.2)
                continue
            tally.statuses[r.status_code] = tally.statuses.get(r.status_code, 0) + 1
            assert r.status_code in (200, 429, 503, 504), r.text
            if r.status_code != 200:
                await asyncio.sleep(0.2)
                continue
            reply = r.json()
            if reply["status"] != "ok":
                await asyncio.sleep(min(0.5, (reply.get("retry_after_ms") or 100) / 1000))
                continue
            values = [m["value"] for m in reply["messages"]]
            token = reply["lease"]["token"]
            tally.leases.append((reply["lease"]["partition_key"], reply["lease"]["redelivery"]))
            roll = rng.random()
            if roll < ack_p:
                a = await client.post(f"/v1/leases/{token}/ack", headers=READER)
                tally.delivered.extend(values)
                if a.status_code == 200:
                    tally.acked += 1
                    seen.update(values)
                else:
                    assert a.status_code in (409, 503), a.text
                    tally.failed_ack_msgs += len(values)
            elif roll < ack_p + nack_p:
                tally.nacked_msgs += len(values)
                tally.delivered.extend(values)
                await client.post(f"/v1/leases/{token}/nack", json={"delay_ms": 0}, headers=READER)
            else:
                tally.abandoned_msgs += len(values)
                tally.delivered.extend(values)
            if want <= seen:
                done.set()

    tasks = [asyncio.create_task(loop(n)) for n in range(consumers)]
    waiter = asyncio.create_task(done.wait())
    try:
        await asyncio.wait([waiter, *tasks], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            if task.done() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
        if not done.is_set():
            missing = sorted(want - seen)
            raise AssertionError(
                f"{len(missing)} never acked, e.g. {missing[:5]}; {tally.statuses}"
            )
    finally:
        for t in [waiter, *tasks]:
            t.cancel()
        await asyncio.gather(waiter, *tasks, return_exceptions=True)


async def lease_one(
    client: httpx.AsyncClient, group: str, timeout: float = 60, **extra: Any
) -> dict[str, Any]:
    """Fetch until a batch comes (``ok``); a retriable 503 (a partition briefly refused by its
    broker) is waited out. Returns the fetch reply."""
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        body = {"wait_ms": 1000, **extra}
        r = await client.post(f"/v1/groups/{group}/fetch", json=body, headers=READER)
        if r.status_code == 503 and r.json()["error"]["retriable"]:
            await asyncio.sleep(0.3)
            continue
        assert r.status_code == 200, r.text
        if r.json()["status"] == "ok":
            reply: dict[str, Any] = r.json()
            return reply
    raise AssertionError(f"no batch was delivered within {timeout} s")


async def metric(client: httpx.AsyncClient, name: str, **labels: str) -> float:
    """The sum of a replica's ``/metrics`` samples ``name`` whose labels include ``labels``."""
    r = await client.get("/metrics")
    assert r.status_code == 200, r.text
    want = [f'{k}="{v}"' for k, v in labels.items()]
    total = 0.0
    for line in r.text.splitlines():
        sample, _, value = line.rpartition(" ")
        base, _, rest = sample.partition("{")
        if base == name and all(w in rest for w in want):
            total += float(value)
    return total


@contextlib.asynccontextmanager
async def gateways(
    config: Path, count: int
) -> AsyncIterator[tuple[list[GatewayReplica], list[httpx.AsyncClient]]]:
    """``count`` replicas on one config and an httpx client for each; all closed after."""
    async with replicas(config, count) as reps, contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(httpx.AsyncClient(base_url=r.url, timeout=30))
            for r in reps
        ]
        yield reps, clients
