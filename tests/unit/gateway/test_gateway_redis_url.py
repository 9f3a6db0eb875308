"""The gateway's ``redis`` URL: one server, Sentinel or Cluster, and every malformed form a
typed ConfigError naming the problem."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster

from tubemq_aio.errors import ConfigError
from tubemq_aio.gateway.config.gateway_config import GatewayConfig
from tubemq_aio.gateway.leases.redis_client import open_redis, parse_redis_url


def test_single_server_urls_pass_through() -> None:
    for url in ("redis://127.0.0.1:6379/0", "rediss://h:1/2", "unix:///run/redis.sock"):
        topo = parse_redis_url(url)
        assert (topo.kind, topo.url, topo.nodes) == ("server", url, ())
        assert topo.supports_wait


def test_sentinel_url_names_hosts_service_db_and_credentials() -> None:
    topo = parse_redis_url("redis+sentinel://u:p%40ss@h1:26379,[::1]:26380/mymaster/3")
    assert topo.kind == "sentinel"
    assert topo.nodes == (("h1", 26379), ("::1", 26380))
    assert (topo.service, topo.db, topo.username, topo.password) == ("mymaster", 3, "u", "p@ss")
    assert "p@ss" not in repr(topo)
    assert parse_redis_url("redis+sentinel://h:1/m").db == 0
    assert topo.supports_wait


def test_cluster_url_takes_seeds_and_database_zero_only() -> None:
    topo = parse_redis_url("redis+cluster://a:7000,b:7001")
    assert (topo.kind, topo.nodes, topo.db) == ("cluster", (("a", 7000), ("b", 7001)), 0)
    assert parse_redis_url("redis+cluster://:secret@a:7000/0").password == "secret"
    assert not topo.supports_wait


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("", "required"),
        ("http://h:1", "redis must be a redis://"),
        ("redis+sentinel://h1/mymaster", "host:port"),
        ("redis+sentinel://h1:0/mymaster", "host:port"),
        ("redis+sentinel://h1:26379", "<service>"),
        ("redis+sentinel://h1:26379/m/0/extra", "<service>"),
        ("redis+sentinel://h1:26379/m/x", "database must be a number"),
        ("redis+cluster://a:7000/1", "database 0 only"),
        ("redis+cluster://a:7000,,b:1", "host:port"),
        ("redis+cluster://a:7000?x=1", "unknown cluster URL option"),
    ],
)
def test_malformed_urls_are_config_errors(url: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_redis_url(url)


async def test_each_form_builds_its_client_without_connecting() -> None:
    server = open_redis(parse_redis_url("redis://127.0.0.1:9/0"), max_connections=3, timeout=1)
    sentinel = open_redis(
        parse_redis_url("redis+sentinel://127.0.0.1:9/m/0"), max_connections=3, timeout=1
    )
    cluster = open_redis(
        parse_redis_url("redis+cluster://127.0.0.1:9"), max_connections=3, timeout=1
    )
    try:
        assert isinstance(server, aioredis.Redis)
        # a server's commands are bounded by the round trip's deadline, not a socket timeout
        # (which costs a task per command write); its connect is bounded
        kwargs = server.connection_pool.connection_kwargs
        assert "socket_timeout" in kwargs  # redis-py's default would be 5 s
        assert kwargs["socket_timeout"] is None
        connection = server.connection_pool.make_connection()  # type: ignore[no-untyped-call]
        assert connection.socket_timeout is None
        assert kwargs["socket_connect_timeout"] == 1
        assert isinstance(sentinel, aioredis.Redis)
        assert sentinel.connection_pool.max_connections == 3
        assert isinstance(cluster, RedisCluster)
    finally:
        for client in (server, sentinel, cluster):
            await client.aclose()


def _config(**options: object) -> GatewayConfig:
    base: dict[str, object] = {"masters": "h:1", "secret": "s" * 16, "allow_anonymous": True}
    return GatewayConfig.from_mapping({**base, **options})


def test_the_gateway_config_takes_every_form_and_checks_the_ack_wait() -> None:
    sentinel = _config(redis="redis+sentinel://a:26379,b:26379/m/0", redis_ack_replicas=1)
    assert (sentinel.redis_ack_replicas, sentinel.redis_ack_wait_ms) == (1, 100)
    assert _config(redis="redis+cluster://a:7000").redis_ack_replicas == 0
    with pytest.raises(ConfigError, match="redis must be"):
        _config(redis="memcached://a:1")
    with pytest.raises(ConfigError, match="redis_ack_replicas"):
        _config(redis="redis://a:1/0", redis_ack_replicas=-1)
    with pytest.raises(ConfigError, match="redis_ack_wait_ms"):
        _config(redis="redis://a:1/0", redis_ack_wait_ms=0)
    with pytest.raises(ConfigError, match="redis_ack_replicas needs"):
        _config(redis="redis+cluster://a:7000", redis_ack_replicas=2)


def test_a_redis_table_stands_for_the_top_level_settings() -> None:
    config = _config(
        redis={"url": "redis+sentinel://a:26379/m/0", "ack_replicas": 1, "max_connections": 8}
    )
    assert config.redis == "redis+sentinel://a:26379/m/0"
    assert (config.redis_ack_replicas, config.redis_max_connections) == (1, 8)
    assert config.redis_ack_wait_ms == 100
    with pytest.raises(ConfigError, match=r"redis\.url is required"):
        _config(redis={"ack_replicas": 1})
    with pytest.raises(ConfigError, match=r"unknown config key redis\.sentinels"):
        _config(redis={"url": "redis://a:1/0", "sentinels": ["a:1"]})
    with pytest.raises(ConfigError, match="set twice"):
        _config(redis={"url": "redis://a:1/0", "ack_wait_ms": 5}, redis_ack_wait_ms=5)
    with pytest.raises(ConfigError, match="redis_ack_wait_ms"):
        _config(redis={"url": "redis://a:1/0", "ack_wait_ms": "soon"})
    with pytest.raises(ConfigError, match="redis must be"):
        _config(redis={"url": "http://a:1"})
