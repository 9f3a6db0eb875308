"""``Producer.flush()``: waits for the sends ``send_nowait`` started, as aiokafka's ``flush`` does
(the producer had none; a Kafka user's ``send_nowait`` … ``flush()`` had nothing to call)."""

from __future__ import annotations

import asyncio
import math

import pytest

from tubemq_aio import ClientClosedError, ConfigError, FlushTimeoutError, Producer, ServerError
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault

pytestmark = pytest.mark.timeout(60)
SEND = Method.BROKER_PRODUCER_SEND_MESSAGE


async def test_flush_waits_for_every_send_nowait_and_raises_none_of_their_errors() -> None:
    async with (
        FakeCluster(topics={"demo": 2}) as cluster,
        Producer(cluster.master_addr, topics=["demo"]) as producer,
    ):
        await producer.flush()  # nothing pending: returns at once
        cluster.inject(SEND, Fault.delay(0.3), times=20)
        futures = [producer.send_nowait("demo", b"m%d" % i) for i in range(20)]
        cluster.inject(SEND, Fault.error(400, "refused"), times=1)
        refused = producer.send_nowait("demo", b"refused")
        assert not any(f.done() for f in futures)
        await producer.flush()
        assert all(f.done() for f in [*futures, refused])
        assert all(f.result().partition_key for f in futures)
        assert isinstance(refused.exception(), ServerError)


async def test_flush_with_a_timeout_raises_and_leaves_the_sends_going() -> None:
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        Producer(cluster.master_addr, topics=["demo"]) as producer,
    ):
        cluster.inject(SEND, Fault.delay(1.0), times=2)
        futures = [producer.send_nowait("demo", b"slow") for _ in range(2)]
        with pytest.raises(FlushTimeoutError, match="2 of 2") as info:
            await producer.flush(timeout=0.1)
        assert isinstance(info.value, TimeoutError)
        assert not any(f.done() for f in futures)
        await producer.flush()
        assert all(f.result() for f in futures)


async def test_a_cancelled_flush_leaves_the_sends_going() -> None:
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        Producer(cluster.master_addr, topics=["demo"]) as producer,
    ):
        cluster.inject(SEND, Fault.delay(0.5), times=1)
        future = producer.send_nowait("demo", b"slow")
        flushing = asyncio.ensure_future(producer.flush())
        await asyncio.sleep(0.1)
        flushing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await flushing
        assert (await future).partition_key


@pytest.mark.parametrize("timeout", [0, -1, math.nan, math.inf, 1e9, "1", True])
async def test_flush_refuses_a_bad_timeout(timeout: object) -> None:
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        Producer(cluster.master_addr, topics=["demo"]) as producer,
    ):
        with pytest.raises(ConfigError, match="timeout"):
            await producer.flush(timeout=timeout)  # type: ignore[arg-type]


async def test_two_flushes_at_once_and_a_flush_cut_short_by_close() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        producer = Producer(cluster.master_addr, topics=["demo"], close_grace=0.2)
        await producer.start()
        cluster.inject(SEND, Fault.delay(0.3), times=4)
        futures = [producer.send_nowait("demo", b"m") for _ in range(4)]
        await asyncio.gather(producer.flush(), producer.flush(timeout=30))
        assert all(f.result().partition_key for f in futures)
        cluster.inject(SEND, Fault.no_answer(), times=None)
        stuck = producer.send_nowait("demo", b"never answered", timeout=30)
        flushing = asyncio.ensure_future(producer.flush())
        await asyncio.sleep(0.1)
        await producer.close()  # fails what is left: the flush ends without raising
        await flushing
        assert isinstance(stuck.exception(), ClientClosedError)
