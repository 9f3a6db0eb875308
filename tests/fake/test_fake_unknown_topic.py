"""A producer fails fast on a topic the master says is not deployed, and waits only for one that
may still appear (issue 32: producing to an unknown topic took 15 s to fail, consuming it 0.2 s).
Both consumers fail at once with the same ``TopicNotDeployedError`` (a ``ServerError`` 431 too,
what they raised before), naming the topics the master does not know.
"""

from __future__ import annotations

import asyncio

import pytest

from tubemq_aio import (
    ClientBalancedConsumer,
    ClientClosedError,
    Consumer,
    Producer,
    SendResult,
    ServerError,
    TopicNotDeployedError,
    TopicUnavailableError,
)
from tubemq_aio.protocol.deployment import CHECK_GROUP
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault, TopicLayout

pytestmark = pytest.mark.timeout(60)
CHECK = Method.MASTER_CONSUMER_REGISTER_V2


async def _use_unknown_topic(master: str, how: str) -> None:
    if how == "topics=":
        async with Producer(master, topics=["nope"]):
            return
    async with Producer(master, topics=["demo"]) as producer:
        if how == "send":
            await producer.send("nope", b"x")
        elif how == "publish":
            await producer.publish(["nope"])
        else:
            await producer.send_many("nope", [b"x"])


@pytest.mark.parametrize("how", ["send", "publish", "send_many", "topics="])
async def test_an_unknown_topic_fails_at_once_with_the_masters_word(how: str) -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        loop = asyncio.get_running_loop()
        began = loop.time()
        with pytest.raises(TopicNotDeployedError) as info:
            await _use_unknown_topic(cluster.master_addr, how)
        assert loop.time() - began < 10.0  # not publish_timeout (15 s)
        assert info.value.topics == ("nope",)
        assert isinstance(info.value, TopicUnavailableError)  # what callers caught before
        assert cluster.members(CHECK_GROUP) == []  # the check registered nothing


async def test_a_topic_deployed_afterwards_is_published_by_the_next_send() -> None:
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        Producer(cluster.master_addr, topics=["demo"]) as producer,
    ):
        with pytest.raises(TopicNotDeployedError):
            await producer.send("later", b"x")
        assert "later" not in producer.topics  # not published: the next send asks again
        cluster.add_topic("later", 1)
        assert isinstance(await producer.send("later", b"y", timeout=5), SendResult)
        assert cluster.bodies("later") == [b"y"]


async def test_a_deployed_topic_not_yet_writable_is_waited_for() -> None:
    """The master lists no writable partition (publishing is off for now), but the topic is
    deployed: the producer waits for it, asks the master once, and publishes when it opens."""
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        Producer(cluster.master_addr, topics=["demo"], publish_timeout=10) as producer,
    ):
        cluster.add_topic(TopicLayout("slow", 1, accept_publish=False))
        loop = asyncio.get_running_loop()
        loop.call_later(1.5, cluster.add_topic, TopicLayout("slow", 1))
        began = loop.time()
        await producer.publish(["slow"])
        assert loop.time() - began >= 1.0
        assert cluster.requests(CHECK) == 1


async def test_no_verdict_from_the_master_keeps_the_old_wait() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        cluster.inject(CHECK, Fault.error(403, "not allowed to consume"), times=None)
        async with Producer(cluster.master_addr, topics=["demo"], publish_timeout=1.5) as producer:
            loop = asyncio.get_running_loop()
            began = loop.time()
            with pytest.raises(TopicUnavailableError) as info:
                await producer.send("nope", b"x")
            assert not isinstance(info.value, TopicNotDeployedError)
            assert loop.time() - began >= 1.4


#: Register attempts 2 s apart: the consumer's register deadline is 8 s after its start.
_REGISTER = {"register_attempts": 5, "register_fail_wait": 2.0}


def _register_deadline() -> float:
    return (_REGISTER["register_attempts"] - 1) * _REGISTER["register_fail_wait"]


def _consumer(kind: str, master: str, topics: list[str]) -> Consumer | ClientBalancedConsumer:
    if kind == "server-balanced":
        return Consumer(master, group="g431", topics=topics, **_REGISTER)  # type: ignore[arg-type]
    return ClientBalancedConsumer(master, group="g431", topics=topics, **_REGISTER)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["server-balanced", "client-balanced"])
async def test_a_consumer_of_an_unknown_topic_fails_at_once_naming_it(kind: str) -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        consumer = _consumer(kind, cluster.master_addr, ["demo", "nope", "gone"])
        loop = asyncio.get_running_loop()
        began = loop.time()
        with pytest.raises(TopicNotDeployedError) as info:
            await consumer.start()
        assert loop.time() - began < _register_deadline()  # no retry until the deadline
        assert info.value.topics == ("nope", "gone")  # the deployed one is not named
        assert isinstance(info.value, ServerError)  # what the consumers raised before
        assert info.value.err_code == 431
        assert info.value.err_msg == "Requested topic [[nope, gone]] not deployed!"
        assert "'nope', 'gone'" in str(info.value)
        with pytest.raises(ClientClosedError):  # a failed start closes the consumer
            await consumer.getmany(timeout=0)
        await consumer.close()
