"""The consumers through FaultProxies against the fake cluster, one fault at a time.

For every fault: each ``getmany`` ends within its deadline with a batch (maybe empty) or a
typed error, consumption resumes once the fault is healed, every produced message arrives
(at-least-once), the group's committed offsets reach the end, and nothing leaks.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.support.fault_env import FaultEnv, apply_fault, bounded, fault_env, fault_table, restore
from tubemq_aio import ClientBalancedConsumer, Consumer, MessageBatch, Producer

GET_TIMEOUT = 0.5
MESSAGES = 400
BATCH = 8  # small fetches, so the fault hits in the middle of the stream

FAULTS = fault_table(bandwidth="down", bandwidth_cap=100_000, reset="down", reset_after=20_000)


async def _produce(env: FaultEnv) -> set[bytes]:
    bodies = {f"c{i}".encode().ljust(500, b".") for i in range(MESSAGES)}
    async with Producer(env.cluster.master_addr, topics=["demo"]) as producer:  # no proxy
        await asyncio.gather(*(producer.send("demo", b) for b in bodies))
    return bodies


async def _take(consumer: Consumer | ClientBalancedConsumer, got: list[bytes]) -> None:
    outcome = await bounded(consumer.getmany(timeout=GET_TIMEOUT), GET_TIMEOUT)
    if isinstance(outcome, MessageBatch):
        got.extend(m.body for m in outcome)
        await bounded(outcome.ack(), 10)  # may fail typed under a fault: redelivered later


async def _consume_through(
    env: FaultEnv, name: str, consumer: Consumer | ClientBalancedConsumer, sent: set[bytes]
) -> list[bytes]:
    got: list[bytes] = []
    for _ in range(4):
        await _take(consumer, got)
    assert len(set(got)) < len(sent) / 2, "the fault must hit a stream still flowing"
    await apply_fault(env, FAULTS[name])
    end = time.monotonic() + 2.0
    while time.monotonic() < end:
        await _take(consumer, got)
    await restore(env, name)
    end = time.monotonic() + 60
    while not sent <= set(got):
        assert time.monotonic() < end, f"{len(sent - set(got))} messages never arrived"
        await _take(consumer, got)
    return got


async def _committed_all(env: FaultEnv, group: str) -> None:
    end = time.monotonic() + 30
    while env.cluster.committed_messages(group, "demo") < MESSAGES:
        assert time.monotonic() < end, env.cluster.committed_messages(group, "demo")
        await asyncio.sleep(0.1)


@pytest.mark.parametrize("name", sorted(FAULTS))
async def test_consumer_under_fault(name: str) -> None:
    async with fault_env(brokers=2, max_batch=BATCH) as env:
        sent = await _produce(env)
        consumer = Consumer(
            env.master_addr,
            group="gf",
            topics=["demo"],
            consume_from="earliest",
            heartbeat_interval=1,
            confirm_timeout=5,
            rpc_timeout=3,
        )
        await bounded(consumer.start(), 10)
        try:
            got = await _consume_through(env, name, consumer, sent)
        finally:
            await bounded(consumer.close(), 15)
        assert set(got) == sent
        await _committed_all(env, "gf")


@pytest.mark.parametrize("name", ["reset after 20 KB", "blackhole", "broker killed"])
async def test_client_balanced_consumer_under_fault(name: str) -> None:
    async with fault_env(brokers=2, max_batch=BATCH) as env:
        sent = await _produce(env)
        consumer = ClientBalancedConsumer(
            env.master_addr,
            group="gcb",
            topics=["demo"],
            source_count=1,
            node_id=0,
            consume_from="earliest",
            heartbeat_interval=1,
            confirm_timeout=5,
            rpc_timeout=3,
            reconnect_delay=0.05,
            reconnect_delay_max=0.5,
        )
        assert consumer.config.reconnect_delay == 0.05
        await bounded(consumer.start(), 10)
        try:
            metas = await consumer.partitions()
            for meta in metas:
                await bounded(consumer.connect(meta.partition_key), 10)
            got = await _consume_through(env, name, consumer, sent)
            # Partitions lost with their broker were connected again by the consumer itself.
            assert consumer.assignment() == sorted(m.partition_key for m in metas)
        finally:
            await bounded(consumer.close(), 15)
        assert set(got) == sent
        stats = consumer.stats
        assert stats.partitions_reconnected == stats.partitions_lost
        if name == "broker killed":
            assert stats.partitions_lost > 0
        await _committed_all(env, "gcb")
