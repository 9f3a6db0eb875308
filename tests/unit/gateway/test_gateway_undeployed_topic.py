"""A topic the gateway may publish to but the TubeMQ master says is not deployed: a typed,
not retriable 404 ``unknown_topic`` (it was a retriable 503 ``topic_unavailable``, which a client
retries for ever), for one message and per item of a batch."""

from __future__ import annotations

from typing import Any, cast

from fastapi.testclient import TestClient

from tests.support.gateway_fakes import ADMIN, CFG, FakeEngine, FakeProducer
from tubemq_aio.errors import TopicNotDeployedError, TopicUnavailableError
from tubemq_aio.gateway import create_app
from tubemq_aio.gateway.http.api_errors import api_error_for
from tubemq_aio.producer import Producer
from tubemq_aio.protocol.producer_send import SendResult


class _UndeployedProducer(FakeProducer):
    """Answers as the SDK does for a body ``b"gone"``: the master says the topic is not there."""

    async def send(self, topic: str, body: bytes, **kw: Any) -> SendResult:
        if body == b"gone":
            raise TopicNotDeployedError([topic])
        return await super().send(topic, body, **kw)


def test_the_masters_not_deployed_is_a_404_that_is_not_retriable() -> None:
    error = api_error_for(TopicNotDeployedError(["ghost"]))
    assert error is not None
    assert (error.status, error.code, error.retriable) == (404, "unknown_topic", False)
    assert error.message == "topic 'ghost' is not deployed on the TubeMQ cluster"
    other = api_error_for(TopicUnavailableError("no writable partition right now"))
    assert other is not None  # a deployed topic without a writable partition may come back
    assert (other.status, other.code, other.retriable) == (503, "topic_unavailable", True)


def test_produce_and_batch_answer_it_per_message() -> None:
    app = create_app(
        CFG,
        engine_factory=lambda _c: FakeEngine({}),
        producer_factory=lambda _c: cast(Producer, _UndeployedProducer()),
    )
    with TestClient(app) as client:
        r = client.post("/v1/topics/demo/messages", json={"value": "gone"}, headers=ADMIN)
        assert r.status_code == 404, r.text
        assert r.json()["error"] == {
            "code": "unknown_topic",
            "message": "topic 'demo' is not deployed on the TubeMQ cluster",
            "retriable": False,
        }
        batch = {"messages": [{"value": "ok"}, {"value": "gone"}]}
        r = client.post("/v1/topics/demo/messages/batch", json=batch, headers=ADMIN)
        assert r.status_code == 207, r.text
        items = r.json()["results"]
        assert [x["status"] for x in items] == [200, 404]
        assert items[1]["error"]["code"] == "unknown_topic"
        assert items[1]["error"]["retriable"] is False
