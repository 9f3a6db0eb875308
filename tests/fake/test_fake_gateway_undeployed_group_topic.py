"""A consume group whose topic the TubeMQ master says is not deployed (431): the gateway's fetch
and lag fail with the not retriable ``UnknownTopicError`` (HTTP 404 ``unknown_topic``), not a
retriable ``TubeUnavailableError`` (503 ``tube_unavailable``) a client would retry for ever;
once the topic is created the group is served (issue 30 leftovers)."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.gateway_engine_support import running_service
from tubemq_aio import Producer
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.engine.data import FetchQuery
from tubemq_aio.gateway.errors import UnknownTopicError
from tubemq_aio.gateway.http.api_errors import api_error_for
from tubemq_aio.gateway.tubemq import tube_group
from tubemq_aio.testing import FakeCluster, RedisServer

pytestmark = pytest.mark.timeout(60)


async def test_a_group_on_an_undeployed_topic_is_a_404_until_the_topic_exists(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tube_group, "_RESTART_MIN", 0.2)
    async with FakeCluster(topics={"t": 1}) as cluster, RedisServer() as redis:
        spec = GroupSpec(name="gghost", topics=("ghost",), lease_ms=30_000)
        async with running_service(cluster.master_addr, redis.url, spec) as service:
            with pytest.raises(UnknownTopicError) as info:
                await service.fetch(FetchQuery("gghost", client_id=None, wait_ms=0))
            error = api_error_for(info.value)
            assert error is not None
            assert (error.status, error.code, error.retriable) == (404, "unknown_topic", False)
            assert "'ghost'" in error.message
            assert "not deployed" in error.message
            cluster.add_topic("ghost", 1)
            async with Producer(cluster.master_addr, topics=["ghost"]) as producer:
                await producer.send("ghost", b"now-here")
            await asyncio.sleep(0.3)  # past the session's restart back-off
            got = await service.fetch(FetchQuery("gghost", client_id=None, wait_ms=2000))
            assert got.status == "ok"
            assert [m.body for m in got.messages] == [b"now-here"]
