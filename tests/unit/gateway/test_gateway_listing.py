"""The listing routes against in-memory stand-ins: what each key sees, 403/404, shapes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.support.gateway_fakes import ADMIN, READER, FakeEngine, fake_app
from tubemq_aio.gateway import GatewayConfig
from tubemq_aio.gateway.errors import TubeUnavailableError
from tubemq_aio.gateway.tubemq.topic_offsets import TopicPartition

PRODUCER_ONLY = {"Authorization": "Bearer k-producer-1"}
CONFIG = GatewayConfig.from_mapping(
    {
        "masters": "127.0.0.1:1",
        "redis": "redis://127.0.0.1:1/0",
        "secret": "0123456789abcdef0123",
        "produce_topics": ["demo", "out"],
        "groups": [
            {"name": "g1", "topics": ["demo"], "lease_ms": 20_000},
            {"name": "gb", "topics": ["demo", "side"], "mode": "broadcast"},
            {"name": "other", "topics": ["demo"]},
        ],
        "keys": [
            {"key": "k-admin-1", "scopes": ["produce:*", "consume:*", "admin:*"]},
            {"key": "k-reader-1", "scopes": ["consume:g*"]},
            {"key": "k-producer-1", "scopes": ["produce:out"]},
        ],
    }
)


class Topics:
    """A stand-in topic reader: two partitions of every topic, or down."""

    def __init__(self) -> None:
        self.down = False
        self.asked: list[str] = []

    async def __call__(self, topic: str) -> list[TopicPartition]:
        self.asked.append(topic)
        if self.down:
            raise TubeUnavailableError("master unreachable")
        return [
            TopicPartition(f"1:{topic}:{i}", "127.0.0.1:8123", i, True, 0, 2**60 + i)
            for i in range(2)
        ]


@pytest.fixture
def topics() -> Topics:
    return Topics()


@pytest.fixture
def client(topics: Topics) -> Iterator[TestClient]:
    engine = FakeEngine({"g1": "clustering", "gb": "broadcast", "other": "clustering"})
    engine.add("1:demo:0", b"a1", b"a2")
    with TestClient(fake_app(engine, CONFIG, topic_offsets=topics)) as c:
        yield c


def names(items: list[dict[str, Any]]) -> list[str]:
    return [i["name"] for i in items]


def test_topics_are_those_configured_that_the_key_may_use(client: TestClient) -> None:
    r = client.get("/v1/topics", headers=ADMIN)
    assert r.status_code == 200, r.text
    assert r.json()["topics"] == [
        {"name": "demo", "produce": True, "groups": ["g1", "gb", "other"]},
        {"name": "out", "produce": True, "groups": []},
        {"name": "side", "produce": False, "groups": ["gb"]},
    ]
    reader = client.get("/v1/topics", headers=READER).json()["topics"]
    assert reader == [
        {"name": "demo", "produce": False, "groups": ["g1", "gb"]},
        {"name": "side", "produce": False, "groups": ["gb"]},
    ]
    producer = client.get("/v1/topics", headers=PRODUCER_ONLY).json()["topics"]
    assert producer == [{"name": "out", "produce": True, "groups": []}]
    assert client.get("/v1/topics").status_code == 401


def test_topic_detail_lists_partitions_with_offsets_as_text(
    client: TestClient, topics: Topics
) -> None:
    r = client.get("/v1/topics/demo", headers=READER)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["name"] == "demo"
    assert body["groups"] == ["g1", "gb"]
    assert body["partitions"][1] == {
        "partition_key": "1:demo:1",
        "broker": "127.0.0.1:8123",
        "partition_id": 1,
        "subscribable": True,
        "min_offset": "0",
        "max_offset": str(2**60 + 1),
    }
    assert topics.asked == ["demo"]


def test_topic_detail_refuses_a_topic_out_of_scope_or_not_served(
    client: TestClient, topics: Topics
) -> None:
    r = client.get("/v1/topics/demo", headers=PRODUCER_ONLY)
    assert (r.status_code, r.json()["error"]["code"]) == (403, "forbidden")
    r = client.get("/v1/topics/nope", headers=ADMIN)  # may produce anywhere: so it is told
    assert (r.status_code, r.json()["error"]["code"]) == (404, "unknown_topic")
    r = client.get("/v1/topics/nope", headers=READER)  # may not: no hint whether it exists
    assert r.status_code == 403
    assert topics.asked == []


def test_topic_detail_while_the_cluster_is_down_is_tube_unavailable(
    client: TestClient, topics: Topics
) -> None:
    topics.down = True
    r = client.get("/v1/topics/demo", headers=ADMIN)
    assert r.status_code == 503
    assert r.json()["error"] == {
        "code": "tube_unavailable",
        "message": "the TubeMQ cluster is unavailable",
        "retriable": True,
    }


def test_groups_are_those_the_key_may_consume_or_administer(client: TestClient) -> None:
    assert names(client.get("/v1/groups", headers=ADMIN).json()["groups"]) == [
        "g1",
        "gb",
        "other",
    ]
    groups = client.get("/v1/groups", headers=READER).json()["groups"]
    assert groups == [
        {"name": "g1", "topics": ["demo"], "mode": "clustering"},
        {"name": "gb", "topics": ["demo", "side"], "mode": "broadcast"},
    ]
    assert client.get("/v1/groups", headers=PRODUCER_ONLY).json() == {"groups": []}


def test_group_detail_has_configuration_and_lag(client: TestClient) -> None:
    r = client.get("/v1/groups/g1", headers=READER)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["lease_ms"] == 20_000
    assert body["mode"] == "clustering"
    assert body["start"] == "earliest"
    assert body["dlq_topic"] is None
    assert body["lag"]["group"] == "g1"
    assert body["lag"]["partitions"][0]["max"] == "2"
    assert body["leases"] == []


def test_group_detail_of_a_broadcast_group_needs_a_client_id_for_its_lag(
    client: TestClient,
) -> None:
    body = client.get("/v1/groups/gb", headers=ADMIN).json()
    assert body["lag"] is None
    assert body["leases"] == []
    body = client.get("/v1/groups/gb", params={"client_id": "c1"}, headers=ADMIN).json()
    assert body["lag"]["partitions"][0]["partition_key"] == "1:demo:0"
    r = client.get("/v1/groups/g1", params={"client_id": "c1"}, headers=ADMIN)
    assert r.status_code == 422  # a clustering group has no client ids


def test_group_detail_refusals(client: TestClient) -> None:
    r = client.get("/v1/groups/other", headers=READER)
    assert (r.status_code, r.json()["error"]["code"]) == (403, "forbidden")
    r = client.get("/v1/groups/gnope", headers=READER)
    assert (r.status_code, r.json()["error"]["code"]) == (404, "unknown_group")
    r = client.get("/v1/groups/g1", params={"client_id": "bad id"}, headers=ADMIN)
    assert r.status_code == 422
