"""The stream variant of the replica kill (``test_gateway_faults.py``), on real processes: a
replica SIGKILLed while its stream holds unacked batches releases nothing, so those batches
come back when their leases end, through another replica's stream, as redeliveries, and every
message is acked (set equality) with no 500."""

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
        tmp_path / "gw.toml",
        cluster,
        redis.url,
        [topic],
        [Group("gks", [topic], lease_ms=3000, lease_ms_min=1000)],
    )
    async with gateways(config, 2) as ((a, _b), (ca, cb)):
        stored = await produce_numbered(cb, topic, 1500)
        acked: set[str] = set()
        unacked: list[str] = []
        async with ca.stream("GET", "/v1/groups/gks/stream?window=3", headers=READER) as resp:
            assert resp.status_code == 200
            events = EventReader(resp)
            for i in range(3):
                kind, data = await events.next(60)
                assert kind == "batch", data
                values = [m["value"] for m in data["messages"]]
                if i == 0:
                    assert await _ack(cb, data) == 200  # acked through the other replica
                    acked.update(values)
                else:
                    unacked += values  # held by A's stream when it dies
            await a.kill()
            await events.aclose()
        assert unacked
        redelivered: set[str] = set()
        statuses: Counter[int] = Counter()
        async with cb.stream("GET", "/v1/groups/gks/stream?window=4", headers=READER) as resp:
            events = EventReader(resp)
            while not set(stored) <= acked:  # every message acked, A's unacked ones too
                kind, data = await events.next(90)
                if kind != "batch":
                    continue
                values = [m["value"] for m in data["messages"]]
                if data["lease"]["redelivery"] > 0:
                    redelivered.update(values)
                status = await _ack(cb, data)
                statuses[status] += 1
                if status == 200:
                    acked.update(values)
            await events.aclose()
        assert acked == set(stored)
        # A's unacked batches came back once their leases ended, counted as redeliveries
        assert set(unacked) <= redelivered
        assert 500 not in statuses
