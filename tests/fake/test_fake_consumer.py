"""Server-balanced Consumer against FakeCluster: consume, commit, replay, rebalance, errors."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from tests.support.fake_helpers import drain, group_consumer, produce
from tubemq_aio import ClientClosedError, ConfigError, Consumer, Message, ServerError
from tubemq_aio.protocol.message import decode_payload
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault, wait_until

GET = Method.BROKER_CONSUMER_GET_MESSAGE


async def test_produce_then_consume_everything_once_and_commit_it() -> None:
    async with FakeCluster(topics={"demo": 3}, brokers=2, max_batch=16) as cluster:
        sent = await produce(cluster.master_addr, "demo", 300)
        async with group_consumer(cluster, "g1") as consumer:
            got = await drain(consumer, 300, timeout=20)
            assert sorted(got) == sorted(sent)
            assert not await consumer.getmany(timeout=0.3)  # nothing more, no duplicates
        assert cluster.committed_messages("g1", "demo") == 300


async def test_a_second_group_replays_and_a_restarted_group_continues() -> None:
    async with FakeCluster(topics={"demo": 2}) as cluster:
        sent = await produce(cluster.master_addr, "demo", 50)
        async with group_consumer(cluster, "ga") as consumer:
            assert sorted(await drain(consumer, 50, timeout=20)) == sorted(sent)
        more = await produce(cluster.master_addr, "demo", 10, prefix="late")
        async with group_consumer(cluster, "ga") as consumer:  # continues after its commit
            assert sorted(await drain(consumer, 10, timeout=20)) == sorted(more)
        async with group_consumer(cluster, "gb") as consumer:  # a new group starts from the start
            assert sorted(await drain(consumer, 60, timeout=20)) == sorted(sent + more)


async def test_nacked_batch_is_delivered_again() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        sent = await produce(cluster.master_addr, "demo", 5)
        async with group_consumer(cluster, "g1", auto_ack=False) as consumer:
            first = await consumer.getmany(timeout=10)
            assert first
            await first.nack()
            again = await drain(consumer, 5, timeout=10)
        assert sorted(again) == sorted(sent)
        assert [m.body for m in first] == again[: len(first)]


async def test_rebalance_splits_the_group_and_hands_over_on_close() -> None:
    async with FakeCluster(topics={"demo": 2}, brokers=2) as cluster:
        sent = await produce(cluster.master_addr, "demo", 80)
        async with group_consumer(cluster, "g1") as a, group_consumer(cluster, "g1") as b:
            await wait_until(lambda: len(a.assignment()) == len(b.assignment()) == 2, 20, "a split")
            assert not set(a.assignment()) & set(b.assignment())
            got_a, got_b = await asyncio.gather(drain(a, 1, timeout=10), drain(b, 1, timeout=10))
            await b.close()

            await wait_until(lambda: len(a.assignment()) == 4, 20, "took over")
            rest = await drain(a, 80 - len(got_a) - len(got_b), timeout=20)
        # At-least-once: nothing lost; what b fetched but did not ack may come again.
        assert set(got_a + got_b + rest) == set(sent)
        assert cluster.committed_messages("g1", "demo") == 80


async def test_unknown_topic_is_refused_with_431() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        consumer = Consumer(cluster.master_addr, group="g1", topics=["nope"], register_attempts=1)
        with pytest.raises(ServerError) as info:
            await consumer.start()
        assert info.value.err_code == 431
        await consumer.close()


@pytest.mark.parametrize("code", [452, 503, 500, 403])
async def test_fetch_errors_are_waited_out(code: int) -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        sent = await produce(cluster.master_addr, "demo", 10)
        cluster.inject(GET, Fault.error(code), times=1 if code == 403 else 3)  # 403 waits 2 s
        async with group_consumer(cluster, "g1") as consumer:
            assert sorted(await drain(consumer, 10, timeout=20)) == sorted(sent)


async def test_lost_fetch_answers_are_retried() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        sent = await produce(cluster.master_addr, "demo", 10)
        cluster.inject(GET, Fault.reset(), times=2)
        async with group_consumer(cluster, "g1", rpc_timeout=3) as consumer:
            assert sorted(await drain(consumer, 10, timeout=20)) == sorted(sent)


async def test_broker_forgetting_the_consumer_ends_in_a_new_assignment() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        await produce(cluster.master_addr, "demo", 3)
        async with group_consumer(cluster, "g1") as consumer:
            await drain(consumer, 3, timeout=20)
            cluster.brokers[0].registrations.clear()  # e.g. the broker restarted
            late = await produce(cluster.master_addr, "demo", 3, prefix="late")
            assert sorted(await drain(consumer, 3, timeout=30)) == sorted(late)


async def test_corruption_on_the_way_is_read_again_not_lost() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        sent = await produce(cluster.master_addr, "demo", 20)
        cluster.corrupt_next_fetches(2)
        async with group_consumer(cluster, "g1") as consumer:
            got = await drain(consumer, 20, timeout=20)
            assert consumer.stats.crc_refetches == 2
        assert sorted(got) == sorted(sent)
        assert cluster.committed_messages("g1", "demo") == 20


async def test_corruption_at_rest_is_dropped_after_rereads_and_the_stream_goes_on() -> None:
    async with FakeCluster(topics={"demo": 1}, max_batch=4) as cluster:
        sent = await produce(cluster.master_addr, "demo", 8)
        log = cluster.brokers[0].log("demo", 0)
        bad = log.messages[1]
        log.messages[1] = dataclasses.replace(bad, checksum=bad.checksum ^ 1)
        async with group_consumer(cluster, "g1") as consumer:
            got = await drain(consumer, 7, timeout=20)
            assert consumer.stats.crc_refetches == 1  # the second read showed the same damage
        assert sorted(got) == sorted(set(sent) - {decode_payload(bad.payload, bad.flag, 0).body})
        assert cluster.committed_messages("g1", "demo") == 8


@pytest.mark.parametrize("used", [-1, 1.5, float("nan"), "2", True, 6])
async def test_give_back_refuses_a_bad_count_and_the_batch_stays_whole(used: object) -> None:
    """A count that is not an int in [0, len(batch)] was taken as it came: -1 kept all but the
    last message (a negative slice), 1.5 or NaN left a float in the engine's buffer and every
    later ``getmany`` raised TypeError, ``"2"`` raised TypeError with the batch left half
    returned. Now a ConfigError, before anything moves: the batch is unchanged."""
    async with FakeCluster(topics={"demo": 1}) as cluster:
        await produce(cluster.master_addr, "demo", 5)
        sent = cluster.bodies("demo")
        async with group_consumer(cluster, "g1", auto_ack=False) as consumer:
            batch = await consumer.getmany(timeout=10)
            assert [m.body for m in batch] == sent
            with pytest.raises(ConfigError, match="give_back: used must be an integer"):
                await batch.give_back(used)  # type: ignore[arg-type]
            assert not batch.settled
            kept = await batch.give_back(2)  # the same batch still works as documented
            assert kept is not None
            assert [m.body for m in kept] == sent[:2]
            await kept.ack()
            rest = await consumer.getmany(timeout=10)
            assert [m.body for m in rest] == sent[2:]
            await rest.ack()
        assert cluster.committed_messages("g1", "demo") == 5


async def test_run_refuses_a_handler_that_returns_no_awaitable() -> None:
    """A plain ``def`` handler passed the callable check; awaiting its None then failed after
    it had run, the batch was nacked and delivered again at once: thousands of runs of the
    handler a second, each logged as a failure. Now ``run()`` stops with a ConfigError at the
    first message, and the batch comes again."""
    async with FakeCluster(topics={"demo": 1}) as cluster:
        sent = await produce(cluster.master_addr, "demo", 3)
        async with group_consumer(cluster, "g1", auto_ack=False) as consumer:
            seen: list[bytes] = []

            def handler(message: Message) -> None:
                seen.append(message.body)

            with pytest.raises(ConfigError, match="run: handler must be an async callable"):
                await asyncio.wait_for(consumer.run(handler), 10)  # type: ignore[arg-type]
            assert len(seen) == 1
            again = await consumer.getmany(timeout=10)
            assert sorted(m.body for m in again) == sorted(sent)
            await again.ack()


async def test_run_raises_the_error_of_a_crash_not_an_exception_group() -> None:
    """A background task's crash ended ``run()`` with an ExceptionGroup of its workers'
    ClientClosedErrors (from its TaskGroup): ``except TubeMQError`` did not catch it."""

    async def crash() -> None:
        raise ZeroDivisionError("bug in a background task")

    async def handler(message: Message) -> None:
        return None

    async with FakeCluster(topics={"demo": 1}) as cluster:
        consumer = group_consumer(cluster, "g1")
        async with consumer:
            running = asyncio.ensure_future(consumer.run(handler, concurrency=3))
            await asyncio.sleep(0.1)
            consumer._supervisor.spawn(crash(), "fetch-x")
            with pytest.raises(ClientClosedError, match="crashed"):
                await asyncio.wait_for(running, 10)
