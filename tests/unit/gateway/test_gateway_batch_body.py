"""The batch produce body read without a model per message (``read_shared_batch``) answers and
sends exactly as FastAPI's model path does, over valid, invalid and odd bodies."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, cast

import orjson
import pytest
from fastapi.testclient import TestClient

from tests.support.gateway_fakes import ADMIN, CFG, FASTAPI_JSON, READER, FakeEngine, FakeProducer
from tubemq_aio.gateway import create_app
from tubemq_aio.gateway.errors import InvalidBodyError
from tubemq_aio.gateway.http.direct_route import DirectJsonRoute, direct_plan
from tubemq_aio.gateway.http.message_bodies import SharedBatch, read_shared_batch
from tubemq_aio.gateway.http.schemas import ProduceRequest
from tubemq_aio.producer import Producer

URL = "/v1/topics/demo/messages/batch"
TEMPLATE = "/v1/topics/{topic}/messages/batch"
#: The direct path (read_shared_batch, then the model) and FastAPI's own handler.
DIRECT, FASTAPI = "application/json", FASTAPI_JSON
ATTRS = {"k": "v", "n": "1"}

MESSAGES: list[object] = [
    [{"value": "a"}, {"value": "b"}, {"value": "é😀"}],
    [{"value": "a", "attributes": ATTRS, "msg_type": "t", "msg_time": "202611261945", "key": "k"}]
    * 3,
    [{"value": "eA==", "encoding": "base64"}, {"value": "@@", "encoding": "base64"}],
    [{"value": "@@", "encoding": "base64"}] * 2,
    [{"value": "a", "encoding": "utf8"}, {"value": "eA==", "encoding": "base64"}],
    [{"value": "a"}, {"value": "b", "attributes": ATTRS}],
    [{"value": "a", "attributes": None}, {"value": "b"}],
    [{"value": "a", "attributes": {"x": "1"}}, {"value": "b", "attributes": {"x": 1}}],
    [{"value": "ok"}, {"value": "lost"}, {"value": "y" * 2000}],
    [{"value": "x"}] * 50,
    [{"value": "x"}] * 51,
    [{"value": "x"}] * 501,
    [],
    [1],
    ["x"],
    [None],
    [{"value": "a"}, None],
    [{"value": ""}],
    [{"value": "a"}, {"value": ""}],
    [{"value": 5}],
    [{"value": None}],
    [{}],
    [{"value": "a"}, {}],
    [{"value": "a", "other": 1}],
    [{"value": "a"}, {"value": "b", "other": 1}],
    [{"value": "a", "encoding": "utf16"}],
    [{"value": "a", "encoding": None}],
    [{"value": "a", "attributes": {"a,b": "c"}}],
    [{"value": "a", "attributes": {"": "c"}}],
    [{"value": "a", "attributes": {"k": "v\n"}}],
    [{"value": "a", "attributes": {"k": 1}}],
    [{"value": "a", "attributes": []}],
    [{"value": "a", "msg_time": "2026"}],
    [{"value": "a", "msg_type": "x=y"}],
    [{"value": "a", "key": ""}],
    [{"value": "a", "key": "k" * 1025}],
    [{"value": "a", "key": 7}, {"value": "b", "key": 7}],
]
BODIES: list[bytes] = [orjson.dumps({"messages": m}) for m in MESSAGES] + [
    b'{"messages": [{"value": "a"}], "other": 1}',
    b'{"other": [{"value": "a"}]}',
    b'{"messages": {"value": "a"}}',
    b'[{"value": "a"}]',
    b'{"messages": [{"value": "a", "value": "b"}]}',
    b'{"messages": [{"value": "a\\ud800b"}]}',
    b'{"messages": [{"value": "a\\u0000b"}]}',
    b'{"messages": [{"value": "a"}]',
    b'{"messages": [{"value": NaN}]}',
    b"\xef\xbb\xbf" + b'{"messages": [{"value": "a"}]}',
    b"",
    b"null",
]


def _factory(producer: FakeProducer) -> Callable[[object], Producer]:
    return lambda _cfg: cast(Producer, producer)


@pytest.fixture
def clients() -> Iterator[dict[str, tuple[TestClient, FakeProducer]]]:
    """A gateway app per path, each with its own stand-in producer."""
    out: dict[str, tuple[TestClient, FakeProducer]] = {}
    managers = []
    for path in (DIRECT, FASTAPI):
        producer = FakeProducer()
        app = create_app(
            CFG,
            engine_factory=lambda _cfg: FakeEngine({"g1": "clustering"}),
            producer_factory=_factory(producer),
        )
        client = TestClient(app)
        managers.append(client)
        out[path] = (client.__enter__(), producer)
    yield out
    for client in managers:
        client.__exit__(None, None, None)


def _answer(client: TestClient, body: bytes, content_type: str, key: dict[str, str]) -> Any:
    r = client.post(URL, content=body, headers={"content-type": content_type, **key})
    return r.status_code, r.json()


@pytest.mark.parametrize("key", [ADMIN, READER, {}], ids=["admin", "reader", "none"])
@pytest.mark.parametrize("body", BODIES, ids=range(len(BODIES)))
def test_answers_and_sends_are_those_of_the_model(
    clients: dict[str, tuple[TestClient, FakeProducer]], body: bytes, key: dict[str, str]
) -> None:
    answers = [_answer(client, body, path, key) for path, (client, _) in clients.items()]
    assert answers[0] == answers[1]
    direct, fastapi = (producer for _, producer in clients.values())
    assert direct.sent == fastapi.sent
    assert direct.many_calls == fastapi.many_calls


def test_the_batch_route_reads_shared_batches_without_the_model() -> None:
    app = create_app(CFG)
    route = next(r for r in app.routes if getattr(r, "path", "") == TEMPLATE)
    assert isinstance(route, DirectJsonRoute)
    plan = direct_plan(route.dependant)
    assert plan is not None
    assert plan.fast is not None
    assert plan.fast.parse is read_shared_batch


def test_a_shared_batch_is_read_with_its_options_and_bodies() -> None:
    raw = orjson.dumps({"messages": MESSAGES[1]})
    batch = read_shared_batch(raw)
    assert batch == SharedBatch([b"a"] * 3, ATTRS, "t", "202611261945", "k")
    b64 = read_shared_batch(orjson.dumps({"messages": MESSAGES[2]}))
    assert b64 is not None
    assert b64.bodies[0] == b"x"
    assert isinstance(b64.bodies[1], InvalidBodyError)


@pytest.mark.parametrize("index", [4, 5, 6, 7, 12, 13, 17, 23, 25, 27, 36])
def test_what_is_not_a_valid_shared_batch_is_left_to_the_model(index: int) -> None:
    assert read_shared_batch(orjson.dumps({"messages": MESSAGES[index]})) is None


def test_validated_requests_that_share_options_make_a_batch() -> None:
    same = [
        ProduceRequest(value="a", key="k"),
        ProduceRequest(value="@@", encoding="base64", key="k"),
    ]
    batch = SharedBatch.of(same)
    assert batch is not None
    assert len(batch) == 2
    assert batch.key == "k"
    assert batch.bodies[0] == b"a"
    assert isinstance(batch.bodies[1], InvalidBodyError)
    assert SharedBatch.of([ProduceRequest(value="a"), ProduceRequest(value="b", key="k")]) is None
    assert SharedBatch.of([]) is None
