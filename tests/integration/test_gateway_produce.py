"""Gateway produce on the real cluster: the official Java consumer reads it byte-identical."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import httpx

from tests.support.gateway_support import ADMIN, replicas, write_config
from tests.support.java_interop import java_dump
from tubemq_aio.testing import LocalCluster

MSG_TIME = "202611231030"


async def test_java_consumer_reads_gateway_messages(
    cluster: LocalCluster, topic: str, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "gw.toml", cluster, "redis://127.0.0.1:1/0", [topic])
    sent: dict[bytes, dict[str, str]] = {}
    async with (
        replicas(config, 1) as (replica,),
        httpx.AsyncClient(base_url=replica.url, timeout=30) as client,
    ):
        messages = []
        for i in range(300):
            body = f"gw-{i}-".encode() + bytes([i % 256]) * (i % 50)
            attrs = {"idx": str(i), "src": "gateway"}
            sent[body] = attrs
            messages.append(
                {
                    "value": base64.b64encode(body).decode(),
                    "encoding": "base64",
                    "attributes": attrs,
                    "msg_type": f"type{i % 3}",
                    "msg_time": MSG_TIME,
                }
            )
        one = messages.pop()
        r = await client.post(f"/v1/topics/{topic}/messages", json=one, headers=ADMIN)
        assert r.status_code == 200, r.text
        assert r.json()["partition_key"].split(":")[1] == topic
        r = await client.post(
            f"/v1/topics/{topic}/messages/batch", json={"messages": messages}, headers=ADMIN
        )
        assert r.status_code == 200, r.text
        assert len(r.json()["results"]) == len(messages)
        metrics = (await client.get("/metrics")).text
        assert (
            f'tubemq_gateway_produced_messages_total{{status="200",topic="{topic}"}} 300.0'
            in metrics
        )
    received = await java_dump(cluster, topic, f"g_java_gw_{topic}", len(sent))
    assert len(received) == len(sent)
    for item in received:
        body = base64.b64decode(item["body_b64"])
        attrs = sent.pop(body)
        i = int(attrs["idx"])
        assert item["msg_type"] == f"type{i % 3}"
        assert item["msg_time"] == MSG_TIME
        pairs = dict(kv.split("=", 1) for kv in item["attribute"].split(","))
        assert pairs["idx"] == attrs["idx"]
        assert pairs["src"] == "gateway"
    assert not sent


async def test_topic_listing_reads_the_real_brokers_offsets(
    cluster: LocalCluster, topic: str, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "gw.toml", cluster, "redis://127.0.0.1:1/0", [topic])
    async with (
        replicas(config, 1) as (replica,),
        httpx.AsyncClient(base_url=replica.url, timeout=30, headers=ADMIN) as client,
    ):
        before = (await client.get(f"/v1/topics/{topic}")).json()["partitions"]
        assert before
        r = await client.post(f"/v1/topics/{topic}/messages", json={"value": "x", "key": "k"})
        assert r.status_code == 200, r.text
        stored = r.json()["partition_key"]
        await asyncio.sleep(1.1)  # past the listing's reuse of an answer
        after = {
            p["partition_key"]: p
            for p in (await client.get(f"/v1/topics/{topic}")).json()["partitions"]
        }
        old = {p["partition_key"]: p for p in before}
        assert int(after[stored]["max_offset"]) > int(old[stored]["max_offset"])
        assert all(int(p["min_offset"]) <= int(p["max_offset"]) for p in after.values())
