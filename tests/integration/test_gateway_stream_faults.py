"""The stream variant of the replica kill (``test_gateway_faults.py``), on real processes: a
replica SIGKILLed while its stream holds unacked batches releases nothing, so those batches
come back when their leases end, through another replica's stream, and every message is
delivered (set equality) with no 500."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import httpx

from tests.support.gateway_stream_support import EventReader
from tests.support.gateway_support import READER, Group, gateways, produce_numbered, write_config
from tubemq_aio.testing import LocalCluster, RedisServer


async def _ack(client: httpx.AsyncClient, batch: dict[str, object]) -> int:
    lease = batch["lease"]
    assert isinstance(lease, dict)
    r = await client.post(f"/v1/leases/{lease['token']}/ack", headers=READER)
    return r.status_code


async def test_a_replica_killed_mid_stream_skips_nothing(
    cluster: LocalCluster, topic: str, redis: RedisServer, tmp_path: Path
) -> None:
    config = write_config(
        tmp_path / "gw.toml", cluster, redis.url, [topic],
        [Group("gks", [topic], lease_ms=3000, lease_ms_min=1000)],
    )  # fmt: skip
    async with gateways(config, 2) as ((a, _b), (ca, cb)):
        stored = await produce_numbered(cb, topic, 1500)
        delivered: Counter[str] = Counter()
        unacked: list[str] = []
        async with ca.stream("GET", "/v1/groups/gks/stream?window=3", headers=READER) as resp:
            assert resp.status_code == 200
            events = EventReader(resp)
            for i in range(3):
                kind, data = await events.next(60)
                assert kind == "batch", data
                values = [m["value"] for m in data["messages"]]
                delivered.update(values)
                if i == 0:
                    assert await _ack(cb, data) == 200  # acked through the other replica
                else:
                    unacked += values  # held by A's stream when it dies
            await a.kill()
            await events.aclose()
        assert unacked
        redelivered = 0
        statuses: Counter[int] = Counter()
        async with cb.stream("GET", "/v1/groups/gks/stream?window=4", headers=READER) as resp:
            events = EventReader(resp)
            while not set(stored) <= set(delivered):
                kind, data = await events.next(90)
                if kind != "batch":
                    continue
                delivered.update(m["value"] for m in data["messages"])
                redelivered += data["lease"]["redelivery"] > 0
                statuses[await _ack(cb, data)] += 1
            await events.aclose()
        assert set(delivered) == set(stored)
        assert set(unacked) <= set(delivered)
        assert redelivered >= 1  # A's unacked batches came back once their leases ended
        assert 500 not in statuses
        assert statuses[200] >= 1
