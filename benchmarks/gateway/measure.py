"""One measurement each: wrk runs, HTTP batch produce, HTTP consume, and the SDK equivalents."""

from __future__ import annotations

import asyncio
import os
import re
import resource
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson

from benchmarks.gateway.lean_http import LeanClient
from tubemq_aio import ClientBalancedConsumer, Producer

BODY = "x" * 100
_WRK_SCRIPT = """wrk.method = "POST"
wrk.body = '{"value": "%s"}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer %s"
"""
_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0}


@dataclass
class WrkResult:
    """Requests/s, latency percentiles (ms) and wrk's own CPU seconds of one wrk run."""

    rps: float
    p50_ms: float
    p99_ms: float
    non_2xx: int
    client_cpu_s: float


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds used so far by process ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):  # it ended meanwhile
                continue
            tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid`` and every live descendant (uvicorn's workers under its parent)."""
    tree, total, todo = _children(), 0.0, [pid]
    while todo:
        current = todo.pop()
        try:
            total += cpu_seconds(current)
        except OSError:
            continue
        todo.extend(tree.get(current, ()))
    return total


def machine_busy_seconds() -> tuple[float, float]:
    """(busy, all) CPU seconds of the whole machine since boot, summed over its cores.

    Busy is every state but idle and iowait; taken around a run it tells how many of the
    machine's cores that run kept busy, whoever used them (the server, wrk, the broker, Redis).
    """
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + fields[4]
    return (sum(fields) - idle) / tick, sum(fields) / tick


def own_cpu_seconds() -> float:
    """User + system CPU seconds of this process (the benchmark's Python clients)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s)", text)
    if m is None:
        raise ValueError(f"cannot read wrk latency {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


async def wrk(url: str, key: str, seconds: int, connections: int = 32) -> WrkResult:
    """POST a 100-byte message to ``url`` with wrk (2 threads) for ``seconds``."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(_WRK_SCRIPT % (BODY, key))
    reaped = _children_cpu_seconds()  # wrk is the only child reaped meanwhile
    try:
        proc = await asyncio.create_subprocess_exec(
            "wrk",
            "-t2",
            f"-c{connections}",
            f"-d{seconds}s",
            "--latency",
            "-s",
            script.name,
            url,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), seconds + 60)
    finally:
        os.unlink(script.name)
    text = out.decode()
    if proc.returncode != 0:
        raise RuntimeError(f"wrk failed: {err.decode()}{text}")
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))  # type: ignore[union-attr]
    # the "Latency Distribution" lines; anchored, since thread stats end in e.g. "85.50%"
    p50 = _ms(re.search(r"^\s+50%\s+(\S+)\s*$", text, re.M).group(1))  # type: ignore[union-attr]
    p99 = _ms(re.search(r"^\s+99%\s+(\S+)\s*$", text, re.M).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    client = _children_cpu_seconds() - reaped
    return WrkResult(rps, p50, p99, int(bad.group(1)) if bad else 0, client)


async def http_batch_produce(
    url: str, key: str, topic: str, seconds: float, batch: int = 500, parallel: int = 4
) -> float:
    """Messages/s through ``POST …/messages/batch`` (``parallel`` requests in flight, each on
    its own keep-alive :class:`~benchmarks.gateway.lean_http.LeanClient` connection; each
    request's body is encoded with orjson and each answer parsed, as a user's client would)."""
    sent = 0
    deadline = time.monotonic() + seconds
    body = {"messages": [{"value": BODY}] * batch}
    headers = {"Authorization": f"Bearer {key}"}

    async def loop() -> None:
        nonlocal sent
        async with LeanClient(url, headers) as client:
            while time.monotonic() < deadline:
                r = await client.post(f"/v1/topics/{topic}/messages/batch", json=body)
                if r.status_code != 200:
                    raise RuntimeError(
                        f"batch produce answered {r.status_code}: {r.content[:300]!r}"
                    )
                orjson.loads(r.content)
                sent += batch

    began = time.monotonic()
    await asyncio.gather(*(loop() for _ in range(parallel)))
    return sent / (time.monotonic() - began)


async def sdk_send(masters: str, topic: str, seconds: float, parallel: int = 512) -> float:
    """Messages/s of the SDK's own ``Producer.send`` (``parallel`` sends in flight)."""
    sent = 0
    payload = BODY.encode()
    async with Producer(masters, topics=[topic]) as producer:
        deadline = time.monotonic() + seconds

        async def loop() -> None:
            nonlocal sent
            while time.monotonic() < deadline:
                await producer.send(topic, payload)
                sent += 1

        began = time.monotonic()
        await asyncio.gather(*(loop() for _ in range(parallel)))
        return sent / (time.monotonic() - began)


async def http_consume(
    url: str,
    key: str,
    group: str,
    count: int,
    consumers: int = 4,
    timeout: float = 300,
    max_messages: int | None = None,
) -> tuple[float, int]:
    """Messages/s through fetch → ack (acks piggy-backed on the next fetch) until ``count``,
    and how many acks went out alone at the end (one per consumer left holding a lease).

    ``max_messages`` None leaves the gateway's default. Each consumer has its own keep-alive
    connection (:class:`~benchmarks.gateway.lean_http.LeanClient`, the cheapest honest load:
    see "The consume client" in docs/benchmarks.md) and parses each whole answer with orjson.
    """
    got = last_acks = 0
    done = asyncio.Event()
    headers = {"Authorization": f"Bearer {key}"}

    async def loop() -> None:
        nonlocal got, last_acks
        pending: list[str] = []
        async with LeanClient(url, headers) as client:
            while not done.is_set():
                body: dict[str, object] = {"wait_ms": 500}
                if max_messages is not None:
                    body["max_messages"] = max_messages
                if pending:
                    body["ack"] = pending
                r = await client.post(f"/v1/groups/{group}/fetch", json=body)
                if r.status_code != 200:
                    raise RuntimeError(f"fetch answered {r.status_code}: {r.content[:300]!r}")
                reply = orjson.loads(r.content)
                pending = []
                if reply["status"] == "ok":
                    got += len(reply["messages"])
                    pending = [reply["lease"]["token"]]
                    if got >= count:
                        done.set()
            if pending:
                await client.post(f"/v1/leases/{pending[0]}/ack")
                last_acks += 1

    began = time.monotonic()
    tasks = [asyncio.create_task(loop()) for _ in range(consumers)]
    try:
        await asyncio.wait_for(done.wait(), timeout)
    finally:
        elapsed = time.monotonic() - began
        done.set()
        await asyncio.gather(*tasks)
    return got / elapsed, last_acks


async def sdk_consume(
    masters: str, topic: str, group: str, count: int, timeout: float = 300
) -> float:
    """Messages/s of the SDK's client-balanced consumer reading ``count`` from the start."""
    async with ClientBalancedConsumer(
        masters, group=group, topics=[topic], source_count=1, node_id=0, consume_from="earliest"
    ) as consumer:
        began = time.monotonic()
        for meta in await consumer.partitions():
            await consumer.connect(meta.partition_key)
        got = 0

        async def drain() -> None:
            nonlocal got
            async for _msg in consumer:
                got += 1
                if got >= count:
                    return

        await asyncio.wait_for(drain(), timeout)
        return got / (time.monotonic() - began)


async def http_fetch_then_ack(url: str, key: str, group: str, pairs: int) -> int:
    """``pairs`` times: a fetch without piggy-backed acks, then ``POST …/ack`` of its lease.

    Returns how many standalone acks were sent (fetches that found nothing send none).
    """
    headers = {"Authorization": f"Bearer {key}"}
    acked = 0
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        for _ in range(pairs):
            r = await client.post(f"/v1/groups/{group}/fetch", json={}, headers=headers)
            reply = orjson.loads(r.content)
            if r.status_code != 200:
                raise RuntimeError(f"fetch answered {r.status_code}: {r.text[:300]}")
            if reply["status"] == "ok":
                token = reply["lease"]["token"]
                a = await client.post(f"/v1/leases/{token}/ack", headers=headers)
                if a.status_code != 200:
                    raise RuntimeError(f"ack answered {a.status_code}: {a.text[:300]}")
                acked += 1
    return acked
