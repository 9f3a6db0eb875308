"""Produce through the gateway against the in-process FakeCluster: a key routes as the SDK's
key does; while the cluster is down the answer is 503 ``tube_unavailable`` within about a
second (the master probe), not a generic ``unavailable`` after ``produce_timeout``; the probe's
own rules (a cut only when no master answers, a caller's cancel stays a cancel)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from tubemq_aio.config import HostPort
from tubemq_aio.gateway import GatewayConfig, create_app
from tubemq_aio.gateway.errors import TubeUnavailableError
from tubemq_aio.gateway.tubemq.master_reach import MasterReach
from tubemq_aio.producer import Producer
from tubemq_aio.testing import FakeCluster

KEY = {"Authorization": "Bearer produce-key-1"}


@contextlib.asynccontextmanager
async def gateway(masters: str) -> AsyncIterator[httpx.AsyncClient]:
    config = GatewayConfig.from_mapping(
        {
            "masters": masters,
            "redis": "redis://127.0.0.1:1/0",
            "secret": "s" * 16,
            "produce_topics": ["t"],
            "produce_timeout": 10.0,
            "keys": [{"key": "produce-key-1", "scopes": ["produce:*"]}],
        }
    )
    app = create_app(config)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            yield client


async def test_a_key_routes_to_the_partition_the_sdk_routes_it_to() -> None:
    keys = [f"customer-{i}" for i in range(12)]
    async with FakeCluster(topics={"t": 4}) as cluster:
        async with gateway(cluster.master_addr) as client:
            via_gateway = {}
            for key in keys:
                r = await client.post(
                    "/v1/topics/t/messages", json={"value": "v", "key": key}, headers=KEY
                )
                assert r.status_code == 200, r.text
                via_gateway[key] = r.json()["partition_key"]
            batch = {"messages": [{"value": "w", "key": key} for key in keys]}
            r = await client.post("/v1/topics/t/messages/batch", json=batch, headers=KEY)
            in_batch = {keys[x["index"]]: x["partition_key"] for x in r.json()["results"]}
        async with Producer(cluster.master_addr, topics=["t"]) as producer:
            via_sdk = {key: (await producer.send("t", b"v", key=key)).partition_key for key in keys}
    assert via_gateway == via_sdk
    assert in_batch == via_sdk
    assert len(set(via_sdk.values())) > 1  # the keys spread: the comparison means something


async def test_produce_with_the_cluster_down_is_tube_unavailable_at_once() -> None:
    cluster = FakeCluster(topics={"t": 2})
    await cluster.start()
    try:
        async with gateway(cluster.master_addr) as client:
            r = await client.post("/v1/topics/t/messages", json={"value": "up"}, headers=KEY)
            assert r.status_code == 200, r.text
            await cluster.stop()
            # the send on the connection the stop reset may have been written: 504
            # outcome_unknown is the honest answer for it; what follows finds no broker
            r = await client.post("/v1/topics/t/messages", json={"value": "lost"}, headers=KEY)
            assert r.json()["error"]["code"] in ("outcome_unknown", "tube_unavailable")
            refused = 3 + (r.status_code == 503)  # this one, if so, the next and a batch of 2
            await asyncio.sleep(1.1)  # past the probe's ttl, should that send have probed
            started = time.monotonic()
            r = await client.post("/v1/topics/t/messages", json={"value": "down"}, headers=KEY)
            first = time.monotonic() - started
            assert (r.status_code, r.json()["error"]["code"]) == (503, "tube_unavailable")
            assert r.json()["error"]["retriable"] is True
            assert first < 3.0  # the 1 s grace and a refused connect, not produce_timeout
            started = time.monotonic()
            batch = {"messages": [{"value": "a"}, {"value": "b"}]}
            r = await client.post("/v1/topics/t/messages/batch", json=batch, headers=KEY)
            assert (r.status_code, r.json()["error"]["code"]) == (503, "tube_unavailable")
            assert time.monotonic() - started < 0.5  # the recent probe answers: no wait
            metrics = (await client.get("/metrics")).text
            counted = (
                f'tubemq_gateway_produced_messages_total{{status="503",topic="t"}} {refused}.0'
            )
            assert counted in metrics
    finally:
        await cluster.stop()


class Reach(MasterReach):
    """A probe whose answer the test sets."""

    def __init__(self, answer: bool) -> None:
        super().__init__([HostPort("127.0.0.1", 1)], ttl=60.0)
        self.answer = answer
        self.probes = 0

    async def _connect_any(self) -> bool:
        self.probes += 1
        self._answer = (self._clock(), self.answer)
        return self.answer


async def test_a_reachable_master_lets_a_slow_send_finish() -> None:
    reach = Reach(True)
    assert await reach.guard(asyncio.sleep(0.2, "stored"), grace=0.05) == "stored"
    assert reach.probes == 1


async def test_a_fast_send_never_probes() -> None:
    reach = Reach(False)
    assert await reach.guard(asyncio.sleep(0, "stored"), grace=0.5) == "stored"
    assert reach.probes == 0


async def test_a_send_errors_pass_through() -> None:
    async def fails() -> None:
        raise ValueError("bad body")

    with pytest.raises(ValueError, match="bad body"):
        await Reach(False).guard(fails(), grace=0.5)


async def test_a_callers_cancel_stays_a_cancel() -> None:
    reach = Reach(False)
    task = asyncio.create_task(reach.guard(asyncio.sleep(10), grace=5.0))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert reach.probes == 0


async def test_a_dead_master_cuts_the_send_and_the_next_is_refused_unstarted() -> None:
    reach = Reach(False)
    with pytest.raises(TubeUnavailableError):
        await reach.guard(asyncio.sleep(10), grace=0.05)
    ran = False

    async def send() -> None:
        nonlocal ran
        ran = True

    with pytest.raises(TubeUnavailableError, match="recent probe"):
        await reach.guard(send(), grace=0.05)
    assert not ran
    assert reach.probes == 1
