"""The kept batch on the real cluster: what the broker does with a batch left in flight, and two
gateway replicas of one deployment (one shared consumer id) reading one partition by turns, one
of them dropped while it holds a kept batch. Every message arrives once per ack, in order."""

from __future__ import annotations

import asyncio
import uuid

from tests.support.gateway_engine_support import running_service
from tubemq_aio import Producer
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.engine.data import FetchQuery
from tubemq_aio.gateway.engine.service import ConsumeService
from tubemq_aio.gateway.leases.lease_key import LeaseKey
from tubemq_aio.gateway.tubemq.tube_group import TubeGroup, TubeReach
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
    await _produce(cluster, topic, 60)  # about 10 per partition: several broker batches
    group, deployment = f"gwk_{uuid.uuid4().hex[:8]}", f"k-{uuid.uuid4().hex[:6]}"
    a = TubeGroup(TubeReach(cluster.master_addr, deployment), group=group, topics=[topic])
    b = TubeGroup(TubeReach(cluster.master_addr, deployment), group=group, topics=[topic])
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
        # the 404 itself committed the last batch: a commit that drops any delta finds it done
        done = await a._session().broker.commit(pa, consumed=False)
        assert done.curr_offset == done.max_offset
    finally:
        await a.close()
        await b.close()


async def _one(service: ConsumeService, group: str) -> tuple[str, list[str], LeaseKey]:
    outcome = await service.fetch(
        FetchQuery(group, client_id=None, wait_ms=8000, lease_ms=60_000, max_messages=1)
    )
    assert outcome.status == "ok", outcome
    assert outcome.lease is not None
    values = [m.body.decode().split(".")[0] for m in outcome.messages]
    return outcome.lease.key.partition_key, values, outcome.lease.key


async def test_two_replicas_by_turns_and_one_dropped_holding_kept_batches(
    cluster: LocalCluster, topic: str, redis: RedisServer
) -> None:
    values = await _produce(cluster, topic, 72)
    spec = GroupSpec(name=f"gwk_{uuid.uuid4().hex[:8]}", topics=(topic,), lease_ms=60_000)
    on = {"deployment": f"k-{uuid.uuid4().hex[:6]}", "kept_batch_bytes": 1 << 25}
    got: dict[str, list[str]] = {}  # partition -> values acked, in order

    async def take(replica: ConsumeService, action: str = "ack") -> tuple[str, list[str]]:
        p, batch, key = await _one(replica, spec.name)
        done = await replica.settle(key, "ack" if action == "ack" else "nack")
        assert done == ("acked" if action == "ack" else "nacked")
        if action == "ack":
            got.setdefault(p, []).extend(batch)
        return p, batch

    async with (
        running_service(cluster.master_addr, redis.url, spec, **on) as r1,
        running_service(cluster.master_addr, redis.url, spec, **on) as r2,
    ):
        # r1 alone: once it has read every partition, a fetch serves what the last read of
        # that partition kept
        for _ in range(8):
            await take(r1)
        assert r1.stats().kept_served >= 1
        # by turns, and a nack: the nacked batch comes again, not the one kept after it
        for i in range(6):
            await take(r2 if i % 2 == 0 else r1)
        p, nacked = await take(r1, "nack")
        again: list[str] = []
        while True:
            q, again = await take(r1)
            if q == p:
                break
        assert again == nacked
        r1._reader.close()  # r1 loses what it kept (as a crash would)
        for _ in range(3):
            await take(r2)
        # r1 closes right after an answer, its read-ahead of that partition in flight: the
        # read is aborted with it, and r2 reads that partition once the mark's deadline passed
        await take(r1)
        await r1.close()
        assert r1.tasks.tasks == []
        while sum(map(len, got.values())) < len(values):
            await take(r2)
        kept = r1.stats().kept_served + r2.stats().kept_served
        assert kept >= 1
        ahead = [r.stats() for r in (r1, r2)]
        assert sum(s.read_aheads_kept for s in ahead) >= kept
        assert sum(s.read_aheads_aborted for s in ahead) == 0  # a broker that answers in time
    # every message once, each partition in the order it was produced
    assert sorted(v for batch in got.values() for v in batch) == values
    for batch in got.values():
        assert batch == sorted(batch)


async def _drain_counting(
    cluster: LocalCluster, redis: RedisServer, topic: str, kept_batch_bytes: int, n: int
) -> tuple[dict[str, list[int]], int, int, int]:
    """Read ``topic`` to its end with one replica; (values by partition, fetches with messages,
    their broker calls, batches served from the read-ahead)."""
    spec = GroupSpec(name=f"gwr_{uuid.uuid4().hex[:8]}", topics=(topic,), lease_ms=60_000)
    on = {"deployment": f"r-{uuid.uuid4().hex[:6]}", "kept_batch_bytes": kept_batch_bytes}
    got: dict[str, list[int]] = {}
    async with running_service(cluster.master_addr, redis.url, spec, **on) as replica:
        empty = 0
        deadline = asyncio.get_running_loop().time() + 120
        while empty < 3:  # past the end: each partition answers nothing
            assert asyncio.get_running_loop().time() < deadline, f"{len(got)} partitions read"
            outcome = await replica.fetch(
                FetchQuery(spec.name, client_id=None, wait_ms=0, lease_ms=60_000, max_messages=1000)
            )
            if outcome.status != "ok" or not outcome.messages:
                empty += sum(map(len, got.values())) >= n
                continue
            assert outcome.lease is not None
            batch = [int(m.body[1:7]) for m in outcome.messages]
            got.setdefault(outcome.lease.key.partition_key, []).extend(batch)
            assert await replica.settle(outcome.lease.key, "ack") == "acked"
        stats = replica.stats()
    return got, stats.fetches_ok, stats.ok_broker_rpcs, stats.kept_served


async def test_read_ahead_costs_no_more_broker_calls_than_without_it_through_a_backlog_end(
    cluster: LocalCluster, topic: str, redis: RedisServer
) -> None:
    """A backlog of small messages (several broker batches a partition, their store shared by
    the topic's partitions) read to its end with read-ahead off and on: the same messages once
    each, in order, and no more broker calls a fetch with it on (at the end, where a read-ahead
    would be answered 404, the read ends with a CommitOffset as without it)."""
    n = 24000  # 12 000 records a broker store: more than one scan reads
    async with Producer(cluster.master_addr, topics=[topic]) as producer:
        for i in range(0, n, 500):
            await asyncio.gather(
                *(
                    producer.send(topic, f"v{j:06d}".ljust(100, ".").encode())
                    for j in range(i, i + 500)
                )
            )
    runs = {kept: await _drain_counting(cluster, redis, topic, kept, n) for kept in (0, 1 << 25)}
    for got, _fetches, _rpcs, _served in runs.values():
        assert sorted(v for batch in got.values() for v in batch) == list(range(n))
        for batch in got.values():
            assert batch == sorted(batch)
    (_, fetches_off, rpcs_off, served_off), (_, fetches_on, rpcs_on, served_on) = runs.values()
    assert served_off == 0
    assert served_on >= 1
    # a fetch served from what was read after the previous answer has no broker call on its
    # path; the others cost what they cost without read-ahead
    assert rpcs_on / fetches_on <= rpcs_off / fetches_off


async def test_a_commit_written_behind_its_get_commits_that_read_on_the_real_broker(
    cluster: LocalCluster, topic: str
) -> None:
    """Without read-ahead, a read expected to end after one batch writes its CommitOffset right
    behind its GetMessage: the real broker runs them in order (the commit covers the batch, no
    second commit), and the reads walk the partition to its end without a gap or a repeat."""
    await _produce(cluster, topic, 60)
    group, deployment = f"gwe_{uuid.uuid4().hex[:8]}", f"e-{uuid.uuid4().hex[:6]}"
    tube = TubeGroup(TubeReach(cluster.master_addr, deployment), group=group, topics=[topic])
    try:
        await tube.start()
        key = (await tube.partitions(force=True))[0]
        at, _top = await tube.register(key, 0)
        values: list[str] = []
        first = await tube.read(key, at, cursor_at_start=True, max_messages=1)
        assert (first.status, first.rpcs) == ("ok", 2)  # not read yet: GetMessage, then commit
        reads = [first]
        while reads[-1].status == "ok":
            values += [m.body.decode().split(".")[0] for m in reads[-1].messages]
            reads.append(await tube.read(key, reads[-1].next, cursor_at_start=True, max_messages=1))
        later, last = reads[1:], reads[-1]
        assert len(later) >= 2  # a few broker batches, then the end
        for read in later:
            # GetMessage and the commit behind it: nothing committed again, no resync
            assert (read.rpcs, read.registered, read.resync) == (2, False, ""), read
        assert last.status == "empty"
        assert values == sorted(set(values))  # in order, none twice
        assert len(values) >= 10
        # exactly what a group reading plainly (GetMessage, then its answer, then commit) gets
        plain = TubeGroup(
            TubeReach(cluster.master_addr, deployment), group=group + "p", topics=[topic]
        )
        try:
            await plain.start()
            await plain.partitions(force=True)
            got, _ = await plain.register(key, 0)
            seen: list[str] = []
            while True:
                read = await plain.read(key, got, cursor_at_start=True, max_messages=10_000)
                if read.status != "ok":
                    break
                seen += [m.body.decode().split(".")[0] for m in read.messages]
                got = read.next
            assert seen == values
        finally:
            await plain.close()
        # the broker's committed cursor is where the last batch ended
        partition = await tube._partition(key)
        kept = await tube._session().broker.commit(partition, consumed=False)
        assert kept.curr_offset == reads[-2].next
    finally:
        await tube.close()
