"""Poison batches on the real cluster: a batch nacked past max_redeliveries goes to the
dead-letter topic (attributes name its source), the group moves past it, a metric counts it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from tests.support.gateway_support import (
    READER,
    Group,
    gateways,
    lease_one,
    produce_numbered,
    write_config,
)
from tubemq_aio.testing import LocalCluster, RedisServer


def dlq_group(topic: str, dead: str) -> str:
    """A ``[[groups]]`` entry with poison-batch handling (after 1 redelivery)."""
    return "\n".join(
        [
            "[[groups]]",
            'name = "dlqg"',
            f'topics = ["{topic}"]',
            "lease_ms = 15000",
            "lease_ms_min = 1000",
            "max_redeliveries = 1",
            f'dlq_topic = "{dead}"',
        ]
    )


async def test_poison_batches_go_to_the_dead_letter_topic(
    cluster: LocalCluster, topic: str, second_topic: str, redis: RedisServer, tmp_path: Path
) -> None:
    config = write_config(
        tmp_path / "gw.toml",
        cluster,
        redis.url,
        [topic, second_topic],
        [Group("dlqread", [second_topic])],
        extra=dlq_group(topic, second_topic),
    )
    async with gateways(config, 1) as (_reps, [client]):
        stored = await produce_numbered(client, topic, 12, batch=12, prefix="p")
        seen: dict[str, list[int]] = {}
        deadline = time.monotonic() + 120
        while True:  # nack everything: each batch comes twice (redelivery 0, 1), then is moved
            r = await client.get("/v1/groups/dlqg/lag", headers=READER)
            assert r.status_code == 200, r.text
            lag = r.json()
            parts = lag["partitions"]
            if (
                len(parts) == 6
                and lag["total_lag_bytes"] == "0"
                and all(p["committed"] is not None for p in parts)
            ):
                break
            assert time.monotonic() < deadline, (lag, seen)
            f = await client.post("/v1/groups/dlqg/fetch", json={"wait_ms": 500}, headers=READER)
            if f.status_code == 503 and f.json()["error"]["retriable"]:
                await asyncio.sleep(0.3)
                continue
            assert f.status_code == 200, f.text
            reply: dict[str, Any] = f.json()
            if reply["status"] != "ok":
                continue
            for m in reply["messages"]:
                seen.setdefault(m["value"], []).append(reply["lease"]["redelivery"])
            token = reply["lease"]["token"]
            n = await client.post(f"/v1/leases/{token}/nack", json={"delay_ms": 0}, headers=READER)
            assert n.status_code == 200, n.text
        assert set(seen) == set(stored)
        assert all(sorted(v) == [0, 1] for v in seen.values()), seen

        dead: dict[str, dict[str, str]] = {}
        while set(dead) != set(stored):
            got = await lease_one(client, "dlqread", timeout=60)
            for m in got["messages"]:
                dead[m["value"]] = m["attributes"]
            a = await client.post(f"/v1/leases/{got['lease']['token']}/ack", headers=READER)
            assert a.status_code == 200, a.text
        for value, attributes in dead.items():
            assert attributes["tgw_reason"] == "max_redeliveries"
            source, _, offset = attributes["tgw_src"].rpartition("@")
            assert source == stored[value]
            assert int(offset) >= 0
        metrics = (await client.get("/metrics")).text
        line = 'tubemq_gateway_dead_lettered_messages_total{group="dlqg"} 12.0'
        assert line in metrics
