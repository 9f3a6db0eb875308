"""The consumer's fetch retries on a failing broker: paced inside a deadline, ended by any
answer, and past the deadline the partition is given up and handed out again (issue 30, the
kind of its first fault: retries bounded by time, not counted), against FakeCluster.

The same faults on the real cluster (a broker restarted, frozen) are in
``tests/integration/test_fidelity.py`` and ``test_chaos_short.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tubemq_aio import ClientBalancedConsumer, Consumer, Producer
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault
from tubemq_aio.testing.polling import wait_until

pytestmark = pytest.mark.timeout(60)

FETCH = Method.BROKER_CONSUMER_GET_MESSAGE


@contextlib.asynccontextmanager
async def _one_member(
    group: str, **options: Any
) -> AsyncIterator[tuple[FakeCluster, Producer, Consumer]]:
    """A FakeCluster with a topic of one partition, a producer, and a consumer of ``group``
    (``options`` on top of test-friendly ones) holding the partition."""
    async with (
        FakeCluster(topics={"t": 1}) as cluster,
        Producer(cluster.master_addr, topics=["t"]) as producer,
        Consumer(
            cluster.master_addr,
            group=group,
            topics=["t"],
            consume_from="earliest",
            join_heartbeat_interval=0.2,
            **options,
        ) as consumer,
    ):
        await consumer.wait_for_assignment(timeout=10)
        yield cluster, producer, consumer


async def test_failing_fetches_back_off_and_an_answer_ends_the_streak() -> None:
    async with _one_member("fr", heartbeat_interval=30) as (cluster, producer, consumer):
        engine = consumer._session.engine if consumer._session else None
        assert engine is not None
        # A refusal (a reset after the write rests the partition rpc_timeout instead: the
        # request may still run, tests/fake/test_fake_consumer_late_request.py).
        failing = cluster.inject(FETCH, Fault.error(503), times=None)
        await asyncio.sleep(2.0)
        # 0.2 s doubling (minus up to 20 % jitter), at least the 300 ms of a 503: 0.3 + 0.32 +
        # 0.64 < 2 < ... + 1.28. A fixed 200 ms rest (before) made about 10 requests in this time.
        assert 2 <= failing.hits <= 5
        cluster.clear_faults()
        await producer.send("t", b"after")
        batch = await consumer.getmany(timeout=10)
        assert [m.body for m in batch] == [b"after"]
        assert engine._failing == {}  # the answer ended the streak
        again = cluster.inject(FETCH, Fault.error(503), times=None)
        assert await batch.ack()
        await asyncio.sleep(1.5)
        # A new streak starts with the short pause again (the old one was at 1.28 s and more).
        assert again.hits >= 3


async def test_a_partition_failing_for_a_heartbeat_interval_is_given_up_then_handed_back() -> None:
    """A broker answering 503 to every fetch (its heartbeats fine, so only the fetch loop sees
    it) for longer than ``heartbeat_interval``: the consumer gives the partition up instead of
    retrying it forever, the master hands it out again, and it is read once the broker serves."""
    options = {"heartbeat_interval": 1.0, "subscription_report_interval": 3}
    async with _one_member("fg", **options) as (cluster, producer, consumer):
        cluster.inject(FETCH, Fault.error(503), times=None)
        await wait_until(lambda: not consumer.assignment(), timeout=10, what="partition given up")
        cluster.clear_faults()
        await producer.send("t", b"back")
        batch = await consumer.getmany(timeout=20)
        assert [m.body for m in batch] == [b"back"]
        assert consumer.assignment()


async def test_a_partition_the_broker_forgot_is_connected_again_by_a_client_balanced_consumer() -> (
    None
):
    """A fetch answered 411 (the broker no longer knows this client, e.g. it restarted between
    two broker heartbeats): the client-balanced consumer connects the partition again instead
    of holding it unfetched for ever (seen on the real cluster too:
    ``tests/integration/test_field_reports.py``)."""
    async with (
        FakeCluster(topics={"t": 1}) as cluster,
        Producer(cluster.master_addr, topics=["t"]) as producer,
        ClientBalancedConsumer(
            cluster.master_addr,
            group="cbf",
            topics=["t"],
            consume_from="earliest",
            heartbeat_interval=60,
        ) as consumer,
    ):
        (meta,) = await consumer.partitions()
        await consumer.connect(meta.partition_key)
        cluster.inject(FETCH, Fault.error(411))
        await wait_until(
            lambda: consumer.stats.partitions_reconnected == 1,
            timeout=10,
            what="the partition connected again",
        )
        await producer.send("t", b"still-read")
        batch = await consumer.getmany(timeout=10)
        assert [m.body for m in batch] == [b"still-read"]
        assert consumer.assignment() == [meta.partition_key]


async def test_a_partition_the_broker_forgot_is_handed_back_after_one_heartbeat() -> None:
    """The same 411 for the server-balanced consumer: it reports its partitions at the next
    heartbeat, so the master hands the partition back then, not after
    ``subscription_report_interval`` heartbeats (50 s here)."""
    options = {"heartbeat_interval": 1.0, "subscription_report_interval": 50}
    async with _one_member("sbf", **options) as (cluster, producer, consumer):
        cluster.inject(FETCH, Fault.error(411))
        await wait_until(lambda: not consumer.assignment(), timeout=10, what="dropped")
        await producer.send("t", b"back")
        batch = await consumer.getmany(timeout=10)
        assert [m.body for m in batch] == [b"back"]
