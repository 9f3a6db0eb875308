"""A gateway read that will end after its first batch sends its CommitOffset right behind its
GetMessage (both answers come back together), takes the commit's answer only when it covers the
batch, and commits again when it does not (a broker that took the commit before the read)."""

from __future__ import annotations

import asyncio
import time

import pytest

from tubemq_aio import Producer
from tubemq_aio.consumer._broker import BrokerRpc
from tubemq_aio.gateway.tubemq.early_commit import EarlyCommits, commit_covers
from tubemq_aio.gateway.tubemq.tube_group import TubeGroup, TubeReach
from tubemq_aio.protocol.consumer_meta import INDEX_MSG_UNIT_SIZE
from tubemq_aio.protocol.consumer_replies import OffsetResponse, RawMessage
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster
from tubemq_aio.testing._fake_rpc import Fault

_BATCH = 10
#: How long a GetMessage's answer is held back, and the RPC timeout of the reads: the answer
#: comes well inside the timeout (equal, a loaded machine's deadline sweep could come first).
_HELD_S, _RPC_S = 5.0, 30.0
#: The same for the cancelled read, whose calls, cancelled with their requests out, rest the
#: partition for the RPC timeout before its next read (docs/reliability.md): kept short.
_CANCELLED_HELD_S, _CANCELLED_RPC_S = 2.0, 4.0


async def _filled(cluster: FakeCluster, n: int) -> None:
    async with Producer(cluster.master_addr, topics=["t"]) as producer:
        for i in range(n):
            await producer.send("t", f"m{i}".encode())


def _cursor(cluster: FakeCluster, p: str) -> int:
    """Where the broker's committed cursor of the group stands on partition ``p``."""
    broker, topic, pid = p.split(":")
    return cluster.group_offset("gw-e", int(broker), topic, int(pid))


async def _tube(cluster: FakeCluster, rpc_timeout: float = _RPC_S) -> tuple[TubeGroup, str, int]:
    reach = TubeReach(cluster.master_addr, "d", rpc_timeout=rpc_timeout)
    tube = TubeGroup(reach, group="gw-e", topics=["t"])
    await tube.start()
    (p,) = await tube.partitions(force=True)
    begin, _top = await tube.register(p, 0)
    return tube, p, begin


async def test_reads_after_the_first_send_their_commit_before_the_batch_is_answered() -> None:
    async with FakeCluster(topics={"t": 1}, max_batch=_BATCH) as cluster:
        await _filled(cluster, 5 * _BATCH)
        tube, p, at = await _tube(cluster)
        try:
            bodies: list[bytes] = []
            first = await tube.read(p, at, cursor_at_start=True, max_messages=5)
            assert first.rpcs == 2  # a partition not read yet: GetMessage, then CommitOffset
            bodies += [m.body for m in first.messages]
            at = first.next
            for _ in range(3):
                read = await tube.read(p, at, cursor_at_start=True, max_messages=5)
                assert (read.status, read.rpcs, read.batches) == ("ok", 2, 1)
                bodies += [m.body for m in read.messages]
                assert read.next > at
                at = read.next
            # the GetMessage's answer is held back: the commit reaches the broker meanwhile
            commits = cluster.requests(Method.BROKER_CONSUMER_COMMIT)
            cluster.inject(Method.BROKER_CONSUMER_GET_MESSAGE, Fault.delay(_HELD_S))
            pending = asyncio.create_task(tube.read(p, at, cursor_at_start=True, max_messages=5))
            deadline = time.monotonic() + _HELD_S - 1
            while cluster.requests(Method.BROKER_CONSUMER_COMMIT) == commits:
                assert time.monotonic() < deadline, "no CommitOffset before the GetMessage answered"
                await asyncio.sleep(0.01)
            assert not pending.done()
            last = await pending
            assert (last.rpcs, last.batches) == (2, 1)
            bodies += [m.body for m in last.messages]
            # nothing skipped, nothing twice, and the broker cursor is where the answers end
            assert bodies == [f"m{i}".encode() for i in range(5 * _BATCH)]
            assert last.next == _cursor(cluster, p)
        finally:
            await tube.close()


async def test_a_commit_the_broker_took_before_the_read_is_followed_by_a_real_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with FakeCluster(topics={"t": 1}, max_batch=_BATCH) as cluster:
        await _filled(cluster, 3 * _BATCH)
        tube, p, at = await _tube(cluster)
        try:
            first = await tube.read(p, at, cursor_at_start=True, max_messages=5)
            real = BrokerRpc.commit
            calls: list[int] = []

            async def committed_nothing(
                self: BrokerRpc, partition: object, *, consumed: bool
            ) -> OffsetResponse:
                calls.append(len(calls))
                if len(calls) == 1:  # as a broker answers a commit that ran before the read
                    return OffsetResponse(True, 200, "OK", first.next, -1)
                return await real(self, partition, consumed=consumed)  # type: ignore[arg-type]

            monkeypatch.setattr(BrokerRpc, "commit", committed_nothing)
            second = await tube.read(p, first.next, cursor_at_start=True, max_messages=5)
            assert len(calls) == 2
            assert second.rpcs == 3  # GetMessage, early commit, commit
            assert [m.body for m in second.messages] == [
                f"m{i}".encode() for i in range(_BATCH, 2 * _BATCH)
            ]
            assert second.next == _cursor(cluster, p) > first.next
            monkeypatch.setattr(BrokerRpc, "commit", real)
            third = await tube.read(p, second.next, cursor_at_start=True, max_messages=5)
            assert (third.resync, third.registered, third.rpcs) == ("", False, 2)
            assert third.messages[0].body == f"m{2 * _BATCH}".encode()
        finally:
            await tube.close()


async def test_a_read_cancelled_with_both_calls_out_leaves_no_task() -> None:
    async with FakeCluster(topics={"t": 1}, max_batch=_BATCH) as cluster:
        await _filled(cluster, 3 * _BATCH)
        tube, p, at = await _tube(cluster, _CANCELLED_RPC_S)
        try:
            first = await tube.read(p, at, cursor_at_start=True, max_messages=5)
            commits = cluster.requests(Method.BROKER_CONSUMER_COMMIT)
            cluster.inject(Method.BROKER_CONSUMER_GET_MESSAGE, Fault.delay(_CANCELLED_HELD_S))
            before = asyncio.all_tasks()
            pending = asyncio.create_task(
                tube.read(p, first.next, cursor_at_start=True, max_messages=5)
            )
            deadline = time.monotonic() + _CANCELLED_HELD_S - 1
            while cluster.requests(Method.BROKER_CONSUMER_COMMIT) == commits:
                assert time.monotonic() < deadline, "no CommitOffset before the GetMessage answered"
                await asyncio.sleep(0.01)
            pending.cancel()
            with pytest.raises(asyncio.CancelledError):
                await pending
            await asyncio.sleep(0)
            assert asyncio.all_tasks() - before == set()
            # the partition reads on from the committed offset (the batch is read again)
            again = await tube.read(p, first.next, cursor_at_start=False, max_messages=5)
            assert again.messages[0].body == f"m{_BATCH}".encode()
        finally:
            await tube.close()


def _raw(n: int) -> tuple[RawMessage, ...]:
    return tuple(RawMessage(i, 0, b"x" * 10, 0) for i in range(n))


def test_a_commit_covers_a_batch_only_past_one_index_record_per_message() -> None:
    batch = _raw(3)
    end = 1000 + 3 * INDEX_MSG_UNIT_SIZE
    assert commit_covers(OffsetResponse(True, 200, "OK", end, -1), 1000, batch)
    assert commit_covers(OffsetResponse(True, 200, "OK", end + 280, -1), 1000, batch)
    assert not commit_covers(OffsetResponse(True, 200, "OK", end - 1, -1), 1000, batch)
    assert not commit_covers(OffsetResponse(True, 200, "OK", 1000, -1), 1000, batch)
    assert not commit_covers(OffsetResponse(False, 500, "no", end, -1), 1000, batch)
    # an empty first batch (every message filtered out still has its records): one at least
    assert not commit_covers(OffsetResponse(True, 200, "OK", 1000, -1), 1000, ())


def test_the_prediction_follows_the_last_first_batch() -> None:
    early = EarlyCommits(gather_bytes=10_000)
    assert not early.expected("p", 1000)  # never read: a plain read
    early.saw("p", _raw(600))
    assert early.expected("p", 1000)
    assert not early.expected("p", 1200)
    early.saw("p", _raw(2))
    assert not early.expected("p", 1000)
    early.saw("p", tuple(RawMessage(0, 0, b"x" * 10_000, 0) for _ in range(1)))
    assert early.expected("p", 1000)  # a first batch at the byte cap leaves no room either
    early.forget("p")
    assert not early.expected("p", 1000)
