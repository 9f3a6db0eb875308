"""The gateway on a Sentinel set that requires passwords: the data nodes one (``requirepass``,
``masterauth``), the sentinels another; the engine serves and settles through the
``redis+sentinel://:<password>@…?sentinel_password=…`` URL, and neither password shows in the
URL's parsed form or the service's settings. The same over mutual TLS to every node
(``rediss+sentinel://…?ssl_ca_certs=…&ssl_certfile=…&ssl_keyfile=…``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis.asyncio as aioredis
import redis.exceptions as rexc

from tests.support.gateway_engine_support import drained_lag, running_service
from tests.support.gateway_failover_support import produce_numbered
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.engine.data import FetchQuery
from tubemq_aio.gateway.leases.redis_client import parse_redis_url
from tubemq_aio.testing import FakeCluster, RedisSentinelSet, make_tls_material

#: Kills Redis primaries or replicas: run by `make test`, left out of `make unit` (see Makefile).
pytestmark = pytest.mark.failover

DATA_SECRET = "data-pw-7"
SENTINEL_SECRET = "sentinel-pw-9"


async def _refused_without_password(port: int) -> None:
    client = aioredis.Redis(port=port, socket_timeout=5)
    try:
        with pytest.raises(rexc.AuthenticationError):
            await client.ping()
    finally:
        await client.aclose()


async def test_the_engine_serves_through_password_protected_sentinels() -> None:
    spec = GroupSpec(name="gp", topics=("t",), lease_ms_min=500, lease_ms=5000)
    async with (
        FakeCluster(topics={"t": 1}, max_batch=5) as cluster,
        RedisSentinelSet(password=DATA_SECRET, sentinel_password=SENTINEL_SECRET) as redis_set,
    ):
        await _refused_without_password((await redis_set.primary()).port)
        await _refused_without_password(redis_set.sentinel_ports[0])
        topology = parse_redis_url(redis_set.url)
        assert topology.password == DATA_SECRET
        assert topology.options.sentinel_password == SENTINEL_SECRET
        bodies = await produce_numbered(cluster.master_addr, "t", 5)
        async with running_service(cluster.master_addr, redis_set.url, spec) as service:
            for text in (repr(topology), repr(service.settings)):
                assert DATA_SECRET not in text
                assert SENTINEL_SECRET not in text
            got = await service.fetch(
                FetchQuery("gp", client_id=None, max_messages=5, lease_ms=5000)
            )
            assert got.lease is not None
            assert [m.body.decode() for m in got.messages] == bodies
            assert await service.settle(got.lease.key, "ack") == "acked"
            assert (await drained_lag(service, "gp")).total_lag_bytes == 0


async def test_the_engine_serves_through_sentinels_over_tls(tmp_path: Path) -> None:
    material = await make_tls_material(tmp_path / "tls")
    spec = GroupSpec(name="gt", topics=("t",), lease_ms_min=500, lease_ms=5000)
    async with (
        FakeCluster(topics={"t": 1}, max_batch=5) as cluster,
        RedisSentinelSet(password=DATA_SECRET, tls=material) as redis_set,
    ):
        assert redis_set.url.startswith("rediss+sentinel://")
        plain = aioredis.Redis(port=(await redis_set.primary()).port, socket_timeout=5)
        try:
            with pytest.raises(rexc.ConnectionError):  # a TLS port: no plain-text answer
                await plain.ping()
        finally:
            await plain.aclose()
        topology = parse_redis_url(redis_set.url)
        assert topology.options.tls is not None
        assert topology.options.tls.ca_certs == str(material.ca_pem)
        bodies = await produce_numbered(cluster.master_addr, "t", 3)
        async with running_service(cluster.master_addr, redis_set.url, spec) as service:
            got = await service.fetch(
                FetchQuery("gt", client_id=None, max_messages=5, lease_ms=5000)
            )
            assert got.lease is not None
            assert [m.body.decode() for m in got.messages] == bodies
            assert await service.settle(got.lease.key, "ack") == "acked"
