"""The gateway's Redis client on a real Sentinel set: closing it closes every socket it opened,
those to the sentinels included (they belong to the client's Sentinel object, which nothing
else closes: left open, they closed only when the garbage collector got to them, in whatever
test ran then)."""

from __future__ import annotations

from tests.support.leak_checks import open_fds, wait_released
from tubemq_aio.gateway.leases.redis_client import open_redis, parse_redis_url
from tubemq_aio.testing import RedisSentinelSet


async def test_closing_a_sentinel_client_closes_its_sentinel_connections() -> None:
    async with RedisSentinelSet() as redis_set:
        fds_before = open_fds()
        client = open_redis(parse_redis_url(redis_set.url), max_connections=4, timeout=5.0)
        assert await client.set("k", "v")
        assert await client.get("k") == b"v"
        await client.aclose()
        await wait_released(fds_before)
        # closed, not broken: a client that is used again connects again
        assert await client.get("k") == b"v"
        await client.aclose()
        await wait_released(fds_before)
