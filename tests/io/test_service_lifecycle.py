"""The harness's process services started and stopped as a user's fixtures meet them: two starts
at once, a start of a running service, a stop while a start is under way. Before the fix a second
``RedisServer.start()`` returned before the server answered PING and a stop during its start left
the process behind; a second ``GatewayReplica.start()`` spawned a second process on the port and
lost the first one; the Sentinel and Cluster sets' second start returned before the set was ready
and a stop during their start left the nodes spawned after it. (``LocalCluster`` and the Spark
cluster: ``tests/integration/test_cluster_start.py``, ``test_spark_cluster.py``.)"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tubemq_aio.testing import FakeCluster, RedisClusterSet, RedisSentinelSet, RedisServer
from tubemq_aio.testing._resp import command
from tubemq_aio.testing.gateway import GatewayReplica


async def test_two_starts_at_once_start_one_server_and_both_wait_for_it() -> None:
    server = RedisServer()
    first = asyncio.ensure_future(server.start())
    await asyncio.sleep(0)
    try:
        await server.start()  # returns only once the server answers
        assert await command(server.port, "PING", timeout=5.0) == "PONG"
        await first
        assert server.running
    finally:
        await server.stop()
    assert not server.running


async def test_a_stop_during_the_start_leaves_no_server() -> None:
    server = RedisServer()
    starting = asyncio.ensure_future(server.start())
    await asyncio.sleep(0.01)  # the process is spawned, not answering yet
    await server.stop()
    await starting
    assert not server.running
    assert "stopped" in repr(server)


@pytest.mark.system  # a tubemq-gateway process
async def test_a_replica_starts_once_and_a_stop_during_its_start_stops_it(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    async with FakeCluster(topics={"t": 1}) as cluster:
        config = tmp_path / "gateway.toml"
        config.write_text(
            f'masters = "{cluster.master_addr}"\nredis = "{redis_server.url}"\n'
            'secret = "lifecycle-secret-0123456789"\nproduce_topics = ["t"]\n'
            "allow_anonymous = true\n"
        )
        replica = GatewayReplica(config, log_file=tmp_path / "gw.log")
        try:
            await asyncio.gather(replica.start(), replica.start())
            pid = replica.pid
            assert pid is not None
            await replica.start()  # running: nothing to do
            assert replica.pid == pid
        finally:
            await replica.stop()
        assert replica.pid is None
        starting = asyncio.ensure_future(replica.start())
        await asyncio.sleep(0.05)
        await replica.stop()
        await starting
        assert replica.pid is None


@pytest.mark.failover
@pytest.mark.parametrize("kind", [RedisSentinelSet, RedisClusterSet])
async def test_a_redis_set_starts_once_and_a_stop_during_its_start_stops_it(
    kind: type[RedisSentinelSet] | type[RedisClusterSet],
) -> None:
    # The second start returned once the first node was spawned, before the set was ready, and
    # a stop during the start stopped the nodes started so far and left the ones spawned after.
    redis_set = kind()
    await asyncio.gather(redis_set.start(), redis_set.start())
    try:
        servers = list(redis_set.servers)
        assert servers
        assert all(s.running for s in servers)
        assert all([await command(s.port, "PING", timeout=5.0) == "PONG" for s in servers])
    finally:
        await redis_set.stop()
    assert not any(s.running for s in servers)
    starting = asyncio.ensure_future(redis_set.start())
    await asyncio.sleep(0.05)
    await redis_set.stop()
    await starting
    assert redis_set.servers == []
