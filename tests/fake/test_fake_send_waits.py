"""A send's waits before its first attempt end by the send's own deadline.

``timeout`` is what the whole send may take, but the wait for a window slot
(``max_in_flight_sends``) and for the topic's first publish ran before that deadline was set: a
``send(timeout=1)`` behind a full window of sends the broker never answers waited as long as
they did (found by attacking the API with a stuck broker), and one to a deployed topic not yet
writable waited ``publish_timeout``. Each of ``send`` and ``send_many`` now ends by its
deadline with a typed error, nothing sent, and the window gives back every slot.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tubemq_aio import (
    ClientClosedError,
    Producer,
    SendResult,
    SendWindowFullError,
    TopicNotDeployedError,
    TopicUnavailableError,
)
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault, TopicLayout

pytestmark = pytest.mark.timeout(60)
SEND = Method.BROKER_PRODUCER_SEND_MESSAGE
#: Far above the sends' 1 s timeout: an upper bound that a loaded machine does not reach.
BOUND = 5.0


@pytest.fixture
async def held_window() -> AsyncIterator[tuple[FakeCluster, Producer, asyncio.Task[SendResult]]]:
    """A producer of one window slot, held by a send the broker never answers."""
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        Producer(cluster.master_addr, topics=["demo"], max_in_flight_sends=1) as producer,
    ):
        await producer.send("demo", b"warm-up")
        cluster.inject(SEND, Fault.no_answer(), times=1)
        holder = asyncio.create_task(producer.send("demo", b"held", timeout=30))
        await asyncio.sleep(0)  # the held send takes the one slot
        assert producer.in_flight == 1
        yield cluster, producer, holder
        holder.cancel()
        await asyncio.gather(holder, return_exceptions=True)


async def test_send_behind_a_full_window_fails_typed_at_its_deadline(
    held_window: tuple[FakeCluster, Producer, asyncio.Task[SendResult]],
) -> None:
    cluster, producer, holder = held_window
    loop = asyncio.get_running_loop()
    began = loop.time()
    with pytest.raises(SendWindowFullError, match="nothing was sent"):
        await asyncio.wait_for(producer.send("demo", b"late", timeout=1.0), 2 * BOUND)
    assert 0.9 <= loop.time() - began < BOUND
    assert cluster.requests(SEND) == 2  # the warm-up and the held one
    holder.cancel()
    await asyncio.gather(holder, return_exceptions=True)
    # The slot came back: the next send goes out at once.
    assert isinstance(await producer.send("demo", b"next", timeout=5), SendResult)
    assert cluster.bodies("demo")[-1] == b"next"


async def test_send_many_behind_a_full_window_returns_the_error_for_each_message(
    held_window: tuple[FakeCluster, Producer, asyncio.Task[SendResult]],
) -> None:
    cluster, producer, holder = held_window
    loop = asyncio.get_running_loop()
    began = loop.time()
    outcomes = await asyncio.wait_for(
        producer.send_many("demo", [b"a", b"b", b"c"], timeout=1.0), 2 * BOUND
    )
    assert 0.9 <= loop.time() - began < BOUND
    assert [type(o) for o in outcomes] == [SendWindowFullError] * 3
    assert cluster.requests(SEND) == 2
    holder.cancel()
    await asyncio.gather(holder, return_exceptions=True)
    assert [type(o) for o in await producer.send_many("demo", [b"d", b"e"], timeout=5)] == [
        SendResult
    ] * 2


@pytest.mark.parametrize("how", ["send", "send_many"])
async def test_a_topic_not_yet_writable_is_waited_for_only_until_the_send_deadline(
    how: str,
) -> None:
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        Producer(cluster.master_addr, topics=["demo"], publish_timeout=30) as producer,
    ):
        cluster.add_topic(TopicLayout("slow", 1, accept_publish=False))
        loop = asyncio.get_running_loop()
        began = loop.time()
        send = (
            producer.send("slow", b"x", timeout=1.0)
            if how == "send"
            else producer.send_many("slow", [b"x"], timeout=1.0)
        )
        with pytest.raises(TopicUnavailableError, match="within the send's timeout") as info:
            await asyncio.wait_for(send, 2 * BOUND)
        assert not isinstance(info.value, TopicNotDeployedError)  # deployed: it may still open
        assert 0.9 <= loop.time() - began < BOUND  # the send's 1 s, not publish_timeout's 30
        assert cluster.bodies("slow") == []
        # Once the topic opens, the next send is stored.
        cluster.add_topic(TopicLayout("slow", 1))
        assert isinstance(await producer.send("slow", b"y", timeout=BOUND), SendResult)
        assert cluster.bodies("slow") == [b"y"]


async def test_sends_waiting_for_a_topic_share_one_wait_that_outlives_each_deadline() -> None:
    """Found by attacking the waits: the publish ran in the first send's task, so its deadline
    cancelled it and the next waiter started another (a heartbeat per send: 200 sends of
    staggered deadlines made 200 heartbeats in 2.5 s), and a ``send_many`` woken by that
    cancel failed at once ("no writable partition right now") with most of its timeout left."""
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        Producer(cluster.master_addr, topics=["demo"], publish_timeout=30) as producer,
    ):
        cluster.add_topic(TopicLayout("slow", 1, accept_publish=False))
        heartbeats = cluster.requests(Method.MASTER_PRODUCER_HEARTBEAT)
        loop = asyncio.get_running_loop()
        began = loop.time()
        short = [producer.send("slow", b"x", timeout=0.2 + i / 1000) for i in range(200)]
        many = producer.send_many("slow", [b"y"], timeout=1.0)
        outcomes = await asyncio.wait_for(
            asyncio.gather(*short, many, return_exceptions=True), BOUND
        )
        # One wait for the topic: its heartbeats come a publish poll (1 s) apart, not per send.
        assert cluster.requests(Method.MASTER_PRODUCER_HEARTBEAT) - heartbeats <= 1 + BOUND
        many_outcome = outcomes.pop()
        assert loop.time() - began >= 0.9  # send_many had its own whole second
        assert isinstance(many_outcome, TopicUnavailableError)
        assert "within the send's timeout" in str(many_outcome)
        assert all(isinstance(o, TopicUnavailableError) for o in outcomes)
        assert producer.failed == 200
        assert cluster.bodies("slow") == []


async def test_close_ends_a_send_waiting_for_a_topic_with_client_closed() -> None:
    """It polled the master until its own deadline (20 s after close) and then failed with
    TopicUnavailableError."""
    async with FakeCluster(topics={"demo": 1}) as cluster:
        producer = Producer(cluster.master_addr, topics=["demo"], publish_timeout=30)
        await producer.start()
        cluster.add_topic(TopicLayout("slow", 1, accept_publish=False))
        sends = [
            asyncio.create_task(producer.send("slow", b"x", timeout=20)),
            asyncio.create_task(producer.send_many("slow", [b"y"], timeout=20)),
        ]
        await asyncio.sleep(0.2)
        await producer.close()
        # The topic's wait ended with close(): no task of it outlives the call.
        assert not [t for t in asyncio.all_tasks() if "publish" in t.get_name()]
        for send in sends:
            with pytest.raises(ClientClosedError, match="waited for a writable partition"):
                await asyncio.wait_for(send, BOUND)
        assert (producer.failed, producer.cancelled, producer.in_flight) == (1, 0, 0)
        assert cluster.bodies("slow") == []


async def test_a_send_cancelled_while_waiting_for_a_topic_leaves_the_others_waiting() -> None:
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        Producer(cluster.master_addr, topics=["demo"], publish_timeout=30) as producer,
    ):
        cluster.add_topic(TopicLayout("slow", 1, accept_publish=False))
        cancelled = asyncio.create_task(producer.send("slow", b"gone", timeout=20))
        waiting = asyncio.create_task(producer.send("slow", b"kept", timeout=20))
        await asyncio.sleep(0.2)
        cancelled.cancel()
        await asyncio.gather(cancelled, return_exceptions=True)
        cluster.add_topic(TopicLayout("slow", 1))  # the topic opens: the other send goes out
        assert isinstance(await asyncio.wait_for(waiting, BOUND), SendResult)
        assert cluster.bodies("slow") == [b"kept"]
        assert (producer.sent, producer.cancelled, producer.in_flight) == (1, 1, 0)


async def test_a_send_that_joins_the_wait_as_the_last_one_leaves_it_gets_its_own() -> None:
    """The wait the last send left is being cancelled: a send arriving in that moment starts a
    new one instead of sharing the cancel (it raised CancelledError nobody had asked for)."""
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        Producer(cluster.master_addr, topics=["demo"], publish_timeout=30) as producer,
    ):
        cluster.add_topic(TopicLayout("slow", 1, accept_publish=False))
        leaving = asyncio.create_task(producer.send("slow", b"gone", timeout=20))
        await asyncio.sleep(0.2)
        leaving.cancel()  # its wait ends when it runs next, before the new send's first step
        joining = asyncio.create_task(producer.send("slow", b"kept", timeout=20))
        await asyncio.sleep(0.2)
        assert not joining.done()
        cluster.add_topic(TopicLayout("slow", 1))
        assert isinstance(await asyncio.wait_for(joining, BOUND), SendResult)
        assert leaving.cancelled()
        assert (producer.sent, producer.cancelled, producer.in_flight) == (1, 1, 0)
