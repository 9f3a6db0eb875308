"""``GET /v1/topics/{topic}``'s reader against the in-process FakeCluster: partitions, offsets
that move with produced messages, and a prompt ``tube_unavailable`` when the master is gone."""

from __future__ import annotations

import asyncio
import time

import pytest

from tubemq_aio import Producer
from tubemq_aio.gateway import GatewayConfig
from tubemq_aio.gateway.errors import TubeUnavailableError
from tubemq_aio.gateway.tubemq.topic_offsets import cluster_topic_offsets
from tubemq_aio.testing import FakeCluster
from tubemq_aio.testing._fake_store import INDEX_UNIT


def config(masters: str) -> GatewayConfig:
    return GatewayConfig(
        masters=masters,
        redis="redis://127.0.0.1:1/0",
        secret="s" * 16,
        produce_topics=("t",),
        allow_anonymous=True,
        rpc_timeout=3.0,
    )


async def test_partitions_and_offsets_follow_what_was_produced() -> None:
    async with FakeCluster(topics={"t": 3}) as cluster:
        read = cluster_topic_offsets(config(cluster.master_addr), reuse=0.0)
        before = await read("t")
        assert [p.partition_key for p in before] == ["1:t:0", "1:t:1", "1:t:2"]
        assert all(p.subscribable and p.min_offset <= p.max_offset for p in before)
        async with Producer(cluster.master_addr, topics=["t"]) as producer:
            sent = [await producer.send("t", b"m", key="same") for _ in range(3)]
        assert len({s.partition_key for s in sent}) == 1
        after = {p.partition_key: p for p in await read("t")}
        # The partitions of one store share its index (as on a real broker, docs/testing.md):
        # each reports the store's end, three index records further on.
        grown = {k: p.max_offset - before[int(k[-1])].max_offset for k, p in after.items()}
        assert grown == dict.fromkeys(["1:t:0", "1:t:1", "1:t:2"], 3 * INDEX_UNIT)


async def test_a_dead_master_is_tube_unavailable_within_the_deadline() -> None:
    async with FakeCluster(topics={"t": 1}) as cluster:
        masters = cluster.master_addr
    read = cluster_topic_offsets(config(masters))  # the cluster is gone: nothing listens
    started = time.monotonic()
    with pytest.raises(TubeUnavailableError):
        await read("t")
    assert time.monotonic() - started < 2 * 3.0 + 1.0


async def test_concurrent_reads_share_one_and_an_answer_is_reused_briefly() -> None:
    cluster = FakeCluster(topics={"t": 2})
    await cluster.start()
    try:
        read = cluster_topic_offsets(config(cluster.master_addr), reuse=30.0)
        first, second = await asyncio.gather(read("t"), read("t"))
        assert first == second
        assert len(first) == 2
    finally:
        await cluster.stop()
    assert await read("t") == first  # within reuse: no cluster call (it is gone)
    fresh = cluster_topic_offsets(config(cluster.master_addr), reuse=30.0)
    with pytest.raises(TubeUnavailableError):
        await fresh("t")
