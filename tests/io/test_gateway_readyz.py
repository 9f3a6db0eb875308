"""``/readyz`` names the backend that is away, against a real redis-server and the FakeCluster.

With the cluster's master gone and a group session open, it answered ``{"engine": false}``
after 2 s: the Redis and master checks ran one after the other under one bound, and the
master's (the SDK retrying the master until ``rpc_timeout``) outlasted it, hiding that Redis
was fine and the master was not. Each check now has the bound of its own, and they run at once.
"""

from __future__ import annotations

import httpx
import pytest

from tests.support.gateway_stream_support import READER, serving, stream_config
from tubemq_aio.gateway.tubemq import tube_group
from tubemq_aio.testing import FakeCluster, RedisServer, wait_until


async def test_readyz_says_the_master_is_away_and_redis_is_not(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The session's partition metadata is reused for _META_TTL (10 s) before the master is
    # asked again; 1 s here, so that the wait below is not most of the test.
    monkeypatch.setattr(tube_group, "_META_TTL", 1.0)
    async with FakeCluster(topics={"t": 1}) as cluster:
        config = stream_config(
            cluster.master_addr, redis_server.url, [{"name": "gr", "topics": ["t"]}]
        )
        async with serving(config) as url, httpx.AsyncClient(base_url=url, timeout=60) as c:
            r = await c.post("/v1/groups/gr/fetch", json={}, headers=READER)  # opens a session
            assert r.status_code == 200, r.text
            r = await c.get("/readyz")
            assert (r.status_code, r.json()["ready"]) == (200, True), r.text
            await cluster.stop_master()

            async def not_ready() -> bool:
                return (await c.get("/readyz")).status_code != 200

            # the session's partition metadata is reused for a while: then the master is asked
            await wait_until(not_ready, 60, "/readyz to say not ready", interval=0.2)
            r = await c.get("/readyz")
            assert r.status_code == 503
            assert r.json()["checks"] == {"producer": True, "redis": True, "master": False}
