"""The real broker runs a request it received late, whatever became of its connection: the
behaviour ``Fault.late`` gives the FakeCluster (``tests/fake/test_fake_late_request.py``).

A broker frozen with SIGSTOP receives a GetMessage into its socket buffer (the kernel takes
it), the client then gives up on the connection (reset, closed, or left open), and the broker is
thawed: the GetMessage runs then, and puts the partition's new messages in flight, so that the
next CommitOffset of the same client id, on a new connection, covers that batch, which nobody
received. On the fake, ``Fault.late`` plus ``release_late`` does the same. A register at an
offset and an unregister run late the same way (the consumers' rest after any call without
answer, docs/reliability.md), and so do the registers of a ``connect`` or a ``close()`` cut
short.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import pytest

from tests.support.raw_broker_link import Link, Reader
from tubemq_aio import ClientBalancedConsumer, Consumer, Producer
from tubemq_aio.protocol import consumer_rpc
from tubemq_aio.protocol.consumer_meta import PartitionKey
from tubemq_aio.protocol.pb import BrokerService_pb2 as pb
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import LocalCluster, wait_until
from tubemq_aio.testing._nodes import BrokerNode

GET = Method.BROKER_CONSUMER_GET_MESSAGE
COMMIT = Method.BROKER_CONSUMER_COMMIT
REGISTER = Method.BROKER_CONSUMER_REGISTER
SENDS = 60  # over every partition of the topic: some land in the one read here


@contextmanager
def _frozen(pid: int) -> Iterator[None]:
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


@asynccontextmanager
async def _read_once(
    cluster: LocalCluster, topic: str, group: str
) -> AsyncIterator[tuple[BrokerNode, Reader, Link, Link, pb.RegisterResponseB2C]]:
    """``group``'s reader of partition 0 registered on a new link and holding one batch read
    there (in flight, not acked), beside an old link of the same client for the late request:
    ``(broker, reader, old, new, register answer)``."""
    broker = cluster.brokers[0]
    reader = Reader(
        f"{group}_127.0.0.1-{os.getpid()}-1-Pull-1", group, PartitionKey(broker.broker_id, topic, 0)
    )
    await _produce(cluster.master_addr, topic, "first")
    old = await Link.open(broker.addr)  # the late request goes out on it
    new = await Link.open(broker.addr)
    try:
        reg = pb.RegisterResponseB2C.FromString(await new.call(REGISTER, reader.register()))
        assert reg.success, reg
        got = pb.GetMessageResponseB2C.FromString(await new.call(GET, reader.get(False)))
        assert got.success, got
        assert got.messages, got  # in flight, not acked
        assert got.currOffset == reg.currOffset
        yield broker, reader, old, new, reg
    finally:
        new.close()


async def _sent_frozen_then_reset(pid: int, link: Link, request: bytes) -> None:
    """Send ``request`` (a register) into the frozen broker's socket buffer on ``link``, reset
    the link, thaw the broker and give it time to read its sockets."""
    with _frozen(pid):
        link.send(REGISTER, request)
        await asyncio.sleep(0.5)
        link.abort()
        await asyncio.sleep(0.5)
    await asyncio.sleep(2.0)


async def _produce(master: str, topic: str, tag: str) -> None:
    async with Producer(master, topics=[topic]) as producer:
        await asyncio.gather(*(producer.send(topic, f"{tag}-{i}".encode()) for i in range(SENDS)))


@pytest.mark.parametrize("ending", ["reset", "closed", "open"])
async def test_a_get_message_the_broker_received_frozen_runs_when_it_thaws(
    cluster: LocalCluster, topic: str, ending: str
) -> None:
    broker = cluster.brokers[0]
    assert broker.pid is not None
    group = f"glate{ending}"
    reader = Reader(
        f"{group}_127.0.0.1-{os.getpid()}-1-Pull-1", group, PartitionKey(broker.broker_id, topic, 0)
    )
    await _produce(cluster.master_addr, topic, "first")
    old = await reader.registered(broker.addr)
    first = pb.GetMessageResponseB2C.FromString(await old.call(GET, reader.get(False)))
    assert first.success, first
    done = pb.CommitOffsetResponseB2C.FromString(await old.call(COMMIT, reader.commit()))
    assert done.success, done
    read_to = done.currOffset  # the first batch's end
    await _produce(cluster.master_addr, topic, "second")
    with _frozen(broker.pid):
        old.send(GET, reader.get(False))  # into the frozen broker's socket buffer
        await asyncio.sleep(0.5)
        if ending == "reset":
            old.abort()
        elif ending == "closed":
            old.close()
        await asyncio.sleep(0.5)
    if ending == "open":
        late = pb.GetMessageResponseB2C.FromString(await asyncio.wait_for(old.answer(), 30))
        assert late.success, late
        assert late.currOffset == read_to
    await asyncio.sleep(2.0)  # the thawed broker reads its sockets
    new = await Link.open(broker.addr)
    try:
        rsp = pb.CommitOffsetResponseB2C.FromString(
            await asyncio.wait_for(new.call(COMMIT, reader.commit()), 30)
        )
        assert rsp.success, rsp
        assert rsp.currOffset > read_to  # the late read's batch, committed unseen
        after = pb.GetMessageResponseB2C.FromString(
            await asyncio.wait_for(new.call(GET, reader.get(False)), 30)
        )
        assert after.errCode == 404, after  # nothing left past it: the whole second round
    finally:
        new.close()
        if ending == "open":
            old.close()


async def test_an_unregister_the_broker_received_frozen_commits_a_newer_read(
    cluster: LocalCluster, topic: str
) -> None:
    """The late unregister of ``tests/fake/test_fake_late_register.py`` on the real broker: an
    unregister (``readStatus`` 0) a frozen broker received on a connection the client then
    reset runs when it thaws, after the same client id read a batch on another connection: it
    commits that batch, which nobody acked, and ends the registration."""
    async with _read_once(cluster, topic, "glateunreg") as (broker, reader, old, new, reg):
        assert broker.pid is not None
        unregister = consumer_rpc.build_broker_unregister(
            client_id=reader.client_id, group=reader.group, key=reader.key, read_status=0
        )
        await _sent_frozen_then_reset(broker.pid, old, unregister)
        after = pb.GetMessageResponseB2C.FromString(
            await asyncio.wait_for(new.call(GET, reader.get(False)), 30)
        )
        assert not after.success, after  # the registration ended under the reader
        again = pb.RegisterResponseB2C.FromString(
            await asyncio.wait_for(new.call(REGISTER, reader.register()), 30)
        )
        assert again.success, again
        assert again.currOffset > reg.currOffset  # the batch in flight, committed unseen


async def test_a_register_with_an_offset_the_broker_received_frozen_moves_the_cursor(
    cluster: LocalCluster, topic: str
) -> None:
    """The late probe register of ``tests/fake/test_fake_tail_check_late.py`` on the real
    broker: a register at an offset (``readStatus`` 0) a frozen broker received on a connection
    the client then reset runs when it thaws, after the same client id read on past that offset
    on another connection: the group's cursor is back at the register's offset."""
    async with _read_once(cluster, topic, "glatereg") as (broker, reader, old, new, reg):
        assert broker.pid is not None
        done = pb.CommitOffsetResponseB2C.FromString(await new.call(COMMIT, reader.commit()))
        assert done.currOffset > reg.currOffset, done  # read on past the register's offset
        register_at = consumer_rpc.build_broker_register(
            client_id=reader.client_id,
            group=reader.group,
            key=reader.key,
            start=consumer_rpc.RegisterStart(0, reg.currOffset),
        )
        await _sent_frozen_then_reset(broker.pid, old, register_at)
        after = pb.GetMessageResponseB2C.FromString(
            await asyncio.wait_for(new.call(GET, reader.get(False)), 30)
        )
        assert after.success, after
        assert after.currOffset == reg.currOffset  # back where the late register put it


async def test_a_connect_cut_short_at_a_frozen_broker_is_released_by_close(
    cluster: LocalCluster, topic: str
) -> None:
    """``ClientBalancedConsumer.connect`` cut short while the frozen broker holds its register:
    the broker registers the client when it thaws, and ``close()`` must unregister that too
    (it released only what it knew it held: the next member met 410, occupied, until the broker
    expired the registration; ``tests/fake/test_fake_consumer_cancel.py``)."""
    broker = cluster.brokers[0]
    assert broker.pid is not None
    key = f"{broker.broker_id}:{topic}:0"
    group = "gcutshort"
    first = ClientBalancedConsumer(cluster.master_addr, group=group, topics=[topic])
    async with first:
        await first.partitions()
        with _frozen(broker.pid), pytest.raises(TimeoutError):
            async with asyncio.timeout(1.0):
                await first.connect(key)
        await asyncio.sleep(2.0)  # the thawed broker runs the register
        assert first.assignment() == []
    async with ClientBalancedConsumer(cluster.master_addr, group=group, topics=[topic]) as second:
        position = await second.connect(key)  # PartitionOccupiedError before
        assert position.partition_key == key


async def test_a_close_during_a_register_at_a_frozen_broker_releases_it(
    cluster: LocalCluster, topic: str
) -> None:
    """``Consumer.close()`` cancels a rebalance event after ``close_rebalance_wait``: the
    registers it had sent to a frozen broker run when the broker thaws, and ``close()`` must
    unregister those too (before, the group's next member met 410 for the broker's partitions
    until it expired the registrations; ``tests/fake/test_fake_consumer_cancel.py``)."""
    broker = cluster.brokers[0]
    assert broker.pid is not None
    prefix = f"{broker.broker_id}:"
    group = "gcloseregister"
    first = Consumer(cluster.master_addr, group=group, topics=[topic], close_rebalance_wait=0.5)
    await first.start()
    with _frozen(broker.pid):
        await asyncio.sleep(5.0)  # the master hands the partitions out; their registers wait
        assert not any(k.startswith(prefix) for k in first.assignment())
        await first.close()
    async with Consumer(cluster.master_addr, group=group, topics=[topic]) as second:
        await wait_until(
            lambda: any(k.startswith(prefix) for k in second.assignment()),
            20,
            "a partition of the thawed broker",
        )
