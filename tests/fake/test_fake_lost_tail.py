"""A broker that comes back without its unflushed tail (SIGKILL before the flush): its stores
end lower, their offsets go to new messages, and a group's stored offset lies beyond the end.

The broker loads that offset as it is at a register without an offset (docs/protocol/consumer.md
§3.2); a consumer that resumed there would skip every new message below it. Both consumers
register again instead, count it in ``stats.offset_rewinds`` and log it: at the store's end
for a partition they read before (the tail check follows), else ``lost_tail_window`` messages
below the loaded offset, never above the end (the tests with ``lost_tail_window=0`` pin the
end, and what it skips).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import pytest

from tests.support.fake_helpers import cb_consumer, drain, group_consumer, produce
from tubemq_aio import ClientBalancedConsumer, Consumer, ServerError
from tubemq_aio.protocol.pb import BrokerService_pb2 as pb
from tubemq_aio.protocol.rpc import Method, RpcRequest
from tubemq_aio.testing import FakeCluster, wait_until
from tubemq_aio.testing._fake_store import INDEX_UNIT

OLD = 20  # messages read and committed before the crash
LOST = 8  # of those, the newest the broker forgets
NEW = 10  # produced after the restart: the first LOST of them get offsets below the group's
KEY = "1:demo:0"


async def _committed_then_crashed(
    cluster: FakeCluster, read_old: Callable[[], Awaitable[list[bytes]]]
) -> None:
    """Produce :data:`OLD` messages, have ``read_old`` read them all as group ``g1`` and wait
    until the broker stored the group's offset after them; then kill broker 1 and start it
    again without its newest :data:`LOST` messages."""
    old = await produce(cluster.master_addr, "demo", OLD, prefix="old")
    assert sorted(await read_old()) == sorted(old)
    await wait_until(
        lambda: cluster.group_offset("g1", 1, "demo", 0) == OLD * INDEX_UNIT,
        10,
        "the group's offset stored after the old messages",
    )
    await cluster.stop_broker(1)
    lost = await cluster.start_broker(1, lose_newest=LOST)
    assert len(lost) == LOST
    # The store ends lower; the group's stored offset stayed beyond it.
    assert cluster.brokers[0].log("demo", 0).max_offset == (OLD - LOST) * INDEX_UNIT
    assert cluster.group_offset("g1", 1, "demo", 0) == OLD * INDEX_UNIT


def _member_read(cluster: FakeCluster) -> Callable[[], Awaitable[list[bytes]]]:
    """Reads the old messages with a server-balanced member of ``g1`` that then closes."""

    async def read() -> list[bytes]:
        async with group_consumer(cluster, "g1") as consumer:
            return await drain(consumer, OLD, timeout=20)

    return read


def _cb_member_read(cluster: FakeCluster) -> Callable[[], Awaitable[list[bytes]]]:
    """Reads the old messages with a client-balanced member of ``g1`` that then closes."""

    async def read() -> list[bytes]:
        async with cb_consumer(cluster, "g1") as consumer:
            await consumer.connect(KEY)
            return await drain(consumer, OLD, timeout=20)

    return read


async def _read_new(consumer: Consumer | ClientBalancedConsumer) -> list[bytes]:
    """The messages that arrive (acked) until :data:`NEW` did or 10 s passed: a consumer that
    skips messages fails the comparison that follows, naming them, not a bare timeout."""
    got: list[bytes] = []
    deadline = asyncio.get_running_loop().time() + 10
    while len(got) < NEW and asyncio.get_running_loop().time() < deadline:
        async with await consumer.getmany(timeout=0.5) as batch:
            got.extend(m.body for m in batch)
    return got


def _rewind_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "beyond the broker's end" in r.getMessage()
    ]


def _expected_warning() -> str:
    stored, end = OLD * INDEX_UNIT, (OLD - LOST) * INDEX_UNIT
    return (
        f"group g1 partition {KEY}: the stored offset {stored} lies beyond the broker's end {end}"
    )


async def test_a_fresh_group_member_reads_every_message_written_after_the_lost_tail(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="tubemq_aio.consumer")
    async with FakeCluster(topics={"demo": 1}) as cluster:
        await _committed_then_crashed(cluster, _member_read(cluster))
        async with group_consumer(cluster, "g1", lost_tail_window=0) as consumer:
            await wait_until(lambda: consumer.assignment() == [KEY], 20, "the partition held")
            assert consumer.positions()[KEY].current_offset == (OLD - LOST) * INDEX_UNIT
            new = await produce(cluster.master_addr, "demo", NEW, prefix="new")
            # The first LOST of them took offsets below the group's stored offset.
            below = [m for m in cluster.messages("demo") if m.offset < OLD * INDEX_UNIT]
            assert len(below) == OLD  # OLD - LOST old ones, then LOST new ones
            got = await _read_new(consumer)
            assert sorted(got) == sorted(new)
            assert consumer.stats.offset_rewinds == 1
            assert not await consumer.getmany(timeout=0.5)  # nothing old comes again
        assert cluster.committed_messages("g1", "demo") == OLD - LOST + NEW
    warnings = _rewind_logged(caplog)
    assert len(warnings) == 1
    assert warnings[0].startswith(_expected_warning())


async def test_a_group_member_alive_through_the_crash_reads_every_new_message() -> None:
    """The member that committed the old messages stays up: the restarted broker forgot its
    registration, so the member loses the partition and gets it back from the master; that
    register loads the stored offset beyond the end and moves back to the end. Then the
    member's tail check (tests/fake/test_fake_tail_check.py) reads its newest batch back,
    finds its newest messages gone and moves back to that batch's start: the surviving old
    messages of that batch come again, and every new message arrives."""
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        # rpc_timeout 3: a fetch cut by the broker's stop rests its partition that long
        group_consumer(cluster, "g1", rpc_timeout=3.0) as consumer,
    ):
        old: list[bytes] = []

        async def read_old() -> list[bytes]:
            old.extend(await drain(consumer, OLD, timeout=20))
            return old

        await _committed_then_crashed(cluster, read_old)
        await wait_until(lambda: consumer.stats.tail_checks == 1, 30, "the tail check")
        await wait_until(lambda: consumer.assignment() == [KEY], 20, "the partition held")
        start = consumer.positions()[KEY].current_offset
        assert start < (OLD - LOST) * INDEX_UNIT
        new = await produce(cluster.master_addr, "demo", NEW, prefix="new")
        again_count = OLD - LOST - start // INDEX_UNIT
        got: list[bytes] = []
        while len(got) < NEW + again_count:
            async with await consumer.getmany(timeout=10) as batch:
                assert batch, f"only {got} arrived"
                got.extend(m.body for m in batch)
        assert sorted(got) == sorted(new + old[start // INDEX_UNIT : OLD - LOST])
        assert consumer.stats.offset_rewinds == 1
        assert consumer.stats.tail_rewinds == 1


async def test_messages_written_before_the_groups_next_register_stay_skipped() -> None:
    """The gap left for a member that has not read the partition before (docs/failures.md;
    a member that did checks what it read, tests/fake/test_fake_tail_check.py): messages
    written between the broker's return and the group's next register, below the stored
    offset, are behind the end the group moves back to; it reads only what comes after."""
    early_count = 3  # < LOST: the store still ends below the stored offset at the register
    async with FakeCluster(topics={"demo": 1}) as cluster:
        await _committed_then_crashed(cluster, _member_read(cluster))
        early = await produce(cluster.master_addr, "demo", early_count, prefix="early")
        async with group_consumer(cluster, "g1", lost_tail_window=0) as consumer:
            await wait_until(lambda: consumer.assignment() == [KEY], 20, "the partition held")
            end = (OLD - LOST + early_count) * INDEX_UNIT
            assert consumer.positions()[KEY].current_offset == end
            new = await produce(cluster.master_addr, "demo", NEW, prefix="new")
            got = await _read_new(consumer)
            assert sorted(got) == sorted(new)
            assert not set(got) & set(early)
            assert not await consumer.getmany(timeout=0.5)
            assert consumer.stats.offset_rewinds == 1


async def test_a_client_balanced_connect_without_offset_reads_every_new_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="tubemq_aio.consumer")
    async with FakeCluster(topics={"demo": 1}) as cluster:
        await _committed_then_crashed(cluster, _cb_member_read(cluster))
        async with cb_consumer(cluster, "g1", lost_tail_window=0) as consumer:
            position = await consumer.connect(KEY)
            assert position.current_offset == position.max_offset == (OLD - LOST) * INDEX_UNIT
            new = await produce(cluster.master_addr, "demo", NEW, prefix="new")
            got = await _read_new(consumer)
            assert sorted(got) == sorted(new)
            assert consumer.stats.offset_rewinds == 1
    warnings = _rewind_logged(caplog)
    assert len(warnings) == 1
    assert warnings[0].startswith(_expected_warning())


def _refuse_first_rewind(cluster: FakeCluster) -> list[int]:
    """Make broker 1 refuse (500) the first register that asks for an offset; returns the
    offsets refused so far."""
    node = cluster.brokers[0].node
    register = node.handlers[int(Method.BROKER_CONSUMER_REGISTER)]
    refused: list[int] = []

    def handler(request: RpcRequest) -> bytes:
        req = pb.RegisterRequestC2B.FromString(request.body)
        if req.opType == 31 and req.HasField("currOffset") and not refused:
            refused.append(req.currOffset)
            return pb.RegisterResponseB2C(
                success=False, errCode=500, errMsg="refused by the test"
            ).SerializeToString()
        return register(request)

    node.handlers[int(Method.BROKER_CONSUMER_REGISTER)] = handler
    return refused


async def test_a_refused_second_register_is_a_refused_register(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Server-balanced: the refusal goes to the rebalance round like any refused register;
    the next attempt loads the stored offset again and moves back again."""
    caplog.set_level(logging.INFO, logger="tubemq_aio.consumer")
    async with FakeCluster(topics={"demo": 1}) as cluster:
        await _committed_then_crashed(cluster, _member_read(cluster))
        refused = _refuse_first_rewind(cluster)
        async with group_consumer(cluster, "g1", lost_tail_window=0) as consumer:
            await wait_until(lambda: consumer.assignment() == [KEY], 20, "the partition held")
            assert refused == [(OLD - LOST) * INDEX_UNIT]
            assert consumer.positions()[KEY].current_offset == (OLD - LOST) * INDEX_UNIT
            assert consumer.stats.offset_rewinds == 1  # the refused one is not counted
            new = await produce(cluster.master_addr, "demo", NEW, prefix="new")
            assert sorted(await _read_new(consumer)) == sorted(new)
    assert len(_rewind_logged(caplog)) == 2
    assert any(f"broker refused {KEY}: [500]" in r.getMessage() for r in caplog.records)


async def test_a_refused_second_register_fails_a_client_balanced_connect() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        await _committed_then_crashed(cluster, _cb_member_read(cluster))
        refused = _refuse_first_rewind(cluster)
        async with cb_consumer(cluster, "g1", lost_tail_window=0) as consumer:
            with pytest.raises(ServerError) as caught:
                await consumer.connect(KEY)
            assert caught.value.err_code == 500
            assert refused == [(OLD - LOST) * INDEX_UNIT]
            assert consumer.assignment() == []
            assert consumer.stats.offset_rewinds == 0


async def test_a_requested_offset_is_clamped_after_the_crash() -> None:
    """The fake answers like the broker: only the stored offset is loaded unclamped; an offset
    the register asks for is clamped to the store's range, so nothing is rewound."""
    async with FakeCluster(topics={"demo": 1}) as cluster:
        await _committed_then_crashed(cluster, _cb_member_read(cluster))
        async with cb_consumer(cluster, "g1") as consumer:
            position = await consumer.connect(KEY, offset=OLD * INDEX_UNIT)
            assert position.current_offset == position.max_offset == (OLD - LOST) * INDEX_UNIT
            assert consumer.stats.offset_rewinds == 0


async def test_start_broker_refuses_bad_input_and_a_running_broker() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        with pytest.raises(RuntimeError, match="stop_broker"):
            await cluster.start_broker(1, lose_newest=1)
        await cluster.stop_broker(1)
        with pytest.raises(TypeError):
            await cluster.start_broker(1, lose_newest=True)
        with pytest.raises(TypeError):
            await cluster.start_broker(1, lose_newest=1.5)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=">= 0"):
            await cluster.start_broker(1, lose_newest=-1)
        with pytest.raises(TypeError, match="lose_offsets"):
            await cluster.start_broker(1, lose_offsets="5")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="lose_offsets"):
            await cluster.start_broker(1, lose_offsets=True)
        for bad in (-1.0, float("nan"), float("inf"), 61.0):
            with pytest.raises(ValueError, match="lose_offsets"):
                await cluster.start_broker(1, lose_offsets=bad)
        with pytest.raises(KeyError):
            await cluster.start_broker(7)
        assert await cluster.start_broker(1, lose_newest=3) == []  # an empty store loses nothing
        assert cluster.message_count("demo") == 0


async def test_a_sigkill_loses_the_newest_committed_offsets() -> None:
    """``lose_offsets``: the group offsets committed in the last seconds before the stop are
    undone (a real broker had not written them to its offset file), older ones stay."""
    async with FakeCluster(topics={"demo": 1}) as cluster:
        broker = cluster.brokers[0]
        clock = [1000.0]
        broker.clock = lambda: clock[0]
        broker.offsets[("g1", "demo", 0)] = 280
        clock[0] = 1020.0
        broker.offsets[("g1", "demo", 0)] = 560
        broker.offsets[("g2", "demo", 0)] = 28
        await cluster.stop_broker(1)
        await cluster.start_broker(1, lose_offsets=11.0)
        assert cluster.group_offset("g1", 1, "demo", 0) == 280
        assert ("g2", "demo", 0) not in broker.offsets  # g2 had no offset 11 s before
        # Without lose_offsets (a clean stop, or a SIGKILL after the file was written):
        broker.offsets[("g1", "demo", 0)] = 560
        await cluster.stop_broker(1)
        await cluster.start_broker(1)
        assert cluster.group_offset("g1", 1, "demo", 0) == 560


async def test_a_fresh_member_resumes_the_window_below_the_loaded_offset() -> None:
    """A member with no record moves back ``lost_tail_window`` messages below the stored
    offset: the newest surviving old messages within it come again, then every new one."""
    window = LOST + 2
    async with FakeCluster(topics={"demo": 1}) as cluster:
        old: list[bytes] = []

        async def read_old() -> list[bytes]:
            old.extend(await _member_read(cluster)())
            return old

        await _committed_then_crashed(cluster, read_old)
        early = await produce(cluster.master_addr, "demo", 3, prefix="early")
        async with group_consumer(cluster, "g1", lost_tail_window=window) as consumer:
            await wait_until(lambda: consumer.assignment() == [KEY], 20, "the partition held")
            assert consumer.positions()[KEY].current_offset == (OLD - window) * INDEX_UNIT
            new = await produce(cluster.master_addr, "demo", NEW, prefix="new")
            again = old[OLD - window : OLD - LOST]  # one partition: read in offset order
            got = await drain(consumer, len(again) + len(early) + NEW, timeout=20)
            assert got == again + early + new
            assert not await consumer.getmany(timeout=0.5)
            assert consumer.stats.offset_rewinds == 1


async def test_messages_written_before_the_groups_next_register_are_read_by_default() -> None:
    """The window left by resuming at the end (above, ``lost_tail_window=0``) is closed by the
    default window: the member moves back to the store's start (the window reaches below it)
    and reads the early messages, after the surviving old ones again."""
    early_count = 3
    async with FakeCluster(topics={"demo": 1}) as cluster:
        await _committed_then_crashed(cluster, _member_read(cluster))
        early = await produce(cluster.master_addr, "demo", early_count, prefix="early")
        async with group_consumer(cluster, "g1") as consumer:
            await wait_until(lambda: consumer.assignment() == [KEY], 20, "the partition held")
            assert consumer.positions()[KEY].current_offset == 0
            new = await produce(cluster.master_addr, "demo", NEW, prefix="new")
            got = await drain(consumer, OLD - LOST + early_count + NEW, timeout=20)
            assert set(early + new) <= set(got)
            assert len(got) == len(set(got)) == OLD - LOST + early_count + NEW
            assert consumer.stats.offset_rewinds == 1


async def test_a_client_balanced_connect_resumes_the_window_below_the_loaded_offset() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        await _committed_then_crashed(cluster, _cb_member_read(cluster))
        early = await produce(cluster.master_addr, "demo", 3, prefix="early")
        async with cb_consumer(cluster, "g1") as consumer:
            position = await consumer.connect(KEY)
            assert position.current_offset == 0
            assert position.max_offset == (OLD - LOST + 3) * INDEX_UNIT
            got = await drain(consumer, OLD - LOST + 3, timeout=20)
            assert set(early) <= set(got)
            assert consumer.stats.offset_rewinds == 1
