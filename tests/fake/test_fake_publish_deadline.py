"""``publish()`` ends by ``publish_timeout`` even while the master does not answer, and at
``close()``.

Found by sending with the whole cluster down: ``publish("u")`` raised "no writable partition
after 15 s" 20 s after it was called. Each heartbeat of the wait (and the deployment check)
ran to ``rpc_timeout`` before the wait looked at its own deadline, so the wait lasted up to
``publish_timeout + rpc_timeout`` (and ``start()`` with ``topics=`` as long). And a
``publish()`` waiting for a topic when ``close()`` came went on heartbeating a closed pool
until ``publish_timeout`` (30 s), then blamed the master.
"""

from __future__ import annotations

import asyncio

import pytest

from tubemq_aio import ClientClosedError, Producer, TopicUnavailableError
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault, TopicLayout

pytestmark = pytest.mark.timeout(60)
HEARTBEAT = Method.MASTER_PRODUCER_HEARTBEAT
#: Far above the 1 s publish_timeout and far below the 20 s rpc_timeout.
BOUND = 8.0


async def test_publish_to_a_silent_master_ends_by_publish_timeout() -> None:
    async with (
        FakeCluster(topics={"demo": 1, "other": 1}) as cluster,
        Producer(
            cluster.master_addr, topics=["demo"], publish_timeout=1.0, rpc_timeout=20.0
        ) as producer,
    ):
        cluster.inject(HEARTBEAT, Fault.no_answer(), times=None)
        loop = asyncio.get_running_loop()
        began = loop.time()
        with pytest.raises(TopicUnavailableError, match="1 s"):
            await asyncio.wait_for(producer.publish("other"), 30)
        assert 0.9 <= loop.time() - began < BOUND
        # The producer goes on: once the master answers again, the topic is published.
        cluster.clear_faults()
        await producer.publish("other")
        assert producer.accepts_publish("other")


async def test_close_ends_a_publish_waiting_for_a_topic() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        producer = Producer(cluster.master_addr, topics=["demo"], publish_timeout=30)
        await producer.start()
        cluster.add_topic(TopicLayout("slow", 1, accept_publish=False))
        publishing = asyncio.create_task(producer.publish("slow"))
        await asyncio.sleep(0.2)
        assert not publishing.done()
        loop = asyncio.get_running_loop()
        began = loop.time()
        await producer.close()
        with pytest.raises(ClientClosedError, match="slow"):
            await asyncio.wait_for(publishing, 40)
        assert loop.time() - began < BOUND  # not publish_timeout's 30 s


async def test_a_topic_whose_wait_ended_before_any_verdict_is_not_kept_published() -> None:
    """Found by sending to a topic that does not exist with a short ``timeout``: the send's
    deadline ended the topic's wait before the master was asked whether it is deployed, and
    the name stayed among the published topics for good: every later heartbeat carried it,
    and sends to ever new names (a typo, names from input) grew that list without end."""
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        Producer(cluster.master_addr, topics=["demo"]) as producer,
    ):
        cluster.inject(HEARTBEAT, Fault.delay(0.5), times=3)
        for name in ("nosuch1", "nosuch2"):
            with pytest.raises(TopicUnavailableError):
                await producer.send(name, b"x", timeout=0.1)
        publishing = asyncio.create_task(producer.publish("nosuch3"))
        await asyncio.sleep(0.1)
        publishing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await publishing
        await asyncio.sleep(1.0)  # the delayed heartbeats are answered meanwhile
        assert producer.topics == ("demo",)
        # A deployed topic that is not writable yet stays published, as before: it is used
        # once it opens.
        cluster.add_topic(TopicLayout("slow", 1, accept_publish=False))
        with pytest.raises(TopicUnavailableError):
            await producer.send("slow", b"x", timeout=1.5)
        assert list(producer.topics) == ["demo", "slow"]
