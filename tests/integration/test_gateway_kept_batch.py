"""The kept batch on the real cluster: what the broker does with a batch left in flight, and two
gateway replicas of one deployment (one shared consumer id) reading one partition by turns, one
of them dropped while it holds a kept batch. Every message arrives once per ack, in order."""

from __future__ import annotations

import uuid

from tests.support.gateway_engine_support import running_service
from tubemq_aio import Producer
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.engine.service import ConsumeService
from tubemq_aio.gateway.tubemq.tube_group import TubeGroup
from tubemq_aio.testing import LocalCluster, RedisServer

_BODY_BYTES = 150_000  # a broker batch holds a few of them


async def _produce(cluster: LocalCluster, topic: str, n: int) -> list[str]:
    values = [f"v{i:03d}" for i in range(n)]
    async with Producer(cluster.master_addr, topics=[topic]) as producer:
        for value in values:
            await producer.send(topic, value.ljust(_BODY_BYTES, ".").encode())
    return values


async def test_an_in_flight_batch_belongs_to_the_group_not_to_the_session(
    cluster: LocalCluster, topic: str
) -> None:
    await _produce(cluster, topic, 12)
    group, deployment = f"gwk_{uuid.uuid4().hex[:8]}", f"k-{uuid.uuid4().hex[:6]}"
    a = TubeGroup(masters=cluster.master_addr, group=group, topics=[topic], deployment=deployment)
    b = TubeGroup(masters=cluster.master_addr, group=group, topics=[topic], deployment=deployment)
    try:
        await a.start()
        await b.start()
        key = (await a.partitions(force=True))[0]
        await b.partitions(force=True)
        pa, pb = await a._partition(key), await b._partition(key)
        assert (await a.register(key, 0))[0] == 0
        get_a = a._session().broker.get_message
        get_b = b._session().broker.get_message
        first = await get_a(pa, last_pack_consumed=False, esc_flow_ctrl=False)
        assert first.success
        assert first.curr_offset == 0
        # lastPackConsumed=False: the batch in flight is not committed; the read starts again
        again = await get_a(pa, last_pack_consumed=False, esc_flow_ctrl=False)
        assert again.curr_offset == 0
        # the other replica's session (same consumer id) reads from the committed offset too
        other = await get_b(pb, last_pack_consumed=False, esc_flow_ctrl=False)
        assert other.curr_offset == 0
        assert other.messages[0].payload == first.messages[0].payload
        # lastPackConsumed=True from either session commits what the last read left in flight
        after_b = await get_b(pb, last_pack_consumed=True, esc_flow_ctrl=False)
        assert after_b.success
        end_b = after_b.curr_offset
        assert end_b > 0
        after_a = await get_a(pa, last_pack_consumed=True, esc_flow_ctrl=False)
        assert after_a.success
        assert after_a.curr_offset > end_b  # A committed the batch B's session read
        # a commit with false drops the batch in flight: the committed offset stays put
        kept = await a._session().broker.commit(pa, consumed=False)
        assert kept.curr_offset == after_a.curr_offset
        # at the end, a 404 after lastPackConsumed=True carries no offset; a commit says where
        while True:
            got = await get_a(pa, last_pack_consumed=True, esc_flow_ctrl=False)
            if not got.success:
                break
        assert got.err_code == 404
        assert got.curr_offset < 0
        done = await a._session().broker.commit(pa, consumed=True)
        assert done.curr_offset == done.max_offset
    finally:
        await a.close()
        await b.close()


async def _one(service: ConsumeService, group: str) -> tuple[list[str], object]:
    outcome = await service.fetch(group, wait_ms=3000, lease_ms=60_000, max_messages=1)
    assert outcome.status == "ok", outcome
    assert outcome.lease is not None
    return [m.body.decode().split(".")[0] for m in outcome.messages], outcome.lease.key


async def test_two_replicas_by_turns_and_one_dropped_holding_a_kept_batch(
    cluster: LocalCluster, topic: str, redis: RedisServer
) -> None:
    values = await _produce(cluster, topic, 24)
    spec = GroupSpec(name=f"gwk_{uuid.uuid4().hex[:8]}", topics=(topic,), lease_ms=60_000)
    deployment = f"k-{uuid.uuid4().hex[:6]}"
    got: list[str] = []
    async with (
        running_service(cluster.master_addr, redis.url, spec, deployment=deployment) as r1,
        running_service(cluster.master_addr, redis.url, spec, deployment=deployment) as r2,
    ):
        # r1 alone: after its first read, each fetch serves what the last one read ahead
        for _ in range(4):
            batch, key = await _one(r1, spec.name)
            got += batch
            assert await r1.settle(key, "ack") == "acked"  # type: ignore[arg-type]
        assert r1.stats().kept_served >= 2
        # by turns: a kept batch is never served after the other replica's read
        served = r1.stats().kept_served + r2.stats().kept_served
        for i in range(4):
            replica = r2 if i % 2 == 0 else r1
            batch, key = await _one(replica, spec.name)
            got += batch
            assert await replica.settle(key, "ack") == "acked"  # type: ignore[arg-type]
        assert r1.stats().kept_served + r2.stats().kept_served == served
        # a nack: the batch comes again, not the one read ahead after it
        batch, key = await _one(r1, spec.name)
        assert await r1.settle(key, "nack") == "nacked"  # type: ignore[arg-type]
        again, key = await _one(r1, spec.name)
        assert again == batch
        got += again
        assert await r1.settle(key, "ack") == "acked"  # type: ignore[arg-type]
        r1._reader.close()  # r1 drops what it kept (a crash would)
        while len(got) < len(values):
            batch, key = await _one(r2, spec.name)
            got += batch
            assert await r2.settle(key, "ack") == "acked"  # type: ignore[arg-type]
    assert got == values  # every message once, in order
