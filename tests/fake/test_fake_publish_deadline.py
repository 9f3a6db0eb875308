"""``publish()`` ends by ``publish_timeout`` even while the master does not answer.

Found by sending with the whole cluster down: ``publish("u")`` raised "no writable partition
after 15 s" 20 s after it was called. Each heartbeat of the wait (and the deployment check)
ran to ``rpc_timeout`` before the wait looked at its own deadline, so the wait lasted up to
``publish_timeout + rpc_timeout`` (and ``start()`` with ``topics=`` as long).
"""

from __future__ import annotations

import asyncio

import pytest

from tubemq_aio import Producer, TopicUnavailableError
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault

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
