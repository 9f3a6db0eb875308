"""What answers withhold and where it goes instead: an error answer's body carries a generic text,
the details (a backend's host:port, an exception's text) go to the log and every error answer is
counted by code and cause class; a replica is named in answers only by an opaque id."""

from __future__ import annotations

import logging
import os
import re
import socket
from typing import Any, cast

import pytest
from fastapi.testclient import TestClient

from tests.support.gateway_fakes import ADMIN, CFG, READER, FakeEngine, FakeProducer, fake_app
from tubemq_aio.errors import RequestTimeoutError
from tubemq_aio.gateway import create_app
from tubemq_aio.gateway.engine.data import FetchQuery
from tubemq_aio.gateway.errors import StoreUnavailableError
from tubemq_aio.gateway.http.api_errors import cause_class
from tubemq_aio.producer import Producer
from tubemq_aio.protocol.producer_send import SendResult

INTERNAL = "10.9.8.7"


class _RedisDownEngine(FakeEngine):
    async def fetch(self, query: FetchQuery, **kwargs: Any) -> Any:
        try:
            raise ConnectionRefusedError(f"[Errno 111] connect to {INTERNAL}:6379 refused")
        except ConnectionRefusedError as exc:
            raise StoreUnavailableError(f"Redis at {INTERNAL}:6379 unavailable: {exc}") from exc


class _SlowBrokerProducer(FakeProducer):
    async def send(self, topic: str, body: bytes, **kw: Any) -> SendResult:
        raise RequestTimeoutError(f"no answer from broker {INTERNAL}:8123 within 5 s")


class _BuggyEngine(FakeEngine):
    async def fetch(self, query: FetchQuery, **kwargs: Any) -> Any:
        raise KeyError(f"a bug of ours near {INTERNAL}")


class _HolderEngine(FakeEngine):
    def __init__(self) -> None:
        super().__init__({"g1": "clustering"})
        self.holders: list[str] = []

    async def fetch(self, query: FetchQuery, **kwargs: Any) -> Any:
        self.holders.append(query.holder)
        return await super().fetch(query, **kwargs)


def _client(engine: FakeEngine, producer: FakeProducer) -> TestClient:
    app = fake_app(engine, producer=producer)
    return TestClient(app)


def _counted(metrics: str, code: str, cause: str) -> float:
    found = re.search(
        rf'tubemq_gateway_error_answers_total{{cause="{cause}",code="{code}"}} (\S+)', metrics
    )
    return float(found.group(1)) if found else 0.0


def test_a_503_body_withholds_the_details_the_log_and_the_metric_keep(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="tubemq_aio.gateway")
    with _client(_RedisDownEngine({"g1": "clustering"}), FakeProducer()) as client:
        r = client.post("/v1/groups/g1/fetch", json={}, headers=READER)
        assert r.status_code == 503, r.text
        assert r.json()["error"] == {
            "code": "store_unavailable",
            "message": "the gateway's Redis store is unavailable",
            "retriable": True,
        }
        assert INTERNAL not in r.text
        assert "Errno" not in r.text
        logged = [rec.getMessage() for rec in caplog.records if INTERNAL in rec.getMessage()]
        assert len(logged) == 1, logged
        assert "store_unavailable" in logged[0]
        assert "ConnectionRefusedError" in logged[0]
        metrics = client.get("/metrics").text
        assert _counted(metrics, "store_unavailable", "ConnectionRefusedError") == 1.0


def test_a_bug_is_a_json_500_internal_logged_and_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # any exception the error table does not know (here a KeyError) is answered like every other
    # error, so a client's parser never meets Starlette's plain-text "Internal Server Error"
    caplog.set_level(logging.INFO, logger="tubemq_aio.gateway")
    app = create_app(
        CFG,
        engine_factory=lambda _c: _BuggyEngine({"g1": "clustering"}),
        producer_factory=lambda _c: cast(Producer, FakeProducer()),
    )
    with TestClient(app, raise_server_exceptions=False) as client:
        r = client.post("/v1/groups/g1/fetch", json={}, headers=READER)
        assert r.status_code == 500, r.text
        assert r.headers["content-type"] == "application/json"
        assert r.json()["error"] == {
            "code": "internal",
            "message": "internal error",
            "retriable": True,
        }
        assert INTERNAL not in r.text
        logged = [rec for rec in caplog.records if "HTTP 500 internal" in rec.getMessage()]
        assert len(logged) == 1
        assert logged[0].exc_info is not None
        assert _counted(client.get("/metrics").text, "internal", "KeyError") == 1.0


def test_a_timeout_answer_names_no_broker(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tubemq_aio.gateway")
    with _client(FakeEngine({"g1": "clustering"}), _SlowBrokerProducer()) as client:
        r = client.post("/v1/topics/demo/messages", json={"value": "x"}, headers=ADMIN)
        assert r.status_code == 504, r.text
        assert r.json()["error"]["code"] == "timeout"
        assert INTERNAL not in r.text
        batch = client.post(
            "/v1/topics/demo/messages/batch", json={"messages": [{"value": "y"}]}, headers=ADMIN
        )
        assert batch.status_code == 207, batch.text
        assert batch.json()["results"][0]["error"]["code"] == "timeout"
        assert INTERNAL not in batch.text
        assert sum(INTERNAL in rec.getMessage() for rec in caplog.records) == 2
        metrics = client.get("/metrics").text
        assert _counted(metrics, "timeout", "RequestTimeoutError") == 2.0


def test_a_client_mistake_is_counted_without_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tubemq_aio.gateway")
    with _client(FakeEngine({"g1": "clustering"}), FakeProducer()) as client:
        r = client.post("/v1/leases/t1.nonsense/ack", headers=READER)
        assert r.status_code == 400, r.text
        code = r.json()["error"]["code"]
        assert code == "bad_token"
        assert not [
            rec
            for rec in caplog.records
            if rec.name == "tubemq_aio.gateway"
            and rec.levelno >= logging.INFO
            and code in rec.getMessage()
        ]
        assert (
            sum(
                float(v)
                for v in re.findall(
                    rf'tubemq_gateway_error_answers_total{{cause="\w+",code="{code}"}} (\S+)',
                    client.get("/metrics").text,
                )
            )
            == 1.0
        )


def test_the_cause_label_is_bounded() -> None:
    class MadeUpError(Exception):
        pass

    assert cause_class(MadeUpError("x")) == "other"
    assert cause_class(TimeoutError()) == "TimeoutError"
    outer = StoreUnavailableError("down")
    outer.__cause__ = MadeUpError("deep")
    assert cause_class(outer) == "other"
    assert cause_class(StoreUnavailableError("down")) == "StoreUnavailableError"


def test_answers_name_the_replica_by_an_opaque_id(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tubemq_aio.gateway")
    engine = _HolderEngine()
    engine.add("1:demo:0", b"a")
    with _client(engine, FakeProducer()) as client:
        replica = client.app.state.gateway.replica  # type: ignore[attr-defined]
        r = client.post("/v1/groups/g1/fetch", json={}, headers=READER)
        assert r.status_code == 200, r.text
    assert engine.holders == [replica]
    assert re.fullmatch(r"r-[0-9a-f]{8}", replica)
    assert socket.gethostname() not in replica
    assert str(os.getpid()) not in replica
    started = [rec.getMessage() for rec in caplog.records if replica in rec.getMessage()]
    assert started == [f"gateway replica {replica} is {socket.gethostname()}:{os.getpid()}"]
    other = create_app(CFG, engine_factory=lambda _c: FakeEngine({}))
    assert other.state.gateway.replica != replica
