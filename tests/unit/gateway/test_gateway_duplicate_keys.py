"""A key given twice in a JSON body: the last one counts, on every way a body is read (the
direct route's model, FastAPI's handler, the shared batch reader), as docs/gateway.md says."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.support.gateway_fakes import ADMIN, FASTAPI_JSON, FakeEngine, FakeProducer, fake_app


@pytest.mark.parametrize(
    ("path", "media", "body"),
    [
        # application/json: the direct route's model reads it
        ("/v1/topics/demo/messages", "application/json", b'{"value": "a", "value": "b"}'),
        # the charset=utf-8 spellings clients send take the direct route too
        (
            "/v1/topics/demo/messages",
            "application/json; charset=utf-8",
            b'{"value": "a", "value": "b"}',
        ),
        # another spelling: FastAPI's handler reads it
        ("/v1/topics/demo/messages", FASTAPI_JSON, b'{"value": "a", "value": "b"}'),
        # a batch whose messages share their options: read by orjson
        (
            "/v1/topics/demo/messages/batch",
            "application/json",
            b'{"messages": [{"value": "a", "value": "b"}]}',
        ),
    ],
)
def test_the_last_of_a_repeated_key_counts(path: str, media: str, body: bytes) -> None:
    producer = FakeProducer()
    app = fake_app(FakeEngine({"g1": "clustering"}), producer=producer)
    with TestClient(app) as client:
        r = client.post(path, content=body, headers={**ADMIN, "Content-Type": media})
    assert r.status_code == 200, r.text
    assert [(topic, value) for topic, value, _ in producer.sent] == [("demo", b"b")]
