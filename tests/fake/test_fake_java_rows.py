"""The rows of the Java client's API added for issue 33, against FakeCluster."""

from __future__ import annotations

import asyncio
import logging
import math
import time

import pytest

from tests.support.fake_helpers import HEARTBEAT, drain, group_consumer, produce
from tubemq_aio import (
    AssignmentTimeoutError,
    ClientBalancedConsumer,
    ClientClosedError,
    ConfigError,
    ConsumerConfig,
    Message,
    Producer,
)
from tubemq_aio._stats_log import format_stats_line
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault, TopicLayout, wait_until


def cb_consumer(cluster: FakeCluster, **options: object) -> ClientBalancedConsumer:
    """A client-balanced consumer of topic ``demo`` (one node), fast heartbeats."""
    return ClientBalancedConsumer(
        cluster.master_addr,
        group="cb1",
        topics=["demo"],
        source_count=1,
        node_id=0,
        heartbeat_interval=HEARTBEAT,
        **options,  # type: ignore[arg-type]
    )


async def test_wait_for_assignment_returns_the_held_partitions() -> None:
    async with FakeCluster(topics={"demo": 2}) as cluster:
        consumer = group_consumer(cluster, "g1")
        with pytest.raises(ClientClosedError):  # not started yet
            await consumer.wait_for_assignment(1)
        async with consumer:
            keys = await consumer.wait_for_assignment(timeout=20)
            assert keys == ["1:demo:0", "1:demo:1"] == consumer.assignment()
            for bad in (-1, math.nan, math.inf, "1", None):
                with pytest.raises(ConfigError):
                    await consumer.wait_for_assignment(bad)  # type: ignore[arg-type]
        with pytest.raises(ClientClosedError):
            await consumer.wait_for_assignment(1)


async def test_wait_for_assignment_times_out_with_a_typed_error() -> None:
    cluster = FakeCluster(topics={"demo": 1})
    async with cluster, group_consumer(cluster, "g1") as first:
        await first.wait_for_assignment(20)
        async with group_consumer(cluster, "g1") as second:  # one partition, held by first
            loop = asyncio.get_running_loop()
            began = loop.time()
            with pytest.raises(AssignmentTimeoutError) as err:
                await second.wait_for_assignment(0.3)
            assert isinstance(err.value, TimeoutError)
            assert 0.3 <= loop.time() - began < 10.0
            with pytest.raises(AssignmentTimeoutError):
                await second.wait_for_assignment(0)  # looks once


async def test_wait_for_assignment_ends_when_the_consumer_closes() -> None:
    cluster = FakeCluster(topics={"demo": 1})
    async with cluster, group_consumer(cluster, "g1") as first:
        await first.wait_for_assignment(20)
        second = group_consumer(cluster, "g1")
        await second.start()
        waiter = asyncio.create_task(second.wait_for_assignment(30))
        await asyncio.sleep(0.05)
        await second.close()
        with pytest.raises(ClientClosedError):
            await asyncio.wait_for(waiter, 5)


async def test_client_balanced_wait_for_assignment_sees_a_connect() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        consumer = cb_consumer(cluster)
        async with consumer:
            with pytest.raises(AssignmentTimeoutError):
                await consumer.wait_for_assignment(0.05)
            waiter = asyncio.create_task(consumer.wait_for_assignment(10))
            await consumer.connect("1:demo:0")
            assert await waiter == ["1:demo:0"]


async def test_paused_state_and_paused_partitions_since_when() -> None:
    cluster = FakeCluster(topics={"demo": 2, "other": 1})
    async with cluster, group_consumer(cluster, "g1") as consumer:
        await wait_until(lambda: len(consumer.assignment()) == 2, 20, "both partitions")
        assert not consumer.is_paused
        assert consumer.paused_partitions() == {}
        before = time.time()
        consumer.pause("1:demo:1")
        with pytest.raises(ConfigError, match="'other' is neither"):
            consumer.pause(["other"])  # a topic this consumer does not subscribe to
        one = consumer.paused_partitions()
        assert list(one) == ["1:demo:1"]
        assert before <= one["1:demo:1"] <= time.time()
        assert not consumer.is_paused
        await asyncio.sleep(0.02)
        consumer.pause()
        assert consumer.is_paused
        every = consumer.paused_partitions()
        assert list(every) == ["1:demo:0", "1:demo:1"]
        assert every["1:demo:1"] == one["1:demo:1"]  # the earliest pause covering it
        assert every["1:demo:0"] > one["1:demo:1"]
        consumer.pause("1:demo:1")  # paused again: the time stays
        consumer.resume(None)
        assert not consumer.is_paused
        assert consumer.paused_partitions() == {}


async def test_producer_says_whether_a_topic_accepts_publishing_now() -> None:
    async with FakeCluster(topics={"demo": 2, "later": 1}) as cluster:
        producer = Producer(cluster.master_addr, topics=["demo"], heartbeat_interval=1.0)
        with pytest.raises(ClientClosedError):
            producer.accepts_publish("demo")
        async with producer:
            assert producer.accepts_publish("demo")
            assert producer.accepts_publish(" demo ")  # trimmed, as every name
            assert not producer.accepts_publish("later")  # not published by this producer
            for bad in ("", "  ", None, 5, b"demo"):
                with pytest.raises(ConfigError):
                    producer.accepts_publish(bad)  # type: ignore[arg-type]
            cluster.add_topic(TopicLayout("demo", 2, accept_publish=False))
            await wait_until(lambda: not producer.accepts_publish("demo"), 10, "demo closed")
            cluster.add_topic(TopicLayout("demo", 2))
            await wait_until(lambda: producer.accepts_publish("demo"), 10, "demo open again")
        with pytest.raises(ClientClosedError):
            producer.accepts_publish("demo")


async def test_client_balanced_consumer_acts_on_the_masters_consume_from_max() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        await produce(cluster.master_addr, "demo", 10)
        consumer = cb_consumer(cluster, consume_from="earliest", auto_ack=False)
        async with consumer:
            await consumer.connect("1:demo:0")
            first = await consumer.getmany(timeout=10)
            assert next(m.body for m in first) == b"m-0"  # started at the earliest message
            await first.nack()
            cluster.set_consume_from_max("cb1")
            await wait_until(
                lambda: consumer.positions()["1:demo:0"].current_offset == 28 * 10,
                10,
                "moved to the max offset",
            )
            later = await produce(cluster.master_addr, "demo", 3, prefix="late")
            assert await drain(consumer, 3, timeout=10) == later  # none of the first ten
            control = consumer._session.max_offset_ctrl  # type: ignore[union-attr]
            assert control.ctrl_id == cluster.master.consume_from_max["cb1"]
            assert not control.pending
            reports = cluster.requests(Method.MASTER_CONSUMER_HEARTBEAT_V2)
            await wait_until(
                lambda: cluster.requests(Method.MASTER_CONSUMER_HEARTBEAT_V2) >= reports + 2,
                10,
                "two more heartbeats",
            )
            assert consumer.positions()["1:demo:0"].current_offset == 28 * 13  # no second reset


def test_java_tuning_options_are_validated() -> None:
    config = ConsumerConfig.from_url("tubemq://h:1?group=g1&topics=demo")
    assert (config.heartbeat_max_retries, config.heartbeat_retry_backoff) == (5, 60.0)
    assert (config.register_fail_wait, config.subscription_report_interval) == (1.0, 6)
    assert (config.close_rebalance_wait, config.run_error_rollback) == (5.0, True)
    bad: dict[str, object] = {
        "heartbeat_max_retries": -1,
        "heartbeat_retry_backoff": math.nan,
        "register_fail_wait": math.inf,
        "subscription_report_interval": 2,
        "close_rebalance_wait": -0.1,
        "run_error_rollback": "no",
    }
    for name, value in bad.items():
        with pytest.raises(ConfigError, match=name):
            ConsumerConfig.from_url("tubemq://h:1?group=g1&topics=demo", **{name: value})  # type: ignore[arg-type]


async def test_register_fail_wait_paces_the_register_attempts() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        cluster.inject(Method.MASTER_CONSUMER_REGISTER, Fault.error(500), times=2)
        loop = asyncio.get_running_loop()
        began = loop.time()
        async with group_consumer(cluster, "g1", register_fail_wait=0.05):
            took = loop.time() - began
        assert cluster.requests(Method.MASTER_CONSUMER_REGISTER) == 3
        assert took < 0.9  # two waits of the default 1 s would take 2 s


async def test_heartbeat_retry_backoff_after_heartbeat_max_retries() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        consumer = group_consumer(
            cluster,
            "g1",
            heartbeat_max_retries=0,
            heartbeat_retry_backoff=0.1,
        )
        async with consumer:
            await consumer.wait_for_assignment(20)
            cluster.inject(Method.MASTER_CONSUMER_HEARTBEAT, Fault.error(500), times=None)
            before = cluster.requests(Method.MASTER_CONSUMER_HEARTBEAT)
            await asyncio.sleep(1.6)
            failed = cluster.requests(Method.MASTER_CONSUMER_HEARTBEAT) - before
            assert failed >= 5  # every 0.1 s after the first failure, not every 1 s
            assert consumer._session.hb_state._interval == 6  # type: ignore[union-attr]


async def test_run_error_rollback_false_counts_a_failed_batch_consumed() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        await produce(cluster.master_addr, "demo", 5)
        seen: list[bytes] = []

        async def handler(message: Message) -> None:
            seen.append(message.body)
            raise RuntimeError("handler bug")

        async with group_consumer(cluster, "g1", run_error_rollback=False) as consumer:
            runner = asyncio.create_task(consumer.run(handler))
            await wait_until(lambda: cluster.committed_messages("g1", "demo") == 5, 10, "acked")
            await asyncio.sleep(0.3)
            assert seen.count(b"m-0") == 1  # not delivered again
        await runner


async def test_run_error_rollback_default_delivers_the_batch_again() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        await produce(cluster.master_addr, "demo", 1)
        seen: list[bytes] = []

        async def handler(message: Message) -> None:
            seen.append(message.body)
            if len(seen) == 1:
                raise RuntimeError("first call fails")

        async with group_consumer(cluster, "g1") as consumer:
            runner = asyncio.create_task(consumer.run(handler))
            await wait_until(lambda: cluster.committed_messages("g1", "demo") == 1, 10, "acked")
            assert seen == [b"m-0", b"m-0"]
        await runner


def test_stats_line_gives_every_counter_and_its_change() -> None:
    last: dict[str, float] = {}
    values: dict[str, object] = {"sent": 3, "blocking": {"blocked": 0}, "ok": True, "id": "x"}
    assert format_stats_line("P", values, last) == "P: blocking.blocked=0 sent=3"
    values["sent"] = 7
    assert format_stats_line("P", values, last) == "P: blocking.blocked=0 sent=7(+4)"


async def test_stats_lines_are_opt_in_and_end_on_close(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tubemq_aio.stats")
    async with FakeCluster(topics={"demo": 1}) as cluster:
        async with Producer(cluster.master_addr, topics=["demo"]) as quiet:
            await quiet.send("demo", b"x")
            await asyncio.sleep(0.2)
        assert not [r for r in caplog.records if r.name == "tubemq_aio.stats"]
        producer = Producer(cluster.master_addr, topics=["demo"], stats_log_interval=0.05)
        consumer = group_consumer(cluster, "g1", stats_log_interval=0.05)
        async with producer, consumer:
            await producer.send("demo", b"x")
            await drain(consumer, 2, timeout=10)
            await asyncio.sleep(0.2)
        lines = [r.getMessage() for r in caplog.records if r.name == "tubemq_aio.stats"]
        assert any(line.startswith("Producer ") and " sent=1" in line for line in lines)
        assert any(line.startswith("Consumer ") and " messages=2" in line for line in lines)
        count = len(lines)
        await asyncio.sleep(0.2)  # closed: no more lines
        assert len([r for r in caplog.records if r.name == "tubemq_aio.stats"]) == count
    with pytest.raises(ConfigError, match="stats_log_interval"):
        ConsumerConfig.from_url("tubemq://h:1?group=g1&topics=demo", stats_log_interval=math.nan)
