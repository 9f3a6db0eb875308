"""The ClientBalancedConsumer against the real cluster (2 brokers, 3 partitions each)."""

from __future__ import annotations

import asyncio
import functools
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from tests.support.undeployed_topic import fails_at_once_naming_the_missing_topic
from tubemq_aio import Producer
from tubemq_aio.consumer.client_balanced import ClientBalancedConsumer, assign_modulo
from tubemq_aio.errors import (
    ClientBalanceConfigError,
    ClientClosedError,
    PartitionAlreadyConnectedError,
    PartitionNotConnectedError,
    PartitionNotSubscribableError,
    PartitionOccupiedError,
    ServerError,
    UnknownPartitionError,
)
from tubemq_aio.testing import LocalCluster, wait_until

HEARTBEAT = 2.0
INDEX_UNIT = 28  # bytes per index record
# The partitions of one broker store share one index: offsets and lag count the messages of
# every partition of the store (3 partitions per store on the test brokers).

Sent = dict[str, list[tuple[int, bytes]]]  # partition key -> [(append offset, body)]


def cb(
    cluster: LocalCluster, group: str, topic: str, node: int, **kw: Any
) -> ClientBalancedConsumer:
    """A node of a two-node client-balanced group with test-friendly timings."""
    kw.setdefault("consume_from", "earliest")
    kw.setdefault("heartbeat_interval", HEARTBEAT)
    return ClientBalancedConsumer(
        cluster.master_addr, group=group, topics=[topic], source_count=2, node_id=node, **kw
    )


@pytest_asyncio.fixture
async def closing() -> AsyncIterator[list[ClientBalancedConsumer]]:
    """Consumers appended here are closed at the end of the test, whatever happens."""
    items: list[ClientBalancedConsumer] = []
    yield items
    for item in items:
        await item.close()


async def produce(cluster: LocalCluster, topic: str, count: int, prefix: str) -> Sent:
    """Send ``count`` messages ``{prefix}-{i}``; return them per partition with offsets."""
    sent: Sent = {}
    async with Producer(cluster.master_addr, topics=[topic]) as producer:
        for i in range(count):
            body = f"{prefix}-{i}".encode()
            result = await producer.send(topic, body)
            sent.setdefault(result.partition_key, []).append((result.append_offset, body))
    return sent


def in_store(sent: Sent, key: str) -> int:
    """Messages sent to the broker store of ``key`` (all its partitions)."""
    broker = key.split(":")[0]
    return sum(len(v) for k, v in sent.items() if k.split(":")[0] == broker)


async def drain(
    consumers: list[ClientBalancedConsumer], count: int, timeout: float = 30
) -> list[tuple[str, bytes]]:
    """Fetch and ack from all ``consumers`` until ``count`` messages came in total, then make
    sure nothing more arrives for a second. Returns (partition key, body) pairs."""
    got: list[tuple[str, bytes]] = []
    deadline = time.monotonic() + timeout

    async def one(c: ClientBalancedConsumer) -> None:
        while len(got) < count:
            assert time.monotonic() < deadline, f"only {len(got)} of {count}: {c!r}"
            batch = await c.fetch(timeout=0.5)
            got.extend((m.partition_key, m.body) for m in batch)
            await batch.ack()

    await asyncio.gather(*(one(c) for c in consumers))
    extra = await asyncio.gather(*(c.fetch(timeout=1.0) for c in consumers))
    assert not any(extra), [list(b) for b in extra]
    return got


async def test_two_nodes_split_by_modulo_and_read_everything_once(
    cluster: LocalCluster, topic: str, closing: list[ClientBalancedConsumer]
) -> None:
    sent = await produce(cluster, topic, 60, "split")
    group = f"cb_split_{topic}"
    c0, c1 = cb(cluster, group, topic, 0), cb(cluster, group, topic, 1)
    closing += [c0, c1]
    await c0.start()
    await c1.start()
    metas = await c0.partitions()
    assert len(metas) == 3 * len(cluster.brokers)
    assert all(m.subscribable and m.topic == topic for m in metas)
    assert [m.partition_key for m in metas] == [m.partition_key for m in await c1.partitions()]
    mine0, mine1 = assign_modulo(metas, 2, 0), assign_modulo(metas, 2, 1)
    assert not set(mine0) & set(mine1)
    assert sorted(mine0 + mine1) == sorted(m.partition_key for m in metas)
    for c, mine in ((c0, mine0), (c1, mine1)):
        for key in mine:
            pos = await c.connect(key)
            assert (pos.current_offset, pos.lag) == (0, in_store(sent, key)), (key, pos)
            assert pos.max_offset == INDEX_UNIT * in_store(sent, key)
        assert c.assignment() == sorted(mine)

    got = await drain([c0, c1], 60)
    assert Counter(b for _, b in got) == Counter(f"split-{i}".encode() for i in range(60))
    for key, _ in got:
        assert key in (mine0 if key in mine0 else mine1)
    by_key = Counter(k for k, _ in got)
    assert by_key == Counter({k: len(v) for k, v in sent.items()})
    for c, mine in ((c0, mine0), (c1, mine1)):
        positions = c.positions()
        assert sorted(positions) == sorted(mine)
        for key, pos in positions.items():
            assert pos.lag == 0, pos
            assert pos.current_offset == pos.max_offset == INDEX_UNIT * in_store(sent, key)


async def test_bad_input_raises_typed_errors(
    cluster: LocalCluster, topic: str, closing: list[ClientBalancedConsumer]
) -> None:
    with pytest.raises(ClientBalanceConfigError):
        cb(cluster, "cb_bad", topic, 2)
    # config errors are ValueErrors too
    with pytest.raises(ValueError, match=r"node_id must be an integer in \[0, 1\], got 5"):
        assign_modulo(["1:t:0"], 2, 5)
    group = f"cb_bad_{topic}"
    c0, c1 = cb(cluster, group, topic, 0), cb(cluster, group, topic, 1)
    closing += [c0, c1]
    with pytest.raises(ClientClosedError):
        await c0.partitions()
    await c0.start()
    await c1.start()
    dup = cb(cluster, group, topic, 0)
    closing.append(dup)
    with pytest.raises(ServerError) as taken:  # node id 0 is taken in the group
        await dup.start()
    other = ClientBalancedConsumer(
        cluster.master_addr, group=group, topics=[topic], source_count=3, node_id=2
    )
    closing.append(other)
    with pytest.raises(ServerError) as count:  # the group declared 2 sources
        await other.start()
    assert (taken.value.err_code, count.value.err_code) == (430, 429)
    key = (await c0.partitions())[0].partition_key
    with pytest.raises(UnknownPartitionError):
        await c0.connect("not-a-key")
    with pytest.raises(UnknownPartitionError):
        await c0.connect(f"999:{topic}:0")
    with pytest.raises(UnknownPartitionError):
        await c0.connect("1:some_other_topic:0")
    with pytest.raises(ClientBalanceConfigError):
        await c0.connect(key, offset=-1)
    with pytest.raises(PartitionNotConnectedError):
        await c0.disconnect(key)
    await c0.connect(key)
    with pytest.raises(PartitionAlreadyConnectedError):
        await c0.connect(key)
    with pytest.raises(PartitionAlreadyConnectedError):
        await c0.read_at(key, 0)
    with pytest.raises(PartitionOccupiedError):  # held by the other node
        await c1.connect(key)
    await c0.disconnect(key)
    assert c0.assignment() == []
    with pytest.raises(PartitionNotSubscribableError):  # 421: refused (410) less than 5 s ago
        await c1.connect(key)


async def test_replay_from_offset_and_move_between_nodes(
    cluster: LocalCluster, topic: str, closing: list[ClientBalancedConsumer]
) -> None:
    first = await produce(cluster, topic, 40, "one")
    group = f"cb_move_{topic}"
    c0, c1 = cb(cluster, group, topic, 0), cb(cluster, group, topic, 1)
    closing += [c0, c1]
    await c0.start()
    await c1.start()
    keys = [m.partition_key for m in await c0.partitions()]
    for key in keys:
        await c0.connect(key)
    await drain([c0], 40)

    # Replay: connect(key, offset=o) delivers exactly the messages appended at o and later.
    key, records = max(first.items(), key=lambda kv: len(kv[1]))
    assert len(records) >= 3
    offset = records[len(records) // 2][0]
    await c0.disconnect(key)
    await c0.connect(key, offset=offset)
    replay = await drain([c0], len([r for r in records if r[0] >= offset]))
    assert [b for _, b in replay] == [b for o, b in records if o >= offset]

    # Move half the partitions from node 0 to node 1 at the last acked offsets.
    second = await produce(cluster, topic, 40, "two")
    moving = keys[::2]
    last = c0.positions()
    for key in moving:
        await c0.disconnect(key)
        pos = await c1.connect(key, offset=last[key].current_offset)
        assert pos.current_offset == last[key].current_offset
    got = await drain([c0, c1], 40)
    assert Counter(b for _, b in got) == Counter(f"two-{i}".encode() for i in range(40))
    expected_c1 = sum(len(second.get(k, [])) for k in moving)
    assert sum(1 for k, _ in got if k in moving) == expected_c1

    # And back with offset=None: the group's stored offset continues, nothing comes again.
    for key in moving:
        await c1.disconnect(key)
        await c0.connect(key)
    assert not await c0.fetch(timeout=1.5)
    assert all(p.lag == 0 for p in c0.positions().values())


async def test_read_at_is_an_exact_positioned_read(
    cluster: LocalCluster, topic: str, closing: list[ClientBalancedConsumer]
) -> None:
    sent = await produce(cluster, topic, 30, "pos")
    c0 = cb(cluster, f"cb_read_{topic}", topic, 0)
    closing.append(c0)
    await c0.start()
    key, records = max(sent.items(), key=lambda kv: len(kv[1]))
    start = records[0][0]
    a = await c0.read_at(key, start)
    b = await c0.read_at(key, start)
    assert [m.body for m in a.messages] == [m.body for m in b.messages] == [r[1] for r in records]
    assert a.start_offset == start
    assert a.max_offset == a.next_offset == INDEX_UNIT * in_store(sent, key)
    k = len(records) // 2
    mid = await c0.read_at(key, records[k][0])
    assert [m.body for m in mid.messages] == [r[1] for r in records[k:]]
    assert mid.next_offset == a.next_offset
    end = await c0.read_at(key, a.next_offset)
    assert end.messages == ()
    assert end.start_offset == end.next_offset == a.next_offset
    # A reader partition can become a fetched one; the group offset is after the last read.
    pos = await c0.connect(key)
    assert pos.current_offset == a.next_offset
    assert pos.lag == 0


async def test_read_next_continues_without_a_register_and_checks_the_cursor(
    cluster: LocalCluster, topic: str, closing: list[ClientBalancedConsumer]
) -> None:
    sent: Sent = {}
    async with Producer(cluster.master_addr, topics=[topic]) as producer:
        results = await asyncio.gather(
            *(producer.send(topic, b"%05d" % i + b"x" * 1024) for i in range(6000))
        )
    for i, r in enumerate(results):
        sent.setdefault(r.partition_key, []).append((r.append_offset, b"%05d" % i + b"x" * 1024))
    c0 = cb(cluster, f"cb_next_{topic}", topic, 0)
    closing.append(c0)
    await c0.start()
    key, records = max(sent.items(), key=lambda kv: len(kv[1]))
    records.sort()
    start = records[0][0]

    async def walk(sequential: bool) -> tuple[list[bytes], int]:
        bodies: list[bytes] = []
        batch = await c0.read_at(key, start)
        reads = 1
        # An answer can be empty and still move on: slots of the store's other partitions.
        while batch.messages or batch.next_offset > batch.start_offset:
            bodies += [m.body for m in batch.messages]
            read = c0.read_next if sequential else c0.read_at
            nxt = await read(key, batch.next_offset)
            assert nxt.start_offset == batch.next_offset
            batch, reads = nxt, reads + 1
        return bodies, reads

    by_register, _ = await walk(sequential=False)
    by_cursor, reads = await walk(sequential=True)
    assert by_cursor == by_register == [body for _, body in records]
    assert reads > 2  # several broker batches were continued
    # The cursor is after the last batch: asking for an earlier offset is noticed and served
    # by a registered read from there.
    first = await c0.read_at(key, start)
    again = await c0.read_next(key, start)
    assert again.start_offset == start
    assert [m.body for m in again.messages] == [m.body for m in first.messages]


async def test_async_for_and_protection_timeout(
    cluster: LocalCluster, topic: str, closing: list[ClientBalancedConsumer]
) -> None:
    await produce(cluster, topic, 12, "it")
    c0 = cb(cluster, f"cb_iter_{topic}", topic, 0, confirm_timeout=2.0, heartbeat_interval=1.0)
    closing.append(c0)
    await c0.start()
    for meta in await c0.partitions():
        await c0.connect(meta.partition_key)
    batch = await c0.fetch(timeout=10)
    assert batch
    held = [m.body for m in batch]
    # not acked: taken back after confirm_timeout
    await wait_until(lambda: c0.stats.expired >= 1, 20, "the unacked batch to be taken back")
    assert not await batch.ack()
    bodies: list[bytes] = []
    async with asyncio.timeout(20):
        async for msg in c0:
            bodies.append(msg.body)
            if len(bodies) == 12:
                break
    assert Counter(bodies) == Counter(f"it-{i}".encode() for i in range(12))
    assert set(held) <= set(bodies)
    assert c0.stats.expired >= 1


async def test_automatic_reassignment_splits_and_reads_everything(
    cluster: LocalCluster, topic: str, closing: list[ClientBalancedConsumer]
) -> None:
    """With ``reassign_interval`` the nodes connect their modulo share by themselves."""
    sent = await produce(cluster, topic, 60, "auto")
    group = f"g_auto_{topic}"
    nodes = [cb(cluster, group, topic, n, reassign_interval=1.0) for n in (0, 1)]
    closing.extend(nodes)
    for node in nodes:
        await node.start()
    keys = sorted(sent)
    expected = [assign_modulo(keys, 2, n) for n in (0, 1)]
    deadline = time.monotonic() + 30
    while [sorted(node.assignment()) for node in nodes] != expected:
        assert time.monotonic() < deadline, [node.assignment() for node in nodes]
        await asyncio.sleep(0.2)
    got = await drain(nodes, 60)
    assert Counter(body for _, body in got) == Counter(
        body for items in sent.values() for _, body in items
    )


async def test_reads_of_every_partition_at_once_match_reads_one_by_one(
    cluster: LocalCluster, topic: str, closing: list[ClientBalancedConsumer]
) -> None:
    """Positioned reads of different partitions run at once (one lock per partition, issue
    34): on the real brokers, every partition's reads started together, and two reads of one
    partition among them, return what reads one after the other return."""
    sent = await produce(cluster, topic, 60, "par")
    c0 = cb(cluster, f"cb_par_{topic}", topic, 0)
    closing.append(c0)
    await c0.start()
    starts = {key: records[0][0] for key, records in sent.items()}
    assert len(starts) >= 2
    alone = {key: await c0.read_at(key, start) for key, start in starts.items()}
    keys = list(starts)
    together = await asyncio.gather(
        *(c0.read_at(key, starts[key]) for key in keys), c0.read_at(keys[0], starts[keys[0]])
    )
    for key, got in zip([*keys, keys[0]], together, strict=True):
        want = alone[key]
        assert [m.body for m in got.messages] == [m.body for m in want.messages]
        assert (got.start_offset, got.next_offset) == (want.start_offset, want.next_offset)
    assert [m.body for m in alone[keys[0]].messages] == [r[1] for r in sent[keys[0]]]
    assert len(c0._locks) == 0


async def test_an_undeployed_topic_fails_the_start_at_once_naming_it(
    cluster: LocalCluster, topic: str
) -> None:
    """The real master's 431 to a V2 register becomes ``TopicNotDeployedError`` naming only the
    missing topic (still a ``ServerError`` 431), before the register deadline (issue 32)."""
    await fails_at_once_naming_the_missing_topic(
        functools.partial(ClientBalancedConsumer, cluster.master_addr, group=f"cb431_{topic}"),
        [topic],
    )
