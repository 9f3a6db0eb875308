"""``on_assigned`` / ``on_revoked`` of both consumers against FakeCluster: coroutine callbacks
are awaited, ``close()`` revokes what is still held (and its batches can still be acked), a
failing or slow callback neither stops the consumer nor holds ``close()`` up, and a callback (or
a ``run()`` handler) may close its consumer without waiting for itself."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tests.support.fake_helpers import cb_consumer, group_consumer, produce
from tubemq_aio import Consumer, MessageBatch
from tubemq_aio.protocol.consumer_meta import PartitionKey
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, wait_until


class Recorder:
    """Async callbacks that record ``(event, sorted keys)`` after yielding to the loop."""

    def __init__(self) -> None:
        self.events: list[tuple[str, list[str]]] = []

    async def assigned(self, keys: list[str]) -> None:
        await asyncio.sleep(0)  # a real await: the consumer must wait for it
        self.events.append(("assigned", sorted(keys)))

    async def revoked(self, keys: list[str]) -> None:
        await asyncio.sleep(0)
        self.events.append(("revoked", sorted(keys)))

    def held(self) -> set[str]:
        keys: set[str] = set()
        for event, which in self.events:
            keys = keys | set(which) if event == "assigned" else keys - set(which)
        return keys


def _recorded(cluster: FakeCluster, group: str, recorder: Recorder) -> Consumer:
    return group_consumer(
        cluster, group, on_assigned=recorder.assigned, on_revoked=recorder.revoked
    )


async def test_async_callbacks_follow_a_rebalance_and_close_revokes_the_rest() -> None:
    async with FakeCluster(topics={"demo": 2}, brokers=2) as cluster:
        a_log, b_log = Recorder(), Recorder()
        async with _recorded(cluster, "g1", a_log) as a:
            await wait_until(lambda: len(a.assignment()) == 4, 20, "first assignment")
            await wait_until(lambda: a_log.held() == set(a.assignment()), 5, "a's callbacks")
            async with _recorded(cluster, "g1", b_log) as b:
                await wait_until(lambda: len(b.assignment()) == 2, 20, "a split")
                await wait_until(lambda: b_log.held() == set(b.assignment()), 5, "b's callbacks")
                await wait_until(lambda: a_log.held() == set(a.assignment()), 5, "a's revoke")
                assert a_log.held().isdisjoint(b_log.held())
                b_keys = b.assignment()
            # b left: its close revoked everything it held, after the assignments.
            assert b_log.events[-1] == ("revoked", b_keys)
            assert b_log.held() == set()
            await wait_until(lambda: len(a.assignment()) == 4, 20, "a took over")
            await wait_until(lambda: a_log.held() == set(a.assignment()), 5, "a's callbacks")
            a_keys = a.assignment()
        assert a_log.events[-1] == ("revoked", a_keys)
        assert a_log.held() == set()


async def test_a_batch_acked_in_on_revoked_at_close_is_committed() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        await produce(cluster.master_addr, "demo", 5)
        held: list[MessageBatch] = []
        acked: list[bool] = []

        async def ack_on_revoke(keys: list[str]) -> None:
            for batch in held:
                acked.append(await batch.ack())

        consumer = group_consumer(cluster, "g1", on_revoked=ack_on_revoke)
        async with consumer:
            batch = await consumer.getmany(timeout=10)
            assert len(batch) == 5
            held.append(batch)
        assert acked == [True]
        assert cluster.committed_messages("g1", "demo") == 5


async def test_failing_and_slow_callbacks_neither_stop_consuming_nor_hold_close() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        sent = await produce(cluster.master_addr, "demo", 3)
        outcome: list[str] = []

        def failing(keys: list[str]) -> None:
            outcome.append("assigned-raised")
            raise RuntimeError("listener bug")

        async def never_returns(keys: list[str]) -> None:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                outcome.append("revoked-cancelled")
                raise

        consumer = group_consumer(
            cluster, "g1", on_assigned=failing, on_revoked=never_returns, callback_timeout=0.2
        )
        async with consumer:
            batch = await consumer.getmany(timeout=10)
            await batch.ack()
            assert sorted(m.body for m in batch) == sorted(sent)
        assert consumer.closed
        assert outcome == ["assigned-raised", "revoked-cancelled"]
        assert cluster.committed_messages("g1", "demo") == 3


async def test_client_balanced_connect_disconnect_and_close_call_back() -> None:
    async with FakeCluster(topics={"demo": 3}) as cluster:
        log = Recorder()
        consumer = cb_consumer(
            cluster,
            "cb1",
            source_count=1,
            node_id=0,
            on_assigned=log.assigned,
            on_revoked=log.revoked,
        )
        async with consumer:
            keys = sorted(m.partition_key for m in await consumer.partitions())
            for key in keys:
                await consumer.connect(key)
            assert log.events == [("assigned", [key]) for key in keys]
            await consumer.disconnect(keys[0])
            assert log.events[-1] == ("revoked", [keys[0]])
        assert log.events[-1] == ("revoked", keys[1:])
        assert log.held() == set()


async def test_on_revoked_may_close_the_consumer_itself_and_two_closes_share_one_revoke() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        calls: list[str] = []
        release = asyncio.Event()

        async def revoked(keys: list[str]) -> None:
            calls.append("revoked")
            await release.wait()
            await consumer.close()  # from inside close()'s own teardown: returns at once
            calls.append("closed from the callback")

        # The default callback_timeout (10 s) is far longer than the test's waits: a close()
        # that waited for itself would show as a timeout below, not as a slow pass.
        consumer = group_consumer(cluster, "g1", on_revoked=revoked)
        await consumer.start()
        await wait_until(lambda: len(consumer.assignment()) == 1, 20, "assignment")
        first = asyncio.create_task(consumer.close())
        second = asyncio.create_task(consumer.close())
        await wait_until(lambda: calls == ["revoked"], 5, "on_revoked to start")
        release.set()
        await asyncio.wait_for(asyncio.gather(first, second), 5)
        assert calls == ["revoked", "closed from the callback"]
        assert consumer.closed


async def test_on_assigned_may_close_the_consumer_without_waiting_for_itself() -> None:
    """``close()`` from ``on_assigned`` (run by the rebalance worker) waited
    ``close_rebalance_wait`` for the worker, that is for the callback it was called from, and
    then cancelled the callback in the middle of its ``await close()``."""
    async with FakeCluster(topics={"demo": 1}) as cluster:
        calls: list[str] = []

        async def assigned(keys: list[str]) -> None:
            calls.append("assigned")
            await consumer.close()  # starts the close; the close waits for this callback
            calls.append("close returned")

        async def revoked(keys: list[str]) -> None:
            calls.append("revoked")

        # close_rebalance_wait (60 s) is far longer than the test's wait: a close() that
        # waited for its own caller would show as a timeout below, not as a slow pass.
        consumer = group_consumer(
            cluster, "g1", on_assigned=assigned, on_revoked=revoked, close_rebalance_wait=60
        )
        await consumer.start()
        async with asyncio.timeout(10):
            await wait_until(lambda: "close returned" in calls, 10, "the callback's close")
            await consumer.close()
        assert calls == ["assigned", "close returned", "revoked"]
        assert consumer.closed
        assert not consumer._supervisor.tasks
        # The partition was released at its broker: the group's next member gets it at once.
        async with group_consumer(cluster, "g1") as second:
            assert await second.wait_for_assignment(timeout=10)


async def test_on_revoked_in_a_rebalance_may_close_the_consumer_without_waiting() -> None:
    async with FakeCluster(topics={"demo": 2}) as cluster:
        calls: list[str] = []

        async def revoked(keys: list[str]) -> None:
            calls.append("revoked")
            if first.closed:
                return  # close()'s own revoke of what is left
            await first.close()
            calls.append("close returned")

        first = group_consumer(cluster, "g1", on_revoked=revoked, close_rebalance_wait=60)
        await first.start()
        await wait_until(lambda: len(first.assignment()) == 2, 20, "assignment")
        async with group_consumer(cluster, "g1") as second:  # the master moves one away
            async with asyncio.timeout(10):
                await wait_until(lambda: "close returned" in calls, 10, "the callback's close")
                await first.close()
            assert first.closed
            assert not first._supervisor.tasks
            assert calls[:2] == ["revoked", "close returned"]
            await wait_until(lambda: len(second.assignment()) == 2, 20, "second takes both")


async def test_client_balanced_on_assigned_of_the_reassignment_may_close_the_consumer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The re-assignment's next connect met the closing consumer: one "could not connect"
    line per partition left (it stops quietly now)."""
    caplog.set_level(logging.INFO, "tubemq_aio")
    async with FakeCluster(topics={"demo": 3}) as cluster:
        calls: list[str] = []

        async def assigned(keys: list[str]) -> None:
            calls.append("assigned")
            await consumer.close()
            calls.append("close returned")

        consumer = cb_consumer(
            cluster,
            "cb1",
            source_count=1,
            node_id=0,
            reassign_interval=0.1,
            on_assigned=assigned,
        )
        await consumer.start()
        async with asyncio.timeout(10):
            await wait_until(lambda: "close returned" in calls, 10, "the callback's close")
            await consumer.close()
        assert calls == ["assigned", "close returned"]
        assert consumer.closed
        assert not consumer._supervisor.tasks
        assert cluster.requests(Method.BROKER_CONSUMER_REGISTER) == 2  # registered, released
        assert [r.getMessage() for r in caplog.records if "connect" in r.getMessage()] == []


async def test_a_run_handler_may_close_the_consumer() -> None:
    """The same shape as a callback closing its consumer (google-cloud-python#4621, a subscriber
    closed from its own callback): ``close()`` from a ``run()`` handler ends ``run()``."""
    async with FakeCluster(topics={"demo": 1}) as cluster:
        await produce(cluster.master_addr, "demo", 3)
        seen: list[bytes] = []
        consumer = group_consumer(cluster, "g1", close_rebalance_wait=60)

        async def handler(message: object) -> None:
            seen.append(b"m")
            await consumer.close()

        await consumer.start()
        async with asyncio.timeout(10):
            await consumer.run(handler)
        assert seen
        assert consumer.closed
        assert not consumer._supervisor.tasks


async def test_client_balanced_on_revoked_of_an_unsubscribable_partition_may_close(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A partition the master no longer lets the group subscribe is dropped by a task of the
    consumer: its ``on_revoked`` closing the consumer crashed that task (the disconnect after
    the callback met the closing consumer), logged as a crash."""
    async with FakeCluster(topics={"demo": 1}) as cluster:
        calls: list[str] = []

        async def revoked(keys: list[str]) -> None:
            calls.append("revoked")
            if consumer.closed:
                return  # close()'s own revoke
            await consumer.close()
            calls.append("close returned")

        consumer = cb_consumer(
            cluster,
            "cb1",
            on_revoked=revoked,
        )
        await consumer.start()
        (key,) = [m.partition_key for m in await consumer.partitions()]
        await consumer.connect(key)
        consumer._on_unsubscribable([PartitionKey.parse(key)])  # as the master's answer does
        async with asyncio.timeout(10):
            await wait_until(lambda: "close returned" in calls, 10, "the callback's close")
            await consumer.close()
        # close() revokes what it still holds: the partition too (its drop stopped at the close).
        assert calls == ["revoked", "close returned", "revoked"]
        assert not consumer._supervisor.tasks
        assert consumer._supervisor.crashes == 0
        assert [r for r in caplog.records if "crashed" in r.getMessage()] == []
        assert cluster.requests(Method.BROKER_CONSUMER_REGISTER) == 2  # registered, released
