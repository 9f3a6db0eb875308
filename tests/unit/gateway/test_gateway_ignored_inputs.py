"""Inputs a route would silently ignore are refused (httpx's ASGI transport): a body sent to a
route that takes none, and a query parameter given twice.

``POST /v1/groups/g1/pause`` with ``{"partitions": ["1:demo:0"]}`` paused the whole group and
answered ``{"ok": true}``; ``{"for_ms": 60000}`` paused it for good; an ack with a body did the
ack whatever the body said. Each is now a 422 ``invalid`` naming the key, and nothing is done;
no body, an empty one and ``{}`` are served as before. ``?client_id=a&client_id=b`` answered
for one of the two; it is a 422 ``invalid_request`` now.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.support.gateway_fakes import FakeEngine, app_client

_JSON = {"content-type": "application/json"}


def _refused(r: httpx.Response, code: str) -> str:
    """The message of ``r``, a 422 error answer of ``code`` (not retriable)."""
    assert r.status_code == 422, (r.request.content[:80], r.status_code, r.text)
    error = r.json()["error"]
    assert (error["code"], error["retriable"]) == (code, False), r.text
    message: str = error["message"]
    return message


@pytest.fixture
async def gateway() -> AsyncIterator[tuple[httpx.AsyncClient, FakeEngine]]:
    engine = FakeEngine({"g1": "clustering"})
    engine.add("1:demo:0", b"a1", b"a2")
    async with app_client(engine) as c:
        yield c, engine


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b'{"partitions": ["1:demo:0"]}', "body.partitions: this route takes no body"),
        (b'{"for_ms": 60000}', "body.for_ms: this route takes no body"),
        (b"[]", "body: this route takes no body"),
        (b"null", "body: this route takes no body"),
        (b'{"a":', "body: not valid JSON at character 5"),
        # too deep for json on 3.11 and 3.12 ("not valid JSON"); 3.13 parses it ("takes no body")
        (b"[" * 3000 + b"]" * 3000, "body: "),
    ],
)
async def test_a_pause_with_a_body_is_refused_and_pauses_nothing(
    gateway: tuple[httpx.AsyncClient, FakeEngine], body: bytes, words: str
) -> None:
    c, engine = gateway
    r = await c.post("/v1/groups/g1/pause", content=body, headers=_JSON)
    assert _refused(r, "invalid").startswith(words), r.text
    assert engine.paused == set()


async def test_resume_with_a_body_is_refused_and_resumes_nothing(
    gateway: tuple[httpx.AsyncClient, FakeEngine],
) -> None:
    c, engine = gateway
    assert (await c.post("/v1/groups/g1/pause")).status_code == 200
    r = await c.post("/v1/groups/g1/resume", content=b'{"partitions": ["x"]}', headers=_JSON)
    assert _refused(r, "invalid").startswith("body.partitions: ")
    assert engine.paused == {"g1"}


async def test_an_ack_with_a_body_is_refused_and_the_lease_stays_open(
    gateway: tuple[httpx.AsyncClient, FakeEngine],
) -> None:
    c, _engine = gateway
    token = (await c.post("/v1/groups/g1/fetch", json={})).json()["lease"]["token"]
    r = await c.post(f"/v1/leases/{token}/ack", content=b'{"delay_ms": 5}', headers=_JSON)
    assert _refused(r, "invalid").startswith("body.delay_ms: this route takes no body")
    # Nothing was settled: the lease can still be nacked, then the ack meets the nack.
    assert (await c.post(f"/v1/leases/{token}/nack")).json() == {"result": "nacked"}


@pytest.mark.parametrize("body", [None, b"", b"{}", b" { } \n"])
async def test_no_body_an_empty_one_and_an_empty_object_are_served(
    gateway: tuple[httpx.AsyncClient, FakeEngine], body: bytes | None
) -> None:
    c, engine = gateway
    headers = _JSON if body is not None else {}
    r = await c.post("/v1/groups/g1/pause", content=body, headers=headers)
    assert r.status_code == 200, r.text
    assert engine.paused == {"g1"}
    token = (await c.post("/v1/groups/g1/resume", content=body, headers=headers)).status_code
    assert token == 200
    lease = (await c.post("/v1/groups/g1/fetch", json={})).json()["lease"]["token"]
    r = await c.post(f"/v1/leases/{lease}/ack", content=body, headers=headers)
    assert r.json() == {"result": "acked"}, r.text


async def test_a_chunked_body_is_read_and_refused(
    gateway: tuple[httpx.AsyncClient, FakeEngine],
) -> None:
    c, engine = gateway

    async def parts() -> AsyncIterator[bytes]:
        yield b'{"partit'
        yield b'ions": []}'

    r = await c.post("/v1/groups/g1/pause", content=parts(), headers=_JSON)
    assert _refused(r, "invalid").startswith("body.partitions: ")
    assert engine.paused == set()


async def test_a_get_route_still_ignores_a_body(
    gateway: tuple[httpx.AsyncClient, FakeEngine],
) -> None:
    """GET bodies have no meaning (RFC 9110, section 9.3.1): a client library that sends one is not
    refused for it."""
    c, _engine = gateway
    r = await c.request("GET", "/v1/topics", content=b'{"x": 1}', headers=_JSON)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(
    "path",
    [
        "/v1/groups/g1/lag?client_id=a&client_id=b",
        "/v1/groups/g1?client_id=a&client_id=a",
        "/v1/groups/g1/stream?window=1&window=2",
    ],
)
async def test_a_query_parameter_given_twice_is_refused(
    gateway: tuple[httpx.AsyncClient, FakeEngine], path: str
) -> None:
    """``?window=1&window=2`` streamed with one of them, the other silently dropped."""
    c, _engine = gateway
    name = path.rsplit("&", 1)[1].split("=")[0]
    assert _refused(await c.get(path), "invalid_request") == (
        f"query parameter {name!r} given more than once; give it once"
    )


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
async def test_the_probes_answer_head_as_their_get(
    gateway: tuple[httpx.AsyncClient, FakeEngine], path: str
) -> None:
    """A monitor probing with ``HEAD`` met 405 Method Not Allowed from a healthy replica."""
    c, _engine = gateway
    got, head = await c.get(path), await c.head(path)
    assert head.status_code == got.status_code == 200, head.text
    assert head.headers["content-type"] == got.headers["content-type"]
    spec = (await c.get("/openapi.json")).json()["paths"][path]
    assert list(spec) == ["get"]  # HEAD is served, not documented as an operation
    # another method is refused naming the documented GET (it said ``Allow: HEAD``, which
    # the schemathesis run of tests/integration flagged: ST205)
    refused = await c.options(path)
    assert refused.status_code == 405, refused.text
    assert "GET" in [m.strip() for m in refused.headers["allow"].split(",")]
