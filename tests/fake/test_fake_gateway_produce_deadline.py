"""The gateway's TubeMQ side outlives every broker restarting at once (issue 30, fault 1): a
produce issued during the outage waits within ``produce_timeout`` and answers 200, instead of
503 within a third of a second. The gateway's own producer (``default_producer``) against
FakeCluster; the consume engine is a stand-in (no Redis needed for a produce).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import cast

import httpx
import pytest

from tests.support.gateway_fakes import ADMIN, CFG, FakeEngine
from tubemq_aio.gateway import create_app
from tubemq_aio.gateway.app import default_producer
from tubemq_aio.gateway.engine.port import ConsumeEngine
from tubemq_aio.testing import FakeCluster

pytestmark = pytest.mark.timeout(60)
OUTAGE = 1.5


async def test_a_produce_during_a_restart_of_every_broker_is_stored() -> None:
    async with FakeCluster(topics={"demo": 2}, brokers=2) as cluster:
        config = dataclasses.replace(CFG, masters=cluster.master_addr, produce_timeout=6.0)
        engine = FakeEngine({})
        app = create_app(
            config,
            engine_factory=lambda _cfg: cast(ConsumeEngine, engine),
            producer_factory=default_producer,
        )
        transport = httpx.ASGITransport(app=app)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://gw") as client,
        ):
            url = "/v1/topics/demo/messages"
            first = await client.post(url, json={"value": "warm-up"}, headers=ADMIN)
            assert first.status_code == 200, first.text
            for broker in cluster.brokers:
                await cluster.stop_broker(broker.broker_id)
            await asyncio.sleep(0.05)

            async def restart() -> None:
                await asyncio.sleep(OUTAGE)
                for broker in cluster.brokers:
                    await cluster.start_broker(broker.broker_id)

            restarting = asyncio.create_task(restart())
            loop = asyncio.get_running_loop()
            began = loop.time()
            during = await client.post(url, json={"value": "during"}, headers=ADMIN)
            took = loop.time() - began
            await restarting
            assert during.status_code == 200, during.text
            assert took >= OUTAGE - 0.2
        assert cluster.bodies("demo") == [b"warm-up", b"during"]
