"""Gateway consume end to end: real cluster, real Redis, real uvicorn replicas, httpx clients."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import redis.asyncio as aioredis

from tests.support.gateway_support import (
    ADMIN,
    READER,
    Group,
    Tally,
    consume_until,
    gateways,
    lease_one,
    produce_numbered,
    replicas,
    write_config,
)
from tests.support.java_interop import java_produce
from tubemq_aio.testing import LocalCluster, RedisServer


async def wait_lag_zero(
    client: httpx.AsyncClient, group: str, timeout: float = 60
) -> dict[str, Any]:
    """Poll the lag report (fetching meanwhile, so idle partitions are probed) until it is 0."""
    deadline = time.monotonic() + timeout
    while True:
        r = await client.get(f"/v1/groups/{group}/lag", headers=READER)
        assert r.status_code == 200, r.text
        report: dict[str, Any] = r.json()
        if report["total_lag_bytes"] == "0" and all(
            p["committed"] is not None and p["committed"] == p["max"] for p in report["partitions"]
        ):
            return report
        assert time.monotonic() < deadline, report
        f = await client.post(f"/v1/groups/{group}/fetch", json={"wait_ms": 500}, headers=READER)
        assert f.status_code in (200, 503), f.text  # 503: a partition briefly refused (retriable)
        if f.status_code == 503:
            assert f.json()["error"]["retriable"] is True
            await asyncio.sleep(0.5)
        elif f.json()["status"] == "ok":
            await client.post(f"/v1/leases/{f.json()['lease']['token']}/ack", headers=READER)


async def test_20000_messages_six_consumers_two_replicas(
    cluster: LocalCluster, topic: str, redis: RedisServer, tmp_path: Path
) -> None:
    count = 20_000
    config = write_config(
        tmp_path / "gw.toml", cluster, redis.url, [topic], [Group("gall", [topic])]
    )
    async with gateways(config, 2) as (_reps, clients):
        await produce_numbered(clients[0], topic, count // 2, prefix="n")
        await produce_numbered(clients[1], topic, count // 2, prefix="m")
        want = {f"n{i}" for i in range(count // 2)} | {f"m{i}" for i in range(count // 2)}
        tally = Tally()
        await consume_until(
            clients, "gall", want, tally, consumers=6, ack_p=0.8, nack_p=0.1, timeout=240
        )
        assert set(tally.delivered) >= want
        duplicates = len(tally.delivered) - len(set(tally.delivered))
        assert duplicates <= tally.nacked_msgs + tally.abandoned_msgs + tally.failed_ack_msgs
        assert tally.abandoned_msgs > 0
        assert tally.nacked_msgs > 0
        assert 500 not in tally.statuses
        report = await wait_lag_zero(clients[1], "gall")
        assert len(report["partitions"]) == 6
        redelivered = await clients[0].get("/metrics")
        assert "tubemq_gateway_engine_redeliveries" in redelivered.text


async def test_java_producer_gateway_consumer(
    cluster: LocalCluster, topic: str, redis: RedisServer, tmp_path: Path
) -> None:
    count = 400
    await java_produce(cluster, topic, count)
    config = write_config(tmp_path / "gw.toml", cluster, redis.url, [], [Group("gj", [topic])])
    async with replicas(config, 1) as (rep,), httpx.AsyncClient(base_url=rep.url, timeout=30) as c:
        got: dict[str, dict[str, Any]] = {}
        deadline = time.monotonic() + 120
        while len(got) < count:
            assert time.monotonic() < deadline, len(got)
            r = await c.post("/v1/groups/gj/fetch", json={"wait_ms": 1000}, headers=READER)
            assert r.status_code == 200, r.text
            reply = r.json()
            if reply["status"] != "ok":
                continue
            for m in reply["messages"]:
                got[m["value"]] = m
            a = await c.post(f"/v1/leases/{reply['lease']['token']}/ack", headers=READER)
            assert a.json() == {"result": "acked"}
    assert set(got) == {f"java-{i}" for i in range(count)}
    for value, m in got.items():
        i = int(value.split("-")[1])
        assert m["encoding"] == "utf8"
        assert m["attributes"] == {"idx": str(i), "src": "java"}
        assert m["msg_type"] == f"type{i % 3}"
        assert m["msg_time"] == "202611220630"


async def test_broadcast_three_clients_each_get_everything(
    cluster: LocalCluster, topic: str, redis: RedisServer, tmp_path: Path
) -> None:
    config = write_config(
        tmp_path / "gw.toml", cluster, redis.url, [topic], [Group("gb", [topic], mode="broadcast")]
    )
    async with gateways(config, 2) as (_reps, clients):
        await produce_numbered(clients[0], topic, 600)
        want = {f"n{i}" for i in range(600)}
        tallies = [Tally() for _ in range(3)]
        await asyncio.gather(
            *(
                consume_until(clients, "gb", want, t, consumers=2, client_id=f"client-{k}")
                for k, t in enumerate(tallies)
            )
        )
        for t in tallies:
            assert set(t.delivered) == want
        r = await clients[0].post("/v1/groups/gb/fetch", json={}, headers=READER)
        assert r.status_code == 422
        assert r.json()["error"]["code"] == "invalid_request"


async def test_reset_pause_rate_and_auth(
    cluster: LocalCluster, topic: str, redis: RedisServer, tmp_path: Path
) -> None:
    config = write_config(
        tmp_path / "gw.toml", cluster, redis.url, [topic], [Group("ga", [topic], lease_ms=20000)]
    )
    async with gateways(config, 2) as (_reps, (a, b)):
        await produce_numbered(a, topic, 3000)
        # reset while leases are out: every outstanding token then gets 409
        for to in ("earliest", "explicit", "latest"):
            held = await lease_one(a, "ga")
            body: dict[str, Any] = {"to": to}
            if to == "explicit":
                body = {"to": {held["lease"]["partition_key"]: 0}}
            r = await b.post("/v1/groups/ga/offsets/reset", json=body, headers=ADMIN)
            assert r.status_code == 200, r.text
            assert r.json()["partitions"]
            late = await b.post(f"/v1/leases/{held['lease']['token']}/ack", headers=READER)
            assert late.status_code == 409, (to, late.text)
            assert late.json()["error"]["code"] in ("lease_stale", "lease_conflict")
        # after "latest" nothing is left; "earliest" brings everything back
        r = await a.post("/v1/groups/ga/fetch", json={}, headers=READER)
        assert r.json()["status"] in ("empty", "busy"), r.text
        await a.post("/v1/groups/ga/offsets/reset", json={"to": "earliest"}, headers=ADMIN)
        again = await lease_one(a, "ga")
        assert again["messages"]
        await a.post(f"/v1/leases/{again['lease']['token']}/ack", headers=READER)
        # pause through one replica: the next fetch on both says paused
        assert (await a.post("/v1/groups/ga/pause", headers=ADMIN)).status_code == 200
        for c in (a, b):
            r = await c.post("/v1/groups/ga/fetch", json={}, headers=READER)
            assert r.json()["status"] == "paused", r.text
        assert (await b.post("/v1/groups/ga/resume", headers=ADMIN)).status_code == 200
        await a.post("/v1/groups/ga/offsets/reset", json={"to": "earliest"}, headers=ADMIN)
        # rate: 200 msg/s with burst 100, shared by both replicas
        rate, burst, window = 200.0, 100, 3.0
        r = await a.put(
            "/v1/groups/ga/rate",
            json={"messages_per_second": rate, "burst": burst},
            headers=ADMIN,
        )
        assert r.status_code == 200, r.text
        delivered, throttled, largest = 0, 0, 0
        batches: list[tuple[str, float, int, str]] = []  # (replica, s, messages, partition)
        clock = aioredis.Redis.from_url(redis.url)  # the limiter's clock is Redis's TIME
        began, redis_began = time.monotonic(), await clock.time()
        while time.monotonic() - began < window:
            for name, c in (("a", a), ("b", b)):
                r = await c.post("/v1/groups/ga/fetch", json={}, headers=READER)
                if r.status_code == 429:
                    throttled += 1
                    assert int(r.headers["Retry-After"]) >= 1
                    continue
                assert r.status_code == 200, r.text
                if r.json()["status"] == "ok":
                    n, lease = len(r.json()["messages"]), r.json()["lease"]
                    delivered += n
                    largest = max(largest, n)
                    batches.append((name, time.monotonic() - began, n, lease["partition_key"]))
                    await c.post(f"/v1/leases/{lease['token']}/ack", headers=READER)
        elapsed, redis_ended = time.monotonic() - began, await clock.time()
        await clock.aclose()
        # A step of the wall clock moves the limiter with it (it cannot see one): the bound
        # takes the longer of this process's monotonic time and Redis's.
        on_redis = redis_ended[0] - redis_began[0] + (redis_ended[1] - redis_began[1]) / 1e6
        assert throttled > 0
        # the engine charges a batch after reading it (TubeMQ decides the batch size), so
        # the last admitted batch may overdraw: the bound is rate x window + burst + 1 batch
        bound = rate * max(elapsed, on_redis) + burst + largest
        assert delivered <= bound, (delivered, elapsed, on_redis, largest, batches)
        await a.put("/v1/groups/ga/rate", json={"messages_per_second": 0}, headers=ADMIN)
        # auth on every route of the running replica
        routes = [
            ("post", f"/v1/topics/{topic}/messages", {"value": "x"}),
            ("post", f"/v1/topics/{topic}/messages/batch", {"messages": [{"value": "x"}]}),
            ("post", "/v1/groups/ga/fetch", {}),
            ("post", "/v1/groups/ga/offsets/reset", {"to": "earliest"}),
            ("post", "/v1/groups/ga/pause", None),
            ("post", "/v1/groups/ga/resume", None),
            ("put", "/v1/groups/ga/rate", {"messages_per_second": 1}),
            ("get", "/v1/groups/ga/lag", None),
            ("post", "/v1/leases/t1.x.y/ack", None),
            ("post", "/v1/leases/t1.x.y/nack", {}),
            ("post", "/v1/leases/t1.x.y/extend", {"lease_ms": 20000}),
        ]
        for method, path, payload in routes:
            kw: dict[str, Any] = {} if payload is None else {"json": payload}
            assert (await a.request(method, path, **kw)).status_code == 401, path
            wrong = {"Authorization": "Bearer not-a-key-at-all"}
            assert (await a.request(method, path, headers=wrong, **kw)).status_code == 401
            if "/leases/" not in path and not path.endswith("/fetch") and "lag" not in path:
                r = await a.request(method, path, headers=READER, **kw)
                assert r.status_code == 403, (path, r.text)
        statuses = Counter[str]()
        text = (await a.get("/metrics")).text
        for line in text.splitlines():
            if line.startswith("tubemq_gateway_http_requests_total{"):
                statuses[line.split('status="')[1].split('"')[0]] += 1
        assert "500" not in statuses
