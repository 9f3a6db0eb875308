"""A request body not declared as JSON is answered 415 ``unsupported_media_type`` (saying to
send JSON), on every route that takes a body; so is a JSON body declaring a charset other than
UTF-8 (saying to send UTF-8 JSON). A body-less request needs no Content-Type."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.support.gateway_fakes import ADMIN, FakeEngine, FakeProducer, fake_app

BODY = b'{"value": "hello"}'


@pytest.fixture
def client() -> Iterator[TestClient]:
    engine = FakeEngine({"g1": "clustering", "gb": "broadcast", "other": "clustering"})
    producer = FakeProducer()
    app = fake_app(engine, producer=producer)
    with TestClient(app) as c:
        yield c


@pytest.mark.parametrize(
    "media",
    [None, "application/x-www-form-urlencoded", "text/plain", "application/jsonx", "json"],
)
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/topics/demo/messages"),
        ("POST", "/v1/topics/demo/messages/batch"),
        ("POST", "/v1/groups/g1/fetch"),
        ("PUT", "/v1/groups/g1/rate"),
        ("POST", "/v1/groups/g1/offsets/reset"),
    ],
)
def test_a_body_that_is_not_declared_json_is_415(
    client: TestClient, method: str, path: str, media: str | None
) -> None:
    headers = dict(ADMIN)
    if media is not None:
        headers["Content-Type"] = media
    r = client.request(method, path, content=BODY, headers=headers)
    assert r.status_code == 415, r.text
    assert r.json()["error"] == {
        "code": "unsupported_media_type",
        "message": "send the request body as JSON, with the header Content-Type: application/json",
        "retriable": False,
    }


@pytest.mark.parametrize(
    "media",
    [
        "application/json",
        "application/json; charset=utf-8",
        "application/json;charset=UTF-8",
        'application/json; charset="utf-8"',
        'application/json ;  CharSet = "UTF-8" ; q=1',
        "application/json; charset=utf8",
        "application/json; version=2",
        "Application/JSON",
        "application/vnd.api+json",
    ],
)
def test_json_media_types_pass(client: TestClient, media: str) -> None:
    r = client.post(
        "/v1/topics/demo/messages", content=BODY, headers={**ADMIN, "Content-Type": media}
    )
    assert r.status_code == 200, r.text


def test_a_request_without_a_body_needs_no_content_type(client: TestClient) -> None:
    r = client.post("/v1/groups/g1/pause", headers=ADMIN)
    assert r.status_code == 200, r.text
    r = client.post(
        "/v1/groups/g1/resume", content=b"", headers={**ADMIN, "Content-Type": "text/plain"}
    )
    assert r.status_code == 200, r.text


def test_a_chunked_body_is_checked_too(client: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        yield BODY

    r = client.post("/v1/topics/demo/messages", content=chunks(), headers=ADMIN)
    assert r.status_code == 415


@pytest.mark.parametrize(
    ("media", "declared"),
    [
        ("application/json; charset=latin-1", "latin-1"),
        ("application/json; charset=ISO-8859-1", "iso-8859-1"),
        ('application/json; charset="UTF-16"', "utf-16"),
        ("application/vnd.api+json; version=2; Charset = us-ascii", "us-ascii"),
        ("application/json; charset=", ""),
    ],
)
@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/v1/topics/demo/messages"), ("POST", "/v1/groups/g1/fetch")],
)
def test_a_json_body_in_another_charset_is_415(
    client: TestClient, method: str, path: str, media: str, declared: str
) -> None:
    """A body declared in another charset is refused, not read as UTF-8: \xe9 is "é" in
    Latin-1 and no UTF-8 character (a direct route's parser and FastAPI's would differ)."""
    r = client.request(
        method, path, content=b'{"value": "caf\xe9"}', headers={**ADMIN, "Content-Type": media}
    )
    assert r.status_code == 415, r.text
    assert r.json()["error"] == {
        "code": "unsupported_media_type",
        "message": f"the body declares charset {declared!r}: send the request body as JSON in "
        "UTF-8 (RFC 8259 section 8.1), with the header Content-Type: application/json and no "
        "charset, or charset=utf-8",
        "retriable": False,
    }


def test_a_utf8_body_declared_utf8_keeps_its_characters() -> None:
    producer = FakeProducer()
    app = fake_app(FakeEngine({"g1": "clustering"}), producer=producer)
    with TestClient(app) as client:
        r = client.post(
            "/v1/topics/demo/messages",
            content='{"value": "café"}'.encode(),
            headers={**ADMIN, "Content-Type": 'application/json; charset="UTF-8"'},
        )
    assert r.status_code == 200, r.text
    assert [(topic, body) for topic, body, _ in producer.sent] == [("demo", "café".encode())]
