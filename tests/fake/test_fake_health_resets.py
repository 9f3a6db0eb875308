"""A successful register resets the heartbeat failure count, for both master sessions
(issue 30, fault 2), against FakeCluster's master."""

from __future__ import annotations

import pytest

from tubemq_aio import Consumer, Producer, ServerError
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault

pytestmark = pytest.mark.timeout(60)


async def test_a_consumer_registered_again_does_not_back_off_after_one_more_failure() -> None:
    """The field report: five refused heartbeats, a 411, a successful register, one more
    failure; the consumer used to send no heartbeat for 60 s from then on."""
    async with (
        FakeCluster(topics={"t": 1}) as cluster,
        Consumer(cluster.master_addr, group="hb", topics=["t"], heartbeat_interval=60) as consumer,
    ):
        session = consumer._session
        assert session is not None
        beat = Method.MASTER_CONSUMER_HEARTBEAT
        # Every heartbeat is refused (the session's own loop may send one meanwhile too).
        cluster.inject(beat, Fault.error(500), times=None)
        for _ in range(5):
            await session.heartbeat_once()
        assert session.hb_state.failures >= 5
        cluster.clear_faults()
        cluster.inject(beat, Fault.error(411))
        registers = cluster.requests(Method.MASTER_CONSUMER_REGISTER)
        await session.heartbeat_once()
        assert cluster.requests(Method.MASTER_CONSUMER_REGISTER) >= registers + 1
        assert session.hb_state.failures == 0  # the register proved the master serves us
        cluster.inject(beat, Fault.error(500))
        assert await session.heartbeat_once() is False  # no 60 s back-off
        assert session.hb_state.failures <= 1


async def test_a_producer_registered_again_restarts_its_heartbeat_streak() -> None:
    async with (
        FakeCluster(topics={"t": 1}) as cluster,
        Producer(cluster.master_addr, topics=["t"], heartbeat_interval=60) as producer,
    ):
        session = producer._session
        assert session is not None
        beat = Method.MASTER_PRODUCER_HEARTBEAT
        cluster.inject(beat, Fault.error(500), times=4)
        for _ in range(4):
            with pytest.raises(ServerError):
                await session.heartbeat()
        assert session.heartbeat_streak.count == 4
        cluster.inject(beat, Fault.error(411))
        cluster.inject(beat, Fault.error(500))  # the heartbeat after the register fails too
        with pytest.raises(ServerError):
            await session.heartbeat()
        assert session.reregistrations == 1
        assert session.heartbeat_streak.count == 1  # not 5: the register ended the streak
