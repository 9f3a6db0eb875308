"""TLS and passwords of the replicated Redis forms: ``rediss+sentinel://``/``rediss+cluster://``
with their CA/certificate options, the sentinels' own credentials, the ``[redis]`` table's
keys folded into the URL, every misuse a ConfigError, and no password in a repr or an error."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import SSLConnection
from redis.asyncio.sentinel import SentinelConnectionPool, SentinelManagedSSLConnection

from tubemq_aio.errors import ConfigError
from tubemq_aio.gateway.config.gateway_config import GatewayConfig
from tubemq_aio.gateway.leases.redis_client import open_redis, parse_redis_url
from tubemq_aio.gateway.leases.redis_options import RedisTls

SECRET = "data-s3cret"
SENTINEL_SECRET = "sentinel-s3cret"


@pytest.fixture
def pem(tmp_path: Path) -> str:
    path = tmp_path / "ca.pem"
    path.write_text("not parsed before a connect\n", encoding="utf-8")
    return str(path)


def test_a_tls_sentinel_url_carries_tls_and_both_passwords(pem: str) -> None:
    topo = parse_redis_url(
        f"rediss+sentinel://:{SECRET}@h1:26379,h2:26380/mymaster/2"
        f"?ssl_ca_certs={pem}&sentinel_password={SENTINEL_SECRET}&ssl_check_hostname=false"
    )
    assert (topo.kind, topo.service, topo.db, topo.password) == ("sentinel", "mymaster", 2, SECRET)
    assert topo.options.tls == RedisTls(ca_certs=pem, check_hostname=False)
    assert topo.options.sentinel_password == SENTINEL_SECRET
    for text in (repr(topo), str(topo), repr(topo.options)):
        assert SECRET not in text
        assert SENTINEL_SECRET not in text


def test_a_tls_cluster_url_takes_mutual_tls_files(pem: str) -> None:
    topo = parse_redis_url(
        f"rediss+cluster://a:7000?ssl_ca_certs={pem}&ssl_certfile={pem}&ssl_keyfile={pem}"
    )
    assert topo.kind == "cluster"
    assert topo.options.tls is not None
    assert topo.options.tls.client_kwargs()["ssl_keyfile"] == pem
    assert parse_redis_url("redis+cluster://a:7000").options.tls is None


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("redis+sentinel://h:1/m?ssl_ca_certs=x", "needs a rediss\\+sentinel"),
        ("rediss+cluster://h:1?sentinel_password=x", "redis\\+sentinel:// URLs only"),
        ("rediss+sentinel://h:1/m?ssl_ca_certs=/nowhere/ca.pem", "no readable file"),
        ("rediss+sentinel://h:1/m?ssl_cert_reqs=maybe", "ssl_cert_reqs must be"),
        ("rediss+sentinel://h:1/m?ssl_check_hostname=perhaps", "true or false"),
        ("redis+sentinel://h:1/m?sentinel_password=a&sentinel_password=b", "twice"),
        ("redis+sentinel://h:1/m?password=x", "unknown sentinel URL option"),
        ("redis+sentinel://h:1/m?novalue", "malformed"),
        ("redis://h:1/0?sentinel_password=x", "redis\\+sentinel:// URLs only"),
        ("redis://h:1/0?ssl_ca_certs=x", "needs a rediss:// URL"),
    ],
)
def test_misused_options_are_config_errors(url: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_redis_url(url)


def test_a_key_without_its_certificate_and_errors_name_no_password(pem: str) -> None:
    with pytest.raises(ConfigError, match="ssl_keyfile needs ssl_certfile") as caught:
        parse_redis_url(f"rediss+sentinel://:{SECRET}@h:1/m?ssl_keyfile={pem}")
    assert SECRET not in str(caught.value)


async def test_tls_and_the_sentinels_password_reach_redis_py(pem: str) -> None:
    sentinel_url = f"rediss+sentinel://u:{SECRET}@127.0.0.1:9/m/0?ssl_ca_certs={pem}"
    sentinel = open_redis(
        parse_redis_url(f"{sentinel_url}&sentinel_password={SENTINEL_SECRET}"),
        max_connections=3,
        timeout=1,
    )
    cluster = open_redis(
        parse_redis_url(f"rediss+cluster://:{SECRET}@127.0.0.1:9?ssl_cert_reqs=none"),
        max_connections=3,
        timeout=1,
    )
    try:
        assert isinstance(sentinel, aioredis.Redis)
        pool = sentinel.connection_pool
        assert isinstance(pool, SentinelConnectionPool)
        assert pool.connection_class is SentinelManagedSSLConnection
        assert pool.connection_kwargs["ssl_ca_certs"] == pem
        assert pool.connection_kwargs["password"] == SECRET
        manager = pool.sentinel_manager
        watcher = manager.sentinels[0].connection_pool
        assert watcher.connection_kwargs["password"] == SENTINEL_SECRET
        assert watcher.connection_class is SSLConnection
        assert SECRET not in repr(sentinel)
        assert SENTINEL_SECRET not in repr(manager)
        assert isinstance(cluster, RedisCluster)
        assert cluster.connection_kwargs["connection_class"] is SSLConnection
        assert cluster.connection_kwargs["ssl_cert_reqs"] == "none"
    finally:
        for client in (sentinel, cluster):
            await client.aclose()


def _config(redis: object) -> GatewayConfig:
    base = {"masters": "h:1", "secret": "s" * 16, "allow_anonymous": True}
    return GatewayConfig.from_mapping({**base, "redis": redis})


def test_the_redis_table_folds_tls_and_passwords_into_the_url(pem: str) -> None:
    config = _config(
        {
            "url": f"rediss+sentinel://:{SECRET}@h1:26379/mymaster/0",
            "sentinel_password": SENTINEL_SECRET,
            "ssl_ca_certs": pem,
            "ssl_check_hostname": False,
        }
    )
    options = parse_redis_url(config.redis).options
    assert options.sentinel_password == SENTINEL_SECRET
    assert options.tls == RedisTls(ca_certs=pem, check_hostname=False)
    assert SECRET not in repr(config)
    assert SENTINEL_SECRET not in repr(config)
    with pytest.raises(ConfigError, match="set twice"):
        _config({"url": "redis+sentinel://h:1/m?sentinel_password=a", "sentinel_password": "b"})
    with pytest.raises(ConfigError, match="must be a string"):
        _config({"url": "rediss+sentinel://h:1/m", "ssl_cert_reqs": 3})
