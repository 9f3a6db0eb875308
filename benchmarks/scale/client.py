"""One measured client run of the scale benchmark, in a fresh process; prints one JSON line.

Modes (each against a master started by :mod:`benchmarks.scale.cluster`):

* ``consume``: a server-balanced consumer of ``--topic`` waits until it holds all
  ``--partitions``, then reads ``--messages`` (acking every batch). Reports client CPU seconds
  per 10⁶ messages, wall time, the time of one ``positions()`` call, memory (RSS growth from
  before the start, per partition), tasks and sockets.
* ``idle``: the same on an empty topic: after ``--warmup`` s, the client CPU over ``--seconds``
  as a share of one core, and the fetches a second (``--max-wait`` sets
  ``msg_not_found_max_wait``; equal to 0.4 it is the official clients' fixed period). Then
  ``--samples`` times, at a random moment of the partitions' longest rest, one message is sent
  and the time until the consumer has it is taken: the first-message latency of an idle
  partition (median and max).
* ``positions()`` (consume, connect): the call, and then reading every position it returned.
* ``connect``: a client-balanced consumer connects every partition one by one: CPU and wall,
  and the fetches sent meanwhile. With ``--rest S`` the partitions connected so far are polled
  every S seconds at most (``msg_not_found_wait`` and ``msg_not_found_max_wait``), so the
  figure is the connects' own cost, without the idle polling the ``idle`` mode measures.
* ``produce``: a producer sends ``--messages`` round robin over ``--topics`` topics ``t0``...
* ``group``: ``--members`` consumers of one group split ``--topic``: time until every partition
  is held exactly once (each member its share), then ``--seconds`` idle (between a
  ``{"phase": "settled"}`` and a ``{"phase": "idle_done"}`` line, for the parent to count the
  master's requests), and the time until the others hold them all again after one member left.

Run: ``python -m benchmarks.scale.client MODE --master ADDR [options]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tubemq_aio import ClientBalancedConsumer, Consumer, Producer

BODY_SIZE = 32
#: The shortest master heartbeat the SDK accepts: groups settle in seconds, not minutes.
HEARTBEAT = 1.0


def cpu_seconds() -> float:
    """User + system CPU seconds of this process so far."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def rss_kb() -> int:
    """Resident memory now (KB), from ``/proc/self/status`` (0 where it is missing)."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def sockets() -> int:
    """Open sockets of this process (``/proc/self/fd`` links; 0 where it is missing)."""
    fds = Path("/proc/self/fd")
    if not fds.exists():
        return 0
    count = 0
    for fd in fds.iterdir():
        try:
            count += os.readlink(fd).startswith("socket:")
        except OSError:
            continue
    return count


async def held_all(consumers: Sequence[Consumer], partitions: int, deadline: float) -> float:
    """Seconds until the consumers hold ``partitions`` partitions exactly once between them,
    each of them its share (at least ``partitions // len(consumers)``).

    Raises:
        TimeoutError: not within ``deadline`` (``time.monotonic()``).
    """
    began = time.monotonic()
    while True:
        held = [c.assignment() for c in consumers]
        keys = [k for h in held for k in h]
        fair = min(len(h) for h in held) >= partitions // len(consumers)
        if fair and len(keys) == partitions and len(set(keys)) == partitions:
            return time.monotonic() - began
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(set(keys))} of {partitions} partitions held")
        await asyncio.sleep(0.05)


def consumer(ns: argparse.Namespace, **options: Any) -> Consumer:
    """A server-balanced consumer of the benchmark topic from the earliest offset."""
    return Consumer(
        ns.master,
        group=ns.group,
        topics=[ns.topic],
        consume_from="earliest",
        heartbeat_interval=HEARTBEAT,
        telemetry=False,
        **options,
    )


async def consume(ns: argparse.Namespace) -> dict[str, Any]:
    rss0, t0 = rss_kb(), time.monotonic()
    async with consumer(ns, max_prefetch_batches=16) as c:
        assign_s = await held_all([c], ns.partitions, t0 + ns.timeout)
        positions_s, positions_read_s = time_positions(c)
        rss1 = rss_kb()
        got, cpu0, wall0 = 0, cpu_seconds(), time.perf_counter()
        while got < ns.messages:
            batch = await c.getmany(timeout=ns.timeout)
            if not batch:
                raise TimeoutError(f"{got} of {ns.messages} messages in {ns.timeout} s")
            got += len(batch)
            await batch.ack()
        cpu, wall = cpu_seconds() - cpu0, time.perf_counter() - wall0
        tasks, socks = len(asyncio.all_tasks()), sockets()
        rss2 = rss_kb()
        fetches = c.stats.fetches
    return {
        "assign_s": round(assign_s, 3),
        "messages": got,
        "cpu_s": round(cpu, 3),
        "wall_s": round(wall, 3),
        "cpu_s_per_million": round(cpu / got * 1e6, 3),
        "messages_per_s": round(got / wall),
        "fetches": fetches,
        "positions_s": round(positions_s, 5),
        "positions_read_s": round(positions_read_s, 5),
        "rss_kb_held": rss1 - rss0,
        "rss_kb_end": rss2 - rss0,
        "kb_per_partition": round((rss1 - rss0) / ns.partitions, 2),
        "tasks": tasks,
        "sockets": socks,
    }


async def idle(ns: argparse.Namespace) -> dict[str, Any]:
    t0 = time.monotonic()
    options: dict[str, Any] = {}
    if ns.max_wait is not None:
        options["msg_not_found_max_wait"] = ns.max_wait
    async with consumer(ns, **options) as c:
        assign_s = await held_all([c], ns.partitions, t0 + ns.timeout)
        await asyncio.sleep(ns.warmup)
        cpu0, fetches0, wall0 = cpu_seconds(), c.stats.fetches, time.perf_counter()
        await asyncio.sleep(ns.seconds)
        cpu, wall = cpu_seconds() - cpu0, time.perf_counter() - wall0
        fetches = c.stats.fetches - fetches0
        ceiling = c.config.idle_ceiling
        waits = await first_messages(c, ns, ceiling)
    return {
        "assign_s": round(assign_s, 3),
        "max_wait_s": ceiling,
        "seconds": round(wall, 3),
        "core_share": round(cpu / wall, 4),
        "fetches_per_s": round(fetches / wall, 1),
        "first_message_s": [round(w, 3) for w in waits],
        "first_message_median_s": round(statistics.median(waits), 3) if waits else None,
        "first_message_max_s": round(max(waits), 3) if waits else None,
    }


async def first_messages(c: Consumer, ns: argparse.Namespace, ceiling: float) -> list[float]:
    """``ns.samples`` times: at a random moment of an idle partition's longest rest, send one
    message; the seconds until the consumer holds it (a seeded draw, the same every run)."""
    draw = random.Random(34)
    waits: list[float] = []
    if ns.samples <= 0:
        return waits
    async with Producer(ns.master, topics=[ns.topic], telemetry=False) as producer:
        for _ in range(ns.samples):
            await asyncio.sleep(draw.uniform(0.0, ceiling))
            sent = time.perf_counter()
            await producer.send(ns.topic, b"first")
            batch = await c.getmany(timeout=ns.timeout)
            if not batch:
                raise TimeoutError(f"no message within {ns.timeout} s")
            waits.append(time.perf_counter() - sent)
            await batch.ack()
    return waits


def time_positions(c: Consumer | ClientBalancedConsumer) -> tuple[float, float]:
    """Seconds of one ``positions()`` call, and then of reading every position it returned."""
    began = time.perf_counter()
    positions = c.positions()
    called = time.perf_counter()
    lag = sum(p.lag for p in positions.values())
    assert lag >= 0
    return called - began, time.perf_counter() - called


async def connect(ns: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if ns.rest is not None:
        options.update(msg_not_found_wait=ns.rest, msg_not_found_max_wait=ns.rest)
    async with ClientBalancedConsumer(
        ns.master,
        group=ns.group,
        topics=[ns.topic],
        consume_from="earliest",
        telemetry=False,
        **options,
    ) as c:
        keys = [m.partition_key for m in await c.partitions()]
        assert len(keys) == ns.partitions
        cpu0, wall0, fetches0 = cpu_seconds(), time.perf_counter(), c.stats.fetches
        for key in keys:
            await c.connect(key)
        cpu, wall = cpu_seconds() - cpu0, time.perf_counter() - wall0
        fetches = c.stats.fetches - fetches0
        held = len(c.positions())
        positions_s, positions_read_s = time_positions(c)
    return {
        "connected": held,
        "cpu_s": round(cpu, 3),
        "wall_s": round(wall, 3),
        "cpu_ms_per_connect": round(cpu / held * 1000, 4),
        "fetches": fetches,
        "rest_s": ns.rest,
        "positions_s": round(positions_s, 5),
        "positions_read_s": round(positions_read_s, 5),
    }


async def produce(ns: argparse.Namespace) -> dict[str, Any]:
    topics = [f"t{i}" for i in range(ns.topics)]
    body = bytes(97 + i % 26 for i in range(BODY_SIZE))
    window = 256
    async with Producer(ns.master, topics=topics, telemetry=False) as p:

        async def run(count: int) -> None:
            sent = 0

            async def worker() -> None:
                nonlocal sent
                while sent < count:
                    topic = topics[sent % len(topics)]
                    sent += 1
                    await p.send(topic, body)

            await asyncio.gather(*(worker() for _ in range(window)))

        await run(max(ns.messages // 10, window))  # warm up: every topic's partitions known
        cpu0, wall0 = cpu_seconds(), time.perf_counter()
        await run(ns.messages)
        cpu, wall = cpu_seconds() - cpu0, time.perf_counter() - wall0
    return {
        "messages": ns.messages,
        "cpu_s": round(cpu, 3),
        "cpu_s_per_million": round(cpu / ns.messages * 1e6, 3),
        "messages_per_s": round(ns.messages / wall),
    }


async def group(ns: argparse.Namespace) -> dict[str, Any]:
    members = [consumer(ns) for _ in range(ns.members)]
    t0 = time.monotonic()
    try:
        await asyncio.gather(*(m.start() for m in members))
        split_s = await held_all(members, ns.partitions, t0 + ns.timeout)
        shares = sorted(len(m.assignment()) for m in members)
        # The parent counts the master's requests between these two lines (idle group).
        print(json.dumps({"phase": "settled"}), flush=True)
        await asyncio.sleep(ns.seconds)
        print(json.dumps({"phase": "idle_done"}), flush=True)
        await members[-1].close()
        t1 = time.monotonic()
        reassign_s = await held_all(members[:-1], ns.partitions, t1 + ns.timeout)
    finally:
        await asyncio.gather(*(m.close() for m in members))
    return {
        "split_s": round(split_s, 3),
        "shares": [shares[0], shares[-1]],
        "reassign_s": round(reassign_s, 3),
    }


MODES = {"consume": consume, "idle": idle, "connect": connect, "produce": produce, "group": group}


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale.client")
    parser.add_argument("mode", choices=sorted(MODES))
    parser.add_argument("--master", required=True)
    parser.add_argument("--topic", default="scale")
    parser.add_argument("--group", default="scale")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--topics", type=int, default=1)
    parser.add_argument("--members", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=10.0, help="idle, group: seconds idle")
    parser.add_argument("--warmup", type=float, default=8.0, help="idle: seconds before")
    parser.add_argument("--max-wait", type=float, default=None, help="msg_not_found_max_wait")
    parser.add_argument("--samples", type=int, default=0, help="idle: first-message samples")
    parser.add_argument("--rest", type=float, default=None, help="connect: polling period")
    parser.add_argument("--timeout", type=float, default=120.0)
    return parser.parse_args(list(argv))


def main(argv: Sequence[str]) -> int:
    """Entry point: run one mode and print its figures as one JSON line."""
    ns = parse_args(argv)
    result = asyncio.run(MODES[ns.mode](ns))
    print(json.dumps({"mode": ns.mode, **result}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
