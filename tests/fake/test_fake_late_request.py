"""``Fault.late``: the fake broker takes a request and executes it only later, whatever became
of the client that sent it (its deadline passed, its connection was closed or aborted, another
connection of the group went on), as a real broker runs a request it has read whenever a
thread gets to it (docs/protocol/consumer.md §4.2). Checked here on raw connections, one
request at a time, against the broker's group state."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.fake_helpers import produce
from tests.support.raw_broker_link import Link, Reader
from tubemq_aio.protocol.consumer_meta import PartitionKey
from tubemq_aio.protocol.pb import BrokerService_pb2 as pb
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault, wait_until

GET = Method.BROKER_CONSUMER_GET_MESSAGE
COMMIT = Method.BROKER_CONSUMER_COMMIT
GROUP, CLIENT = "g", "g_127.0.0.1-1-1-1-Pull-1"
KEY = PartitionKey(1, "demo", 0)
RECORD = 28  # one index record per message: a batch of n messages moves the cursor n * 28


READER = Reader(CLIENT, GROUP, KEY)
OTHER = Reader("g_127.0.0.1-2-2-2-Pull-1", GROUP, KEY)  # another member of the group


async def _held(cluster: FakeCluster, method: Method, count: int = 1) -> None:
    await wait_until(lambda: cluster.held_late(method) == count, 5, f"{count} held {method.name}")


@pytest.mark.parametrize("ending", ["reset", "closed"])
async def test_a_late_get_message_runs_at_release_after_its_connection_ended(ending: str) -> None:
    # The same on the real cluster: tests/integration/test_late_request_cluster.py.
    async with FakeCluster(topics={"demo": 1}, max_batch=10) as cluster:
        await produce(cluster.master_addr, "demo", 30)
        old = await READER.registered(cluster.broker_addr(1))
        rule = cluster.inject(GET, Fault.late())
        old.send(GET, READER.get(False))
        await _held(cluster, GET)
        assert rule.hits == 1
        assert cluster.requests(GET) == 1
        if ending == "reset":  # the client gave up on it
            old.abort()
        else:
            old.close()
        new = await Link.open(cluster.broker_addr(1))
        first = pb.GetMessageResponseB2C.FromString(await new.call(GET, READER.get(False)))
        assert (first.currOffset, len(first.messages)) == (0, 10)
        await new.call(COMMIT, READER.commit())
        assert cluster.group_offset(GROUP, 1, "demo", 0) == 10 * RECORD
        assert cluster.release_late(GET) == 1  # now it runs: it reads the next batch
        assert cluster.held_late() == 0
        # ...and the next commit covers that batch, which nobody received
        rsp = pb.CommitOffsetResponseB2C.FromString(await new.call(COMMIT, READER.commit()))
        assert rsp.currOffset == 20 * RECORD
        new.close()


async def test_a_late_get_message_runs_after_its_client_registered_again_elsewhere() -> None:
    """The consumer's reconnect: the same client id registers again on a new connection (the
    register drops the batch in flight); the old read runs after it and still counts."""
    async with FakeCluster(topics={"demo": 1}, max_batch=10) as cluster:
        await produce(cluster.master_addr, "demo", 30)
        old = await READER.registered(cluster.broker_addr(1))
        cluster.inject(GET, Fault.late())
        old.send(GET, READER.get(False))
        await _held(cluster, GET)
        old.abort()
        new = await READER.registered(cluster.broker_addr(1))
        assert cluster.release_late() == 1
        rsp = pb.CommitOffsetResponseB2C.FromString(await new.call(COMMIT, READER.commit()))
        assert rsp.currOffset == 10 * RECORD  # the old read's batch, which nobody received
        new.close()


async def test_a_late_get_message_of_a_client_another_member_replaced_changes_nothing() -> None:
    async with FakeCluster(topics={"demo": 1}, max_batch=10) as cluster:
        await produce(cluster.master_addr, "demo", 30)
        old = await READER.registered(cluster.broker_addr(1))
        cluster.inject(GET, Fault.late())
        old.send(GET, READER.get(True))
        await _held(cluster, GET)
        gone = pb.RegisterResponseB2C.FromString(
            await old.call(Method.BROKER_CONSUMER_REGISTER, READER.unregister())
        )
        assert gone.success, gone
        other = await OTHER.registered(cluster.broker_addr(1))
        assert cluster.release_late() == 1
        late = pb.GetMessageResponseB2C.FromString(await old.answer())
        assert late.errCode == 412  # the partition is the other member's now
        rsp = pb.CommitOffsetResponseB2C.FromString(await other.call(COMMIT, OTHER.commit()))
        assert rsp.currOffset == 0  # nothing was read or committed for it
        old.close()
        other.close()


async def test_a_late_commit_runs_after_a_later_read_and_commits_its_batch() -> None:
    async with FakeCluster(topics={"demo": 1}, max_batch=10) as cluster:
        await produce(cluster.master_addr, "demo", 30)
        link = await READER.registered(cluster.broker_addr(1))
        await link.call(GET, READER.get(False))  # batch 1 in flight
        cluster.inject(COMMIT, Fault.late())
        link.send(COMMIT, READER.commit())
        await _held(cluster, COMMIT)
        assert cluster.group_offset(GROUP, 1, "demo", 0) == 0  # not run yet
        second = pb.GetMessageResponseB2C.FromString(await link.call(GET, READER.get(True)))
        assert second.currOffset == 10 * RECORD  # the read committed batch 1 itself
        cluster.release_late()
        late = pb.CommitOffsetResponseB2C.FromString(await link.answer())  # still open: answered
        assert late.success
        assert late.currOffset == 20 * RECORD
        assert cluster.group_offset(GROUP, 1, "demo", 0) == 20 * RECORD
        link.close()


async def test_a_late_request_with_a_hold_runs_by_itself_and_answers_an_open_connection() -> None:
    async with FakeCluster(topics={"demo": 1}, max_batch=10) as cluster:
        await produce(cluster.master_addr, "demo", 10)
        link = await READER.registered(cluster.broker_addr(1))
        cluster.inject(GET, Fault.late(0.2))
        link.send(GET, READER.get(False))
        await _held(cluster, GET)
        rsp = pb.GetMessageResponseB2C.FromString(await asyncio.wait_for(link.answer(), 5))
        assert len(rsp.messages) == 10
        assert cluster.held_late() == 0
        assert cluster.release_late() == 0
        link.close()


async def test_a_stopped_broker_forgets_the_requests_it_held() -> None:
    async with FakeCluster(topics={"demo": 1}, max_batch=10) as cluster:
        await produce(cluster.master_addr, "demo", 10)
        link = await READER.registered(cluster.broker_addr(1))
        await link.call(GET, READER.get(False))
        cluster.inject(COMMIT, Fault.late(0.1))
        link.send(COMMIT, READER.commit())
        await _held(cluster, COMMIT)
        await cluster.stop_broker(1)
        assert cluster.held_late() == 0
        await asyncio.sleep(0.3)  # past its hold: its timer was cancelled with it
        assert cluster.group_offset(GROUP, 1, "demo", 0) == 0
        await cluster.start_broker(1)


async def test_release_late_picks_a_method_and_keeps_the_arrival_order() -> None:
    async with FakeCluster(topics={"demo": 1}, max_batch=10) as cluster:
        await produce(cluster.master_addr, "demo", 30)
        link = await READER.registered(cluster.broker_addr(1))
        cluster.inject(GET, Fault.late(), times=2)
        cluster.inject(COMMIT, Fault.late())
        link.send(GET, READER.get(False))
        link.send(COMMIT, READER.commit())
        link.send(GET, READER.get(True))
        await _held(cluster, GET, 2)
        await _held(cluster, COMMIT)
        assert cluster.release_late(GET) == 2
        assert cluster.held_late() == 1
        first = pb.GetMessageResponseB2C.FromString(await link.answer())
        second = pb.GetMessageResponseB2C.FromString(await link.answer())
        assert (first.currOffset, second.currOffset) == (0, 10 * RECORD)  # in arrival order
        assert cluster.release_late() == 1
        late = pb.CommitOffsetResponseB2C.FromString(await link.answer())
        assert late.currOffset == 20 * RECORD
        link.close()


@pytest.mark.parametrize("seconds", [-1.0, float("inf"), float("nan")])
def test_a_late_fault_needs_a_finite_hold(seconds: float) -> None:
    with pytest.raises(ValueError, match="finite"):
        Fault.late(seconds)
