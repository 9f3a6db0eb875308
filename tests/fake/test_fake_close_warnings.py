"""What ``close()`` warns about is what happened.

Found by closing clients: a producer at ``close_grace=0`` warned "closing with 0 sends still
pending" when its last send ended in the same turn of the loop as the grace (nothing was cut
short), and a consumer whose close at the master outlasted ``close_timeout`` warned "close did
not finish releasing partitions in time" after every partition had been released.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from tests.support.fake_helpers import group_consumer
from tubemq_aio import Consumer, Producer
from tubemq_aio.producer._window import SendWindow
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault, wait_until

pytestmark = pytest.mark.timeout(60)
MASTER_CLOSE = Method.MASTER_CONSUMER_CLOSE
REGISTER = Method.BROKER_CONSUMER_REGISTER


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


async def test_a_producer_closing_at_grace_zero_with_nothing_pending_warns_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        producer = Producer(cluster.master_addr, topics=["demo"], close_grace=0)
        await producer.start()
        await producer.send("demo", b"x")
        with caplog.at_level(logging.WARNING, logger="tubemq_aio"):
            await producer.close()
    assert warnings(caplog) == []


async def test_a_grace_ending_with_the_last_send_warns_nothing(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last send ends in the very turn of the loop in which ``close_grace=0`` runs out:
    the grace's timeout cancels the wait first, the send is done when the close looks."""

    async def drained_as_the_grace_ends(window: SendWindow) -> None:
        loop = asyncio.get_running_loop()
        ends: asyncio.Future[None] = loop.create_future()
        loop.call_soon(window.release)  # queued after the grace's own timeout
        await ends  # cancelled by the grace

    async with FakeCluster(topics={"demo": 1}) as cluster:
        producer = Producer(cluster.master_addr, topics=["demo"], close_grace=0)
        await producer.start()
        assert producer._window.try_acquire()  # one send outstanding
        monkeypatch.setattr(SendWindow, "drained", drained_as_the_grace_ends)
        with caplog.at_level(logging.WARNING, logger="tubemq_aio"):
            await producer.close()
        assert producer.in_flight == 0
    assert warnings(caplog) == []


async def _holding(cluster: FakeCluster, **options: object) -> Consumer:
    consumer = group_consumer(cluster, "g1", **options)
    await consumer.start()
    await wait_until(lambda: bool(consumer.assignment()), 20, "a partition")
    return consumer


async def test_a_consumer_close_warns_nothing_when_all_went_well(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        consumer = await _holding(cluster)
        with caplog.at_level(logging.WARNING, logger="tubemq_aio"):
            await consumer.close()
        assert cluster.requests(MASTER_CLOSE) == 1
    assert warnings(caplog) == []


async def test_a_master_close_cut_short_is_reported_as_such_not_as_a_release(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        broker = cluster.brokers[0]
        consumer = await _holding(cluster, close_timeout=1.0)
        cluster.inject(MASTER_CLOSE, Fault.no_answer(), times=None)
        with caplog.at_level(logging.WARNING, logger="tubemq_aio"):
            await consumer.close()
        assert not broker.registrations  # released
        assert cluster.requests(MASTER_CLOSE) == 1
    said = warnings(caplog)
    assert len(said) == 1, said
    assert said[0].startswith("no master answered the close within 1.0 s")
    assert "the partitions were released" in said[0]


async def test_a_release_cut_short_is_reported_and_the_master_close_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        consumer = await _holding(cluster, close_timeout=1.0, rpc_timeout=3.0)
        cluster.inject(REGISTER, Fault.no_answer(), times=None)  # the unregister: no answer
        with caplog.at_level(logging.WARNING, logger="tubemq_aio"):
            await consumer.close()
        assert cluster.requests(MASTER_CLOSE) == 0
    assert [m for m in warnings(caplog) if "close_timeout" in m] == [
        "close_timeout (1.0 s) ended before every partition was released at its broker and "
        "before the master was told: the brokers keep the partitions not released until "
        "their registrations expire"
    ]
