"""A rate-limited group never overdraws by one answer per concurrent fetch: the
limiter is charged when a batch is booked, so reads of a limited group run one at a time. A
paused group gives a retry hint and a long poll waits for the resume."""

from __future__ import annotations

import asyncio

from tests.support.gateway_engine_support import running_service
from tubemq_aio import Producer
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.engine.data import FetchQuery
from tubemq_aio.testing import FakeCluster, RedisServer


async def test_concurrent_fetches_get_at_most_one_answer_beyond_the_burst() -> None:
    async with FakeCluster(topics={"t": 4}, max_batch=10) as cluster, RedisServer() as redis:
        async with Producer(cluster.master_addr, topics=["t"]) as producer:
            for i in range(80):
                await producer.send("t", f"m{i}".encode())
        spec = GroupSpec(name="grate", topics=("t",), lease_ms=30_000)
        async with running_service(cluster.master_addr, redis.url, spec) as service:
            await service.set_rate("grate", 1.0, 1)
            outcomes = await asyncio.gather(
                *(
                    service.fetch(FetchQuery("grate", client_id=None, max_messages=10))
                    for _ in range(8)
                )
            )
            answers = [o for o in outcomes if o.status == "ok"]
            assert len(answers) == 1, [o.status for o in outcomes]
            assert {o.status for o in outcomes} <= {"ok", "busy", "throttled"}
            assert answers[0].lease is not None
            assert await service.settle(answers[0].lease.key, "ack") == "acked"
            # the booked batch was charged: the next fetch waits for the limiter, not a hold
            again = await service.fetch(FetchQuery("grate", client_id=None, max_messages=10))
            assert again.status == "throttled"
            assert again.retry_after_ms is not None
            assert again.retry_after_ms > 1000
            # a paused group: a hint at once, and a long poll waits until the group resumes
            await service.set_rate("grate", 0.0, None)
            await service.pause("grate")
            paused = await service.fetch(FetchQuery("grate", client_id=None))
            assert paused.status == "paused"
            assert paused.retry_after_ms is not None
            assert paused.retry_after_ms > 0
            polling = asyncio.create_task(
                service.fetch(FetchQuery("grate", client_id=None, wait_ms=20_000))
            )
            await asyncio.sleep(0)
            assert not polling.done()
            await service.resume("grate")
            assert (await polling).status == "ok"
