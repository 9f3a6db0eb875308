"""A batch with invalid messages: each invalid one gets its own 422 result (naming its problem),
the valid ones are sent, and the answer is 207; only a body that is not a batch at all is
refused whole."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.support.gateway_fakes import ADMIN, FASTAPI_JSON, FakeEngine, FakeProducer, fake_app

URL = "/v1/topics/demo/messages/batch"


@pytest.fixture
def producer() -> FakeProducer:
    return FakeProducer()


@pytest.fixture
def client(producer: FakeProducer) -> Iterator[TestClient]:
    app = fake_app(FakeEngine({"g1": "clustering"}), producer=producer)
    with TestClient(app) as c:
        yield c


@pytest.mark.parametrize("media", ["application/json", FASTAPI_JSON], ids=["direct", "fastapi"])
def test_invalid_messages_get_their_own_results_and_the_rest_is_sent(
    client: TestClient, producer: FakeProducer, media: str
) -> None:
    messages: list[Any] = [
        {"value": "a"},
        {"value": ""},
        {"value": "b", "attributes": {"a,b": "1"}},
        "just text",
        {"value": "c", "extra": 1},
        {"value": "@@", "encoding": "base64"},
        {"value": "d"},
    ]
    r = client.post(URL, json={"messages": messages}, headers={**ADMIN, "Content-Type": media})
    assert r.status_code == 207, r.text
    results = r.json()["results"]
    assert [x["index"] for x in results] == list(range(7))
    assert [x["status"] for x in results] == [200, 422, 422, 422, 422, 422, 200]
    errors = {x["index"]: x["error"] for x in results if x["status"] != 200}
    assert all(e["code"] == "invalid" and e["retriable"] is False for e in errors.values())
    assert errors[1]["message"].startswith("value: ")
    assert errors[2]["message"].startswith("attributes.")
    assert errors[3]["message"] == "a message must be a JSON object"
    assert errors[4]["message"].startswith("extra: ")
    assert errors[5]["message"] == "value is not valid base64"
    assert [body for _, body, _ in producer.sent] == [b"a", b"d"]


def test_a_batch_of_only_invalid_messages_sends_nothing(
    client: TestClient, producer: FakeProducer
) -> None:
    r = client.post(URL, json={"messages": [{"value": ""}, {"value": ""}]}, headers=ADMIN)
    assert r.status_code == 207
    assert [x["status"] for x in r.json()["results"]] == [422, 422]
    assert producer.sent == []


@pytest.mark.parametrize(
    "body",
    [{}, {"messages": []}, {"messages": {"value": "a"}}, {"messages": [{"value": "a"}], "x": 1}],
    ids=["no-messages", "empty", "not-a-list", "extra-key"],
)
def test_a_body_that_is_not_a_batch_is_refused_whole(
    client: TestClient, producer: FakeProducer, body: dict[str, Any]
) -> None:
    r = client.post(URL, json=body, headers=ADMIN)
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "invalid"
    assert producer.sent == []
