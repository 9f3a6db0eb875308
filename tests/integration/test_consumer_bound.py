"""Bound ("effectively-once") consumption against the real cluster: exact restart offsets."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict

import pytest

from tubemq_aio import Producer
from tubemq_aio.consumer import Consumer
from tubemq_aio.consumer.bound import BoundConsume
from tubemq_aio.errors import BoundConsumeError, ServerError
from tubemq_aio.testing import LocalCluster

HEARTBEAT = 2.0
COUNT = 60


def bound_consumer(cluster: LocalCluster, group: str, topic: str, bound: BoundConsume) -> Consumer:
    """A bound consumer; partitions without a requested offset start at the end."""
    return Consumer(
        cluster.master_addr,
        group=group,
        topics=[topic],
        consume_from="latest",
        heartbeat_interval=HEARTBEAT,
        register_attempts=1,
        bound=bound,
    )


async def drain(c: Consumer, expected: set[bytes], timeout: float = 30) -> list[bytes]:
    """Collect until every expected body arrived, then 2 s more to catch extras."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    quiet_until: float | None = None
    while True:
        now = time.monotonic()
        if quiet_until is None:
            assert now < deadline, f"missing {sorted(expected - set(got))[:10]}: {c!r}"
            if expected <= set(got):
                quiet_until = now + 2.0
        elif now >= quiet_until:
            return got
        try:
            async with await c.getmany(timeout=0.5) as batch:
                got.extend(m.body for m in batch)
        except TimeoutError:
            pass


async def test_bound_sessions_restart_exactly_at_offsets(cluster: LocalCluster, topic: str) -> None:
    """Two bound sessions, each starting every partition at a chosen message: no loss, no dup."""
    by_part: dict[str, list[tuple[int, bytes]]] = defaultdict(list)
    async with Producer(cluster.master_addr, topics=[topic]) as producer:
        for i in range(COUNT):
            body = f"b-{i}".encode()
            res = await producer.send(topic, body)
            assert res.append_offset >= 0
            by_part[res.partition_key].append((res.append_offset, body))
    assert len(by_part) >= 2
    group = f"gb_{topic}"

    async def session(key: str, k: int) -> None:
        offsets, expected = {}, set()
        for part, items in by_part.items():
            idx = min(k, len(items) - 1)
            offsets[part] = items[idx][0]
            expected |= {body for _, body in items[idx:]}
        c = bound_consumer(cluster, group, topic, BoundConsume(key, 1, offsets=offsets))
        try:
            await c.start()
            if key == "s1":  # a member of another session is refused by the master (427)
                other = bound_consumer(cluster, group, topic, BoundConsume("sX", 1))
                with pytest.raises(ServerError) as info:
                    await other.start()
                await other.close()
                assert info.value.err_code == 427
            got = await drain(c, expected)
        finally:
            await c.close()
        assert len(got) == len(set(got)), "duplicates"
        assert set(got) == expected

    await session("s1", 3)  # forward from a stored-nothing group
    await asyncio.sleep(0.5)
    await session("s2", 1)  # a new session rewinds behind the stored group offsets


async def test_bound_bad_input_is_typed(cluster: LocalCluster, topic: str) -> None:
    """Malformed bound offsets are refused at construction, before any connection."""
    with pytest.raises(BoundConsumeError):
        BoundConsume("s", 1, offsets={"not-a-key": 0})
    with pytest.raises(BoundConsumeError):
        BoundConsume("s", 1, offsets={f"1:{topic}:0": -5})
    with pytest.raises(BoundConsumeError):
        bound_consumer(cluster, "gbad", topic, BoundConsume("s", 1, offsets={"1:other:0": 0}))
