"""The housekeeper on the real cluster: two uvicorn replicas, one leader per group, failover
after SIGKILL, lag gauges of an idle group, broadcast client GC, idle session close."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import redis.asyncio as aioredis
from prometheus_client.parser import text_string_to_metric_families

from tests.support.gateway_support import (
    ADMIN,
    READER,
    Group,
    gateways,
    lease_one,
    produce_numbered,
    write_config,
)
from tubemq_aio.testing import LocalCluster, RedisServer, wait_until

INDEX_ENTRY = 28  # bytes of one message in a TubeMQ index file (offsets count these)
HK = """sync_interval = 1
[housekeeper]
leader_lease_ms = 3000
probe_interval_ms = 1000
client_idle_ms = 3000
session_idle_ms = 2000
"""


Scrape = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(client: httpx.AsyncClient) -> Scrape:
    """``/metrics`` as (name, sorted label pairs) -> value."""
    r = await client.get("/metrics")
    assert r.status_code == 200
    out: Scrape = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def labels(**pairs: str) -> tuple[tuple[str, str], ...]:
    """The sorted label pairs of a sample."""
    return tuple(sorted(pairs.items()))


def leader_of(metrics: Scrape, group: str) -> bool:
    """Whether the scraped replica leads ``group``."""
    return metrics.get(("tubemq_gateway_housekeeper_leader", labels(group=group))) == 1.0


async def test_housekeeper_leader_failover_lag_gauges_and_client_gc(
    cluster: LocalCluster, topic: str, redis: RedisServer, tmp_path: Path
) -> None:
    groups = [Group("hkc", [topic]), Group("hkb", [topic], mode="broadcast")]
    config = write_config(tmp_path / "gw.toml", cluster, redis.url, [topic], groups, extra=HK)
    async with gateways(config, 2) as (reps, clients):

        async def leaders() -> list[int]:
            seen = [await scrape(c) for c in clients]
            found = [i for i, m in enumerate(seen) if leader_of(m, "hkc")]
            assert len(found) <= 1, "two replicas lead hkc at once"
            return found

        [leader] = await wait_until(leaders, 60, "a housekeeper leader", interval=0.3)
        for _ in range(8):  # stays the only one
            assert await leaders() == [leader]
            await asyncio.sleep(0.25)

        # lag of the idle clustering group: nobody fetches hkc, the leader probes it
        count = 300
        stored = await produce_numbered(clients[0], topic, count)
        per_broker = Counter(key.split(":")[0] for key in stored.values())

        async def gauges_current() -> dict[str, float] | None:
            m = await scrape(clients[leader])
            lag = {
                dict(pairs)["partition"]: v
                for (name, pairs), v in m.items()
                if name == "tubemq_gateway_group_lag_bytes"
                and dict(pairs)["group"] == "hkc"
                and dict(pairs)["scope"] == "c"
            }
            want = {p: INDEX_ENTRY * per_broker[p.split(":")[0]] for p in lag}
            last.append((lag, want))
            return lag if len(lag) == 2 * 3 and lag == want else None

        last: list[Any] = []
        try:
            lag = await wait_until(gauges_current, 90, "lag gauges of the idle group", interval=0.3)
        except AssertionError as exc:
            logs = [r.log_file.read_text()[-3000:] for r in reps]
            raise AssertionError(f"{exc}; last seen {last[-1:]}; logs {logs}") from None

        lag = await wait_until(gauges_current, 90, "lag gauges of the idle group", interval=0.3)
        # partitions of one store share offsets: each reports its broker's store backlog
        r = await clients[1 - leader].get("/v1/groups/hkc/lag", headers=READER)
        assert r.status_code == 200, r.text
        report = {p["partition_key"]: p for p in r.json()["partitions"]}
        assert {p: float(e["lag_bytes"]) for p, e in report.items()} == lag
        assert all(e["committed"] == "0" for e in report.values())
        total = (await scrape(clients[leader]))[
            ("tubemq_gateway_group_lag_total_bytes", labels(group="hkc", scope="c"))
        ]
        assert total == sum(lag.values()) == int(r.json()["total_lag_bytes"])
        other = await scrape(clients[1 - leader])
        assert not any(name.startswith("tubemq_gateway_group_lag") for name, _ in other)

        # broadcast: a client reads once, goes away; its state is collected after 3 s idle
        reply = await lease_one(clients[1 - leader], "hkb", client_id="gone")
        ack = await clients[1 - leader].post(
            f"/v1/leases/{reply['lease']['token']}/ack", headers=READER
        )
        assert ack.status_code == 200, ack.text
        store = aioredis.Redis.from_url(redis.url)
        try:
            assert await store.sismember("tgw:{g:hkb}:clients", "b:gone")

            async def collected() -> bool:
                return not await store.exists("tgw:{g:hkb}:b:gone:st") and not (
                    await store.sismember("tgw:{g:hkb}:clients", "b:gone")
                )

            await wait_until(collected, 60, "GC of the idle broadcast client", interval=0.3)
            assert await store.exists("tgw:{g:hkc}:c:st")  # clustering state untouched
        finally:
            await store.aclose()
        gone = await clients[0].get("/v1/groups/hkb/lag?client_id=gone", headers=READER)
        assert gone.status_code == 200
        assert gone.json()["partitions"] == []

        # the replica that served the broadcast fetch closes its idle session (2 s), and
        # the next fetch reopens it
        async def session_closed() -> bool:
            m = await scrape(clients[1 - leader])
            return m.get(("tubemq_gateway_housekeeper_sessions_closed_total", ()), 0.0) >= 1

        await wait_until(session_closed, 60, "close of the idle TubeMQ session", interval=0.3)
        again = await lease_one(clients[1 - leader], "hkb", client_id="fresh")
        assert again["messages"]

        # the leader dies: the other replica takes over within lease + tick (+ load slack)
        await reps[leader].kill()
        survivor = clients[1 - leader]

        async def took_over() -> bool:
            return leader_of(await scrape(survivor), "hkc")

        await wait_until(took_over, 30, "failover of the housekeeper", interval=0.3)

        async def survivor_gauges() -> bool:
            m = await scrape(survivor)
            key = ("tubemq_gateway_group_lag_total_bytes", labels(group="hkc", scope="c"))
            return m.get(key) == total

        await wait_until(survivor_gauges, 30, "lag gauges on the new leader", interval=0.3)
        r = await survivor.post("/v1/groups/hkc/pause", headers=ADMIN)
        assert r.status_code == 200  # the survivor still serves admin calls
