"""``POST /v1/groups/{g}/offsets/reset`` with ``to_time`` at the HTTP layer (the engine side
runs on the real cluster in tests/integration/test_time_cluster.py)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import pytest
from fastapi.testclient import TestClient

from tests.support.gateway_fakes import ADMIN, READER, FakeEngine, fake_app

URL = "/v1/groups/g1/offsets/reset"


@pytest.fixture
def client() -> Iterator[TestClient]:
    engine = FakeEngine({"g1": "clustering"})
    for n in range(3):
        engine.add("1:demo:0", b"x", b"y", msg_time=datetime(2026, 11, 29, 10, 2 * n))
    engine.add("1:demo:1", b"z", msg_time=datetime(2026, 11, 29, 10, 0))
    with TestClient(fake_app(engine)) as c:
        yield c


def test_to_time_answers_like_every_reset(client: TestClient) -> None:
    r = client.post(URL, json={"to_time": "2026-11-29T12:03:00+02:00"}, headers=ADMIN)
    assert r.status_code == 200, r.text
    got = {p["partition_key"]: (p["old"], p["new"]) for p in r.json()["partitions"]}
    assert got == {"1:demo:0": ("0", "4"), "1:demo:1": ("0", "1")}
    r = client.post(URL, json={"to_time": "2026-11-29T10:01:59Z"}, headers=ADMIN)
    assert r.json()["partitions"][0] == {
        "partition_key": "1:demo:0",
        "old": "4",
        "new": "2",
        "scope": "c",
    }


@pytest.mark.parametrize(
    "body",
    [
        {"to_time": "2026-11-29T10:00:00"},  # naive
        {"to_time": "yesterday"},
        {"to_time": 1764410400},
        {"to_time": None},
        {},
        {"to": "earliest", "to_time": "2026-11-29T10:00:00Z"},
        # in range as written, out of datetime's range in UTC or in the group's zone (was 500)
        {"to_time": "9999-12-31T23:59:59-14:00"},
        {"to_time": "0001-01-01T00:00:00+14:00"},
        {"to_time": "9999-12-31T12:00:00Z"},
        {"to_time": "0001-01-01T10:00:00Z"},
    ],
)
def test_bad_to_time_is_422(client: TestClient, body: dict[str, object]) -> None:
    r = client.post(URL, json=body, headers=ADMIN)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "invalid"


def test_to_time_needs_admin(client: TestClient) -> None:
    r = client.post(URL, json={"to_time": "2026-11-29T10:00:00Z"}, headers=READER)
    assert r.status_code == 403
