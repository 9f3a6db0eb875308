"""A broker comes back without its unflushed tail and stores new messages past the group's
offset before the server-balanced group registers there again (issue 30): the register answer
looks normal, and only the message ids the consumer remembers show that the broker replaced
what it had read. The group moves back and reads every new message (at least once).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

from tests.support.fake_helpers import drain, group_consumer, produce
from tubemq_aio import Consumer
from tubemq_aio.protocol.pb import BrokerService_pb2 as pb
from tubemq_aio.protocol.rpc import Method, RpcRequest
from tubemq_aio.testing import FakeCluster, wait_until
from tubemq_aio.testing._fake_store import INDEX_UNIT

ROUNDS = 4  # the old messages are produced and read in rounds: several batches remembered
PER_ROUND = 10
OLD = ROUNDS * PER_ROUND
LOST = 12  # the newest old messages the broker forgets (more than the last batch)
NEW = 30  # produced after the restart, before the group registers again: past its offset
KEY = "1:demo:0"


class RegisterGate:
    """Makes broker 1 refuse (500) every consumer register until :meth:`open`: the group
    cannot register there again before the test produced the new messages."""

    def __init__(self, cluster: FakeCluster) -> None:
        node = cluster.brokers[0].node
        self._register: Callable[[RpcRequest], bytes] = node.handlers[
            int(Method.BROKER_CONSUMER_REGISTER)
        ]
        self.refused = 0
        self.closed = True
        node.handlers[int(Method.BROKER_CONSUMER_REGISTER)] = self._handle

    def _handle(self, request: RpcRequest) -> bytes:
        req = pb.RegisterRequestC2B.FromString(request.body)
        if self.closed and req.opType == 31:
            self.refused += 1
            return pb.RegisterResponseB2C(
                success=False, errCode=500, errMsg="held by the test"
            ).SerializeToString()
        return self._register(request)

    def open(self) -> None:
        self.closed = False


async def _read_old(cluster: FakeCluster, consumer: Consumer) -> list[bytes]:
    old: list[bytes] = []
    for i in range(ROUNDS):
        sent = await produce(cluster.master_addr, "demo", PER_ROUND, prefix=f"old{i}")
        assert sorted(await drain(consumer, PER_ROUND, timeout=20)) == sorted(sent)
        old += sent
    await wait_until(
        lambda: cluster.group_offset("g1", 1, "demo", 0) == OLD * INDEX_UNIT,
        10,
        "the group's offset stored after the old messages",
    )
    return old


async def _crash_and_refill(
    cluster: FakeCluster, consumer: Consumer
) -> tuple[RegisterGate, list[bytes]]:
    """Kill broker 1, start it without its newest :data:`LOST` messages, hold the group's
    registers off and produce :data:`NEW` messages, which fill the store past the group's
    stored offset (the case nothing in the register answer shows)."""
    await cluster.stop_broker(1)
    gate = RegisterGate(cluster)
    lost = await cluster.start_broker(1, lose_newest=LOST)
    assert len(lost) == LOST
    new = await produce(cluster.master_addr, "demo", NEW, prefix="new")
    store = cluster.brokers[0].log("demo", 0)
    assert store.max_offset == (OLD - LOST + NEW) * INDEX_UNIT
    assert cluster.group_offset("g1", 1, "demo", 0) == OLD * INDEX_UNIT < store.max_offset
    # The group waits for its partition back (dropped after the broker went away).
    await wait_until(lambda: gate.refused > 0, 30, "a register held off")
    assert consumer.assignment() == []
    return gate, new


async def _read_until(consumer: Consumer, wanted: set[bytes], timeout: float) -> list[bytes]:
    """Every message that arrives (acked) until all of ``wanted`` did, or ``timeout`` s; then
    0.5 s more to see what else comes."""
    got: list[bytes] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not wanted <= set(got) and loop.time() < deadline:
        async with await consumer.getmany(timeout=0.5) as batch:
            got.extend(m.body for m in batch)
    async with await consumer.getmany(timeout=0.5) as batch:
        got.extend(m.body for m in batch)
    return got


async def test_new_messages_below_the_groups_offset_are_delivered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="tubemq_aio.consumer")
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        group_consumer(cluster, "g1") as consumer,
    ):
        old = await _read_old(cluster, consumer)
        gate, new = await _crash_and_refill(cluster, consumer)
        gate.open()
        got = await _read_until(consumer, set(new), timeout=30)
        assert sorted(m for m in got if m.startswith(b"new")) == sorted(new)  # each once
        again = [m for m in got if not m.startswith(b"new")]
        # At least once: old messages read again are the ones from the offset moved back to;
        # at most the survivors of the lost region's search (bounded by what was read).
        assert set(again) <= set(old[: OLD - LOST])
        assert len(again) <= OLD - LOST
        assert consumer.stats.tail_checks == 1
        assert consumer.stats.tail_rewinds == 1
        assert consumer.stats.tail_unverified == 0
        assert consumer.stats.offset_rewinds == 0  # the register answer showed nothing
    warnings = [r.getMessage() for r in caplog.records if "replaced messages" in r.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].startswith(f"group g1 partition {KEY}: the broker replaced messages")


async def test_without_the_check_the_new_messages_below_the_offset_are_skipped() -> None:
    """The fault itself (what the consumer did before the check, ``tail_check_depth=0``):
    the group resumes at its stored offset, and the new messages below it never arrive."""
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        group_consumer(cluster, "g1", tail_check_depth=0) as consumer,
    ):
        await _read_old(cluster, consumer)
        gate, new = await _crash_and_refill(cluster, consumer)
        gate.open()
        skipped = LOST  # the first LOST new messages took the offsets below the group's
        # read until the rest came (and 0.5 s more): the skipped ones never do
        got = await _read_until(consumer, set(new[skipped:]), timeout=8)
        assert sorted(got) == sorted(new[skipped:])
        assert consumer.stats.tail_checks == 0


async def test_a_broker_that_kept_everything_costs_no_duplicate() -> None:
    """The partition is lost with its broker (stopped and started again, nothing lost): the
    check reads the newest batch back, finds it where it was and resumes where the group was."""
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        group_consumer(cluster, "g1") as consumer,
    ):
        await _read_old(cluster, consumer)
        await cluster.stop_broker(1)
        await cluster.start_broker(1)
        await wait_until(lambda: consumer.stats.tail_checks == 1, 30, "the tail check")
        new = await produce(cluster.master_addr, "demo", NEW, prefix="new")
        got = await _read_until(consumer, set(new), timeout=20)
        assert sorted(got) == sorted(new)
        assert consumer.stats.tail_rewinds == 0


async def test_a_partition_moved_away_by_the_master_forgets_its_record() -> None:
    async with (
        FakeCluster(topics={"demo": 2}) as cluster,
        group_consumer(cluster, "g1") as first,
    ):
        await produce(cluster.master_addr, "demo", 20)
        await drain(first, 20, timeout=20)
        assert first._engine is not None
        tails = first._engine.tails
        assert {k.format() for k in tails} == {"1:demo:0", "1:demo:1"}
        async with group_consumer(cluster, "g1") as second:
            await wait_until(lambda: len(first.assignment()) == 1, 30, "one partition moved")
            await wait_until(lambda: len(second.assignment()) == 1, 30, "the second member")
            assert {k.format() for k in tails} == set(first.assignment())


async def test_a_record_another_member_read_past_is_not_read_back() -> None:
    """Found in the chaos run: after the SIGKILL the partition went to the group's other
    member, which read on; when it came back, the first member's record predated the
    replacement and its read-back moved the group far back. Now a group offset beyond the
    end of the newest remembered batch (as its commit answered) marks the record stale: no
    read-back, the group goes on where the broker loaded it."""
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        group_consumer(cluster, "g1") as consumer,
    ):
        await _read_old(cluster, consumer)
        gate, _new = await _crash_and_refill(cluster, consumer)
        # Another member of g1 read the new messages meanwhile (its commits moved the offset).
        read_on = (OLD - LOST + NEW) * INDEX_UNIT
        cluster.brokers[0].offsets[("g1", "demo", 0)] = read_on
        gate.open()
        await wait_until(lambda: consumer.assignment() == [KEY], 30, "the partition back")
        assert consumer.positions()[KEY].current_offset == read_on
        assert not await consumer.getmany(timeout=1.0)  # nothing read twice
        assert consumer.stats.tail_checks == 0
        assert consumer.stats.tail_rewinds == 0
        assert consumer._engine is not None
        assert KEY not in {k.format() for k in consumer._engine.tails}
        more = await produce(cluster.master_addr, "demo", 5, prefix="more")
        assert sorted(await _read_until(consumer, set(more), timeout=20)) == sorted(more)
