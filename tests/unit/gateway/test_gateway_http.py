"""The HTTP layer against in-memory stand-ins: status codes, error bodies, auth, tokens."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from datetime import datetime
from types import MappingProxyType
from typing import Any, cast

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from tests.support.gateway_fakes import ADMIN, CFG, READER, FakeEngine, FakeProducer, fake_app
from tubemq_aio.gateway import GatewayConfig, create_app
from tubemq_aio.gateway.http.deps import messages_json
from tubemq_aio.models import Message
from tubemq_aio.producer import Producer


@pytest.fixture
def engine() -> FakeEngine:
    eng = FakeEngine({"g1": "clustering", "gb": "broadcast", "other": "clustering"})
    eng.add("1:demo:0", b"a1", b"a2", b"a3", b"a4", attributes={"k": "v"}, msg_type="t")
    eng.add("2:demo:0", b"\xff\xfe")
    return eng


@pytest.fixture
def producer() -> FakeProducer:
    return FakeProducer()


@pytest.fixture
def client(engine: FakeEngine, producer: FakeProducer) -> Iterator[TestClient]:
    app = create_app(
        CFG,
        engine_factory=lambda _cfg: engine,
        producer_factory=lambda _cfg: cast(Producer, producer),
    )
    with TestClient(app) as c:
        yield c
    assert engine.closed
    assert producer.closed


def error(resp: Any, status: int, code: str) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    body: dict[str, Any] = resp.json()["error"]
    assert body["code"] == code
    assert isinstance(body["message"], str)
    assert isinstance(body["retriable"], bool)
    return body


def test_produce_one(client: TestClient, producer: FakeProducer) -> None:
    r = client.post(
        "/v1/topics/demo/messages",
        json={
            "value": "hello",
            "attributes": {"a": "1"},
            "msg_type": "t",
            "msg_time": "202611231030",
        },
        headers=ADMIN,
    )
    assert r.status_code == 200, r.text
    assert set(r.json()) == {"partition_key", "message_id", "append_time", "append_offset"}
    assert isinstance(r.json()["message_id"], str)
    assert isinstance(r.json()["append_offset"], str)
    assert producer.sent[0][1] == b"hello"
    assert producer.sent[0][2]["msg_time"] == "202611231030"
    raw = base64.b64encode(b"\x00\x01").decode()
    r = client.post(
        "/v1/topics/demo/messages", json={"value": raw, "encoding": "base64"}, headers=ADMIN
    )
    assert r.status_code == 200
    assert producer.sent[1][1] == b"\x00\x01"


def test_produce_errors(client: TestClient) -> None:
    url = "/v1/topics/demo/messages"
    error(
        client.post(url, json={"value": "%%", "encoding": "base64"}, headers=ADMIN), 422, "invalid"
    )
    error(client.post(url, json={"value": ""}, headers=ADMIN), 422, "invalid")
    error(client.post(url, json={"value": "x", "msg_time": "2026"}, headers=ADMIN), 422, "invalid")
    error(client.post(url, json={"value": "x", "zzz": 1}, headers=ADMIN), 422, "invalid")
    as_json = {**ADMIN, "Content-Type": "application/json"}
    error(client.post(url, content=b"{not json", headers=as_json), 422, "invalid")
    error(
        client.post(url, json={"value": "x", "attributes": {"a,b": "1"}}, headers=ADMIN),
        422,
        "invalid",
    )
    error(client.post(url, json={"value": "x" * 2000}, headers=ADMIN), 413, "too_large")
    error(client.post(url, json={"value": "x" * 70_000}, headers=ADMIN), 413, "too_large")
    error(
        client.post("/v1/topics/nope/messages", json={"value": "x"}, headers=ADMIN),
        404,
        "unknown_topic",
    )
    body = error(client.post(url, json={"value": "lost"}, headers=ADMIN), 504, "outcome_unknown")
    assert body["retriable"]
    assert "may or may not" in body["message"]
    # The producer's window stayed full for the whole produce timeout: nothing was sent.
    body = error(client.post(url, json={"value": "full"}, headers=ADMIN), 503, "producer_busy")
    assert body["retriable"]
    assert "nothing was sent" in body["message"]
    assert "internal detail" not in body["message"]
    error(client.post(url, json={"value": "x"}, headers=READER), 403, "forbidden")


def test_batch_produce(client: TestClient) -> None:
    url = "/v1/topics/demo/messages/batch"
    r = client.post(url, json={"messages": [{"value": f"m{i}"} for i in range(5)]}, headers=ADMIN)
    assert r.status_code == 200
    assert [x["status"] for x in r.json()["results"]] == [200] * 5
    r = client.post(
        url,
        json={
            "messages": [{"value": "ok"}, {"value": "lost"}, {"value": "@@", "encoding": "base64"}]
        },
        headers=ADMIN,
    )
    assert r.status_code == 207
    results = r.json()["results"]
    assert [x["status"] for x in results] == [200, 504, 422]
    assert results[1]["error"]["code"] == "outcome_unknown"
    assert "message_id" in results[0]
    error(
        client.post(url, json={"messages": [{"value": "x"}] * 51}, headers=ADMIN), 413, "too_large"
    )
    error(
        client.post(url, json={"messages": [{"value": "x"}] * 501}, headers=ADMIN), 422, "invalid"
    )
    error(client.post(url, json={"messages": []}, headers=ADMIN), 422, "invalid")


def test_a_batch_goes_out_in_one_send_many_when_its_messages_share_their_options(
    client: TestClient, producer: FakeProducer
) -> None:
    url = "/v1/topics/demo/messages/batch"
    plain = [{"value": "m0"}, {"value": "lost"}, {"value": "@@", "encoding": "base64"}]
    r = client.post(url, json={"messages": plain}, headers=ADMIN)
    assert [x["status"] for x in r.json()["results"]] == [200, 504, 422]
    assert [x["index"] for x in r.json()["results"]] == [0, 1, 2]
    assert producer.many_calls == 1
    assert [body for _, body, _ in producer.sent] == [b"m0"]
    assert producer.sent[0][2]["timeout"] is None  # the producer's own send_timeout

    mixed = [{"value": "m1"}, {"value": "m2", "attributes": {"k": "v"}}]
    r = client.post(url, json={"messages": mixed}, headers=ADMIN)
    assert [x["status"] for x in r.json()["results"]] == [200, 200]
    assert producer.many_calls == 1  # one send each
    assert producer.sent[-1][2]["attributes"] == {"k": "v"}

    # a body the topic cannot take refuses a send_many whole: each message answers for itself
    big = [{"value": "m3"}, {"value": "y" * 2000}]
    r = client.post(url, json={"messages": big}, headers=ADMIN)
    assert r.status_code == 207
    assert [x["status"] for x in r.json()["results"]] == [200, 413]
    assert producer.many_calls == 1
    assert [body for _, body, _ in producer.sent][-1] == b"m3"


def fetch(client: TestClient, group: str = "g1", **body: Any) -> dict[str, Any]:
    r = client.post(f"/v1/groups/{group}/fetch", json=body, headers=READER)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def test_fetch_ack_cycle(client: TestClient) -> None:
    first = fetch(client)
    assert first["status"] == "ok"
    assert first["lease"]["redelivery"] == 0
    assert [m["value"] for m in first["messages"]] == ["a1", "a2", "a3"]
    assert first["messages"][0]["attributes"] == {"k": "v"}
    assert first["messages"][0]["msg_type"] == "t"
    second = fetch(client)
    assert second["messages"] == [
        {
            "message_id": "1",
            "value": "//4=",
            "encoding": "base64",
            "attributes": {},
            "msg_type": "",
            "msg_time": None,
        }
    ]
    assert fetch(client)["status"] == "busy"
    token = first["lease"]["token"]
    assert client.post(f"/v1/leases/{token}/ack", headers=READER).json() == {"result": "acked"}
    assert client.post(f"/v1/leases/{token}/ack", headers=READER).json() == {
        "result": "already_acked"
    }
    third = fetch(client, ack=[second["lease"]["token"], "t1.bad.token"])
    assert third["messages"][0]["value"] == "a4"
    assert third["acks"][0]["result"] == "acked"
    assert third["acks"][1]["error"]["code"] == "bad_token"
    t3 = third["lease"]["token"]
    r = client.post(f"/v1/leases/{t3}/extend", json={"lease_ms": 20000}, headers=READER)
    assert r.status_code == 200
    assert r.json()["expires_at"] > 0
    assert client.post(f"/v1/leases/{t3}/nack", json={"delay_ms": 0}, headers=READER).json() == {
        "result": "nacked"
    }
    error(client.post(f"/v1/leases/{t3}/ack", headers=READER), 409, "lease_stale")
    error(
        client.post(f"/v1/leases/{t3}/extend", json={"lease_ms": 20000}, headers=READER),
        409,
        "lease_stale",
    )
    again = fetch(client, value_encoding="base64")
    assert again["messages"][0]["value"] == base64.b64encode(b"a4").decode()


def test_max_messages_default_bounds_and_pass_through(
    client: TestClient, engine: FakeEngine
) -> None:
    fetch(client)
    fetch(client, max_messages=1)
    fetch(client, max_messages=10_000)
    assert engine.max_messages == [1000, 1, 10_000]
    for bad in (0, -1, 10_001, "5", 2.5, True, None):
        r = client.post("/v1/groups/g1/fetch", json={"max_messages": bad}, headers=READER)
        error(r, 422, "invalid")
    assert engine.max_messages == [1000, 1, 10_000]  # refused before the engine


def test_messages_json_shares_attribute_forms_and_keeps_each_value() -> None:
    when, other = datetime(2026, 11, 23, 13, 45), datetime(2026, 1, 2, 3, 4)
    attrs = MappingProxyType({"k": "v"})
    msgs = [
        Message(topic="t", body=b"a", attributes=attrs, msg_time=when, message_id=1),
        Message(topic="t", body=b"\xff", attributes=attrs, msg_time=when, message_id=2),
        Message(topic="t", body="é".encode(), msg_time=other, msg_type="x", message_id=3),
    ]
    out = messages_json(msgs, False)
    assert [(m["value"], m["encoding"], m["msg_time"]) for m in out] == [
        ("a", "utf8", "202611231345"),
        ("/w==", "base64", "202611231345"),
        ("é", "utf8", "202601020304"),
    ]
    assert [m["attributes"] for m in out] == [{"k": "v"}, {"k": "v"}, {}]
    assert (out[2]["msg_type"], out[2]["message_id"]) == ("x", "3")
    assert [m["value"] for m in messages_json(msgs[:1], True)] == ["YQ=="]


def test_messages_json_follows_attribute_forms_that_come_back() -> None:
    """A message whose attributes or time differ from the one before gets its own forms,
    also when it shares them with an earlier message (a form is looked up, not carried on)."""
    a, b = MappingProxyType({"k": "a"}), MappingProxyType({"k": "b"})
    t1, t2 = datetime(2026, 1, 1, 0, 1), datetime(2026, 1, 1, 0, 2)
    shapes = [(a, t1), (b, None), (a, t1), (a, t2), (b, t2), (b, t2)]
    msgs = [
        Message(topic="t", body=b"v", attributes=m, msg_time=w, message_id=i)
        for i, (m, w) in enumerate(shapes)
    ]
    out = messages_json(msgs, False)
    assert [(m["attributes"], m["msg_time"]) for m in out] == [
        ({"k": "a"}, "202601010001"),
        ({"k": "b"}, None),
        ({"k": "a"}, "202601010001"),
        ({"k": "a"}, "202601010002"),
        ({"k": "b"}, "202601010002"),
        ({"k": "b"}, "202601010002"),
    ]
    assert [m["message_id"] for m in out] == [str(i) for i in range(len(shapes))]


def test_forged_token_never_reaches_the_engine(client: TestClient, engine: FakeEngine) -> None:
    token = fetch(client)["lease"]["token"]
    calls = engine.calls
    head, payload, mac = token.split(".")
    forged = f"{head}.{payload}.{'A' * len(mac)}"
    for path, body in (("ack", None), ("nack", {}), ("extend", {"lease_ms": 20000})):
        r = client.post(f"/v1/leases/{forged}/{path}", json=body, headers=READER)
        error(r, 400, "bad_token")
    assert engine.calls == calls


def test_token_scope_checked(client: TestClient, engine: FakeEngine) -> None:
    r = client.post("/v1/groups/other/fetch", json={}, headers=ADMIN)
    token = r.json()["lease"]["token"]
    error(client.post(f"/v1/leases/{token}/ack", headers=READER), 403, "forbidden")


def test_normal_states_are_200(client: TestClient, engine: FakeEngine) -> None:
    engine.paused.add("g1")
    assert fetch(client)["status"] == "paused"
    engine.paused.clear()
    engine.throttled.add("g1")
    r = client.post("/v1/groups/g1/fetch", json={}, headers=READER)
    # the wait exactly in the body (a browser reads it without CORS exposing the header),
    # whole seconds rounded up in the header
    assert error(r, 429, "rate_limited")["retry_after_ms"] == 1500
    assert r.headers["Retry-After"] == "2"
    engine.throttled.clear()
    engine.data.clear()
    assert fetch(client)["status"] == "empty"


def test_client_id_rules(client: TestClient) -> None:
    error(client.post("/v1/groups/gb/fetch", json={}, headers=READER), 422, "invalid_request")
    error(
        client.post("/v1/groups/g1/fetch", json={"client_id": "c1"}, headers=READER),
        422,
        "invalid_request",
    )
    assert fetch(client, "gb", client_id="c1")["status"] == "ok"
    assert fetch(client, "gb", client_id="c2")["messages"][0]["value"] == "a1"
    error(
        client.post("/v1/groups/gb/fetch", json={"client_id": "a b"}, headers=READER),
        422,
        "invalid",
    )
    error(
        client.post("/v1/groups/g1/fetch", json={"wait_ms": 30001}, headers=READER), 422, "invalid"
    )
    error(client.post("/v1/groups/nope/fetch", json={}, headers=ADMIN), 404, "unknown_group")


def test_admin_routes(client: TestClient, engine: FakeEngine) -> None:
    token = fetch(client)["lease"]["token"]
    r = client.post("/v1/groups/g1/offsets/reset", json={"to": "latest"}, headers=ADMIN)
    assert r.status_code == 200
    assert {p["partition_key"]: (p["old"], p["new"]) for p in r.json()["partitions"]} == {
        "1:demo:0": ("0", "4"),
        "2:demo:0": ("0", "1"),
    }
    error(client.post(f"/v1/leases/{token}/ack", headers=READER), 409, "lease_stale")
    r = client.post("/v1/groups/g1/offsets/reset", json={"to": {"1:demo:0": 1}}, headers=ADMIN)
    assert r.json()["partitions"] == [
        {"partition_key": "1:demo:0", "old": "4", "new": "1", "scope": "c"}
    ]
    error(
        client.post("/v1/groups/g1/offsets/reset", json={"to": {"1:demo:0": -1}}, headers=ADMIN),
        422,
        "invalid",
    )
    error(
        client.post("/v1/groups/g1/offsets/reset", json={"to": "middle"}, headers=ADMIN),
        422,
        "invalid",
    )
    assert client.post("/v1/groups/g1/pause", headers=ADMIN).json() == {"ok": True}
    assert fetch(client)["status"] == "paused"
    assert client.post("/v1/groups/g1/resume", headers=ADMIN).status_code == 200
    r = client.put(
        "/v1/groups/g1/rate", json={"messages_per_second": 10, "burst": 5}, headers=ADMIN
    )
    assert r.status_code == 200
    assert "g1" in engine.throttled
    error(
        client.put("/v1/groups/g1/rate", json={"messages_per_second": -1}, headers=ADMIN),
        422,
        "invalid",
    )
    r = client.get("/v1/groups/g1/lag", headers=READER)
    assert r.status_code == 200
    assert r.json()["total_lag_bytes"] == "3"
    assert {
        type(p[k]) for p in r.json()["partitions"] for k in ("committed", "max", "lag_bytes")
    } == {str}
    assert r.json()["group"] == "g1"
    for path, body in (("offsets/reset", {"to": "latest"}), ("pause", None), ("resume", None)):
        error(client.post(f"/v1/groups/g1/{path}", json=body, headers=READER), 403, "forbidden")


ROUTES = [
    ("post", "/v1/topics/demo/messages", {"value": "x"}),
    ("post", "/v1/topics/demo/messages/batch", {"messages": [{"value": "x"}]}),
    ("post", "/v1/groups/g1/fetch", {}),
    ("post", "/v1/leases/t1.x.y/ack", None),
    ("post", "/v1/leases/t1.x.y/nack", {}),
    ("post", "/v1/leases/t1.x.y/extend", {"lease_ms": 20000}),
    ("post", "/v1/groups/g1/offsets/reset", {"to": "earliest"}),
    ("post", "/v1/groups/g1/pause", None),
    ("post", "/v1/groups/g1/resume", None),
    ("put", "/v1/groups/g1/rate", {"messages_per_second": 1}),
    ("get", "/v1/groups/g1/lag", None),
]


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
def test_every_route_needs_a_key(client: TestClient, method: str, path: str, body: Any) -> None:
    kwargs: dict[str, Any] = {} if body is None else {"json": body}
    for headers in ({}, {"Authorization": "Bearer wrong-key-1"}, {"Authorization": "Basic x"}):
        r = client.request(method, path, headers=headers, **kwargs)
        error(r, 401, "unauthorized")
        assert r.headers["WWW-Authenticate"] == "Bearer"
    nobody = GatewayConfig.from_mapping(
        {**_raw(), "keys": [{"key": "k-nothing", "scopes": ["consume:zzz"]}]}
    )
    app = create_app(
        nobody,
        engine_factory=lambda _c: FakeEngine({}),
        producer_factory=lambda _c: cast(Producer, FakeProducer()),
    )
    with TestClient(app) as c:
        r = c.request(method, path, headers={"Authorization": "Bearer k-nothing"}, **kwargs)
        assert r.status_code in (400, 403), r.text  # a dummy token is refused before any scope


def _raw() -> dict[str, Any]:
    return {
        "masters": "127.0.0.1:1",
        "redis": "redis://127.0.0.1:1/0",
        "secret": "0123456789abcdef0123",
        "produce_topics": ["demo"],
        "groups": [{"name": "g1", "topics": ["demo"]}],
    }


def test_engine_down_is_503_not_500(client: TestClient, engine: FakeEngine) -> None:
    engine.down = True
    body = error(
        client.post("/v1/groups/g1/fetch", json={}, headers=READER), 503, "store_unavailable"
    )
    assert body["retriable"]
    r = client.get("/readyz")
    assert r.status_code == 503
    assert r.json()["checks"]["redis"] is False


def test_ops_routes(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").status_code == 200
    fetch(client)
    text = client.get("/metrics").text
    assert "tubemq_gateway_engine_fetches" in text
    assert (
        'tubemq_gateway_http_requests_total{method="POST",route="/v1/groups/{group}/fetch",status="200"}'
        in text
    )
    assert (
        client.get("/openapi.json").json()["paths"]["/v1/groups/{group}/fetch"]["post"][
            "operationId"
        ]
        == "fetch"
    )
    error(client.get("/nothing"), 404, "not_found")
    error(client.get("/v1/groups/g1/fetch", headers=READER), 405, "method_not_allowed")


def test_made_up_methods_share_one_metric_label(client: TestClient) -> None:
    for i in range(5):
        client.request(f"BREW{i}", "/v1/groups/g1/fetch", headers=READER)
    text = client.get("/metrics").text
    assert "BREW" not in text
    assert 'method="other"' in text


def test_mounted_inside_another_app(engine: FakeEngine, producer: FakeProducer) -> None:
    import contextlib
    from collections.abc import AsyncIterator

    gw = fake_app(engine, producer=producer)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with gw.router.lifespan_context(gw):
            yield

    outer = FastAPI(lifespan=lifespan)
    outer.mount("/mq", gw)
    with TestClient(outer) as c:
        r = c.post("/mq/v1/groups/g1/fetch", json={}, headers=READER)
        assert r.status_code == 200
        assert r.json()["status"] == "ok"
    assert engine.started
    assert engine.closed


def test_noop_route_only_when_configured(client: TestClient) -> None:
    error(client.post("/v1/noop", json={"value": "x"}, headers=ADMIN), 404, "not_found")
    cfg = GatewayConfig.from_mapping({**_raw(), "allow_anonymous": True, "noop_route": True})
    app = create_app(
        cfg,
        engine_factory=lambda _c: FakeEngine({}),
        producer_factory=lambda _c: cast(Producer, FakeProducer()),
    )
    with TestClient(app) as c:
        assert c.post("/v1/noop", json={"value": "x"}).status_code == 200
        error(c.post("/v1/noop", json={"value": 1}), 422, "invalid")
        assert "/v1/noop" not in c.get("/openapi.json").json()["paths"]


def test_chunked_body_over_the_limit_is_413(client: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"value": "'
        for _ in range(100):
            yield b"x" * 1024
        yield b'"}'

    headers = {**ADMIN, "content-type": "application/json"}
    r = client.post("/v1/topics/demo/messages", content=chunks(), headers=headers)
    error(r, 413, "too_large")

    def small() -> Iterator[bytes]:
        yield b'{"value": '
        yield b'"chunked"}'

    assert (
        client.post("/v1/topics/demo/messages", content=small(), headers=headers).status_code == 200
    )


def test_outage_and_unknown_name_answers_are_generic(client: TestClient) -> None:
    from tubemq_aio.gateway.errors import StoreUnavailableError, TubeUnavailableError
    from tubemq_aio.gateway.http.api_errors import api_error_for

    for exc in (
        TubeUnavailableError("reading 1:t:0 failed: ConnectionError('10.9.8.7:8123')"),
        StoreUnavailableError("Redis unavailable at 10.9.8.7:6379"),
    ):
        mapped = api_error_for(exc)
        assert mapped is not None
        assert mapped.status == 503
        assert "10.9.8.7" not in mapped.message
    name = "g" * 10_000
    r = client.post(f"/v1/groups/{name}/fetch", json={}, headers=READER)
    assert r.status_code in (403, 404, 422), r.text
    assert name not in r.text
    assert len(r.text) < 1000


def test_acks_carried_by_a_fetch_that_fails_are_still_settled_and_counted(
    client: TestClient,
) -> None:
    token = fetch(client)["lease"]["token"]
    body = {"ack": [token], "client_id": "c1"}  # a client_id in a clustering group: 422
    error(client.post("/v1/groups/g1/fetch", json=body, headers=READER), 422, "invalid_request")
    again = client.post(f"/v1/leases/{token}/ack", headers=READER).json()
    assert again == {"result": "already_acked"}
    metrics = client.get("/metrics").text
    assert 'tubemq_gateway_settle_total{action="ack",group="g1",result="acked"} 1.0' in metrics


def test_a_fetch_refused_for_the_long_poll_share_applies_none_of_its_acks(
    client: TestClient,
) -> None:
    token = fetch(client)["lease"]["token"]
    gateway = cast(FastAPI, client.app).state.gateway
    share = gateway.config.long_poll_share()
    reader = gateway.auth.authenticate(READER["Authorization"]).name
    gateway.long_polls[reader] = share  # the reader key holds its share already
    body = {"ack": [token], "wait_ms": 1000}
    error(client.post("/v1/groups/g1/fetch", json=body, headers=READER), 503, "too_many_waiters")
    del gateway.long_polls[reader]
    # nothing was settled: the client's retry carries the ack again and it is applied then
    retry = client.post("/v1/groups/g1/fetch", json={"ack": [token]}, headers=READER).json()
    assert retry["acks"] == [{"token": token, "result": "acked"}]


def test_the_group_scope_dependency_keeps_the_fetch_on_the_direct_path() -> None:
    from tubemq_aio.gateway.http.direct_route import DirectJsonRoute, direct_plan

    app = create_app(CFG, engine_factory=lambda _c: FakeEngine({"g1": "clustering"}))
    route = next(r for r in app.routes if getattr(r, "path", "") == "/v1/groups/{group}/fetch")
    assert isinstance(route, DirectJsonRoute)
    plan = direct_plan(route.dependant)
    assert plan is not None
    assert [name for name, _ in plan.dependencies] == ["gateway", "access"]


def test_group_routes_check_scope_and_group_in_their_dependency(client: TestClient) -> None:
    error(client.post("/v1/groups/nope/fetch", json={}, headers=ADMIN), 404, "unknown_group")
    error(client.post("/v1/groups/other/fetch", json={}, headers=READER), 403, "forbidden")
    error(client.post("/v1/groups/g1/pause", headers=READER), 403, "forbidden")
    error(client.get("/v1/groups/other/lag", headers=READER), 403, "forbidden")
    assert client.post("/v1/groups/g1/pause", headers=ADMIN).json() == {"ok": True}
    assert client.get("/v1/groups/g1/lag", headers=READER).json()["group"] == "g1"
