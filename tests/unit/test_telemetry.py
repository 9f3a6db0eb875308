"""OpenTelemetry instrumentation without a cluster: spans, links, metrics, gauges, options."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from tubemq_aio.errors import ConfigError, SendOutcomeUnknownError
from tubemq_aio.models import Message
from tubemq_aio.telemetry import (
    RECHECK_SECONDS,
    TRACEPARENT,
    Gauge,
    Telemetry,
    live,
    process_span,
    telemetry_for,
)
from tubemq_aio.testing.otel import InMemoryTelemetry


@pytest.fixture
def otel() -> Iterator[InMemoryTelemetry]:
    setup = InMemoryTelemetry()
    yield setup
    setup.shutdown()


def test_off_and_bad_settings() -> None:
    assert telemetry_for(False) is None
    assert telemetry_for(None) is not None  # the API is installed in the test environment
    with pytest.raises(ConfigError, match="telemetry must be"):
        telemetry_for("yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"tracer_provider must be.*meter_provider.*propagate"):
        Telemetry(tracer_provider=5, meter_provider="m", propagate="yes")  # type: ignore[arg-type]


def test_send_span_attributes_and_traceparent(otel: InMemoryTelemetry) -> None:
    tel = telemetry_for(otel.telemetry())
    assert tel is not None
    with tel.send_span("orders", 5, {"k": "v"}) as handle:
        assert handle.attributes is not None
        assert handle.attributes["k"] == "v"
        header = handle.attributes[TRACEPARENT]
        handle.stored(42, "1:orders:0", "127.0.0.1", 8123)
    (span,) = otel.spans()
    assert span.name == "send orders"
    assert span.kind is SpanKind.PRODUCER
    attrs = dict(span.attributes or {})
    assert attrs["messaging.system"] == "tubemq"
    assert attrs["messaging.destination.name"] == "orders"
    assert attrs["messaging.operation.type"] == "send"
    assert attrs["messaging.operation.name"] == "send"
    assert attrs["messaging.message.body.size"] == 5
    assert attrs["messaging.message.id"] == "42"
    assert attrs["messaging.destination.partition.id"] == "1:orders:0"
    assert attrs["server.address"] == "127.0.0.1"
    assert attrs["server.port"] == 8123
    version, trace_id, span_id, _flags = header.split("-")
    assert version == "00"
    assert int(trace_id, 16) == span.context.trace_id
    assert int(span_id, 16) == span.context.span_id
    assert "," not in header
    assert "=" not in header  # legal in a TubeMQ attribute value
    sent = otel.metrics()["messaging.client.sent.messages"]
    assert sent == [
        (
            {
                "messaging.system": "tubemq",
                "messaging.operation.name": "send",
                "messaging.destination.name": "orders",
            },
            1,
        )
    ]


def test_send_span_failure_sets_error_type(otel: InMemoryTelemetry) -> None:
    tel = telemetry_for(otel.telemetry(propagate=False))
    assert tel is not None
    seen: list[object] = []

    def fail() -> None:
        with tel.send_span("t", 1, None) as handle:
            seen.append(handle.attributes)
            raise SendOutcomeUnknownError("no answer")

    with pytest.raises(SendOutcomeUnknownError):
        fail()
    assert seen == [None]  # nothing added when propagation is off
    (span,) = otel.spans()
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})["error.type"] == "SendOutcomeUnknownError"
    ((labels, count),) = otel.metrics()["messaging.client.sent.messages"]
    assert labels["error.type"] == "SendOutcomeUnknownError"
    assert count == 1


def test_process_span_links_to_the_producer_span(otel: InMemoryTelemetry) -> None:
    tel = telemetry_for(otel.telemetry())
    assert tel is not None
    with tel.send_span("t", 3, None) as handle:
        attributes = handle.attributes
    assert attributes is not None
    message = Message(
        topic="t", body=b"abc", attributes=attributes, message_id=7, partition_key="1:t:0"
    )

    class FakeConsumer:
        telemetry = tel

        class config:  # mimics Consumer.config
            group = "g"

    with pytest.raises(RuntimeError), process_span(FakeConsumer(), message):
        raise RuntimeError("handler failed")
    send, process = otel.spans()
    assert process.name == "process t"
    assert process.kind is SpanKind.CONSUMER
    assert [link.context.span_id for link in process.links] == [send.context.span_id]
    assert process.links[0].context.trace_id == send.context.trace_id
    attrs = dict(process.attributes or {})
    assert attrs["messaging.consumer.group.name"] == "g"
    assert attrs["messaging.message.id"] == "7"
    assert attrs["error.type"] == "RuntimeError"
    ((labels, (count, _total)),) = otel.metrics()["messaging.process.duration"]
    assert count == 1
    assert labels["error.type"] == "RuntimeError"


def test_process_span_without_telemetry_yields_none() -> None:
    class Plain:
        telemetry = None

        class config:  # mimics Consumer.config
            group = "g"

    with process_span(Plain(), Message(topic="t", body=b"")) as span:
        assert span is None


def test_received_records_span_and_counter(otel: InMemoryTelemetry) -> None:
    tel = telemetry_for(otel.telemetry())
    assert tel is not None
    tel.received("t", "1:t:2", "g", 10, started_ns=1)
    (span,) = otel.spans()
    assert span.name == "receive t"
    assert span.kind is SpanKind.CONSUMER
    assert (span.attributes or {})["messaging.batch.message_count"] == 10
    ((labels, count),) = otel.metrics()["messaging.client.consumed.messages"]
    assert count == 10
    assert labels["messaging.consumer.group.name"] == "g"


def test_gauges_follow_live_clients(otel: InMemoryTelemetry) -> None:
    class Client:
        def __init__(self, lag: float) -> None:
            self.lag = lag

        def gauges(self) -> list[Gauge]:
            return [("tubemq.client.partition.lag", self.lag, {"client": str(self.lag)})]

    tel = telemetry_for(otel.telemetry())
    assert tel is not None
    first, second = Client(3), Client(5)
    tel.watch(first.gauges)
    tel.watch(second.gauges)
    values = sorted(v for _, v in otel.metrics()["tubemq.client.partition.lag"])
    assert values == [3, 5]
    del second
    gc.collect()
    assert [v for _, v in otel.metrics()["tubemq.client.partition.lag"]] == [3]


def test_no_sdk_leaves_the_callers_attributes_alone() -> None:
    """With the API's no-op tracer (no SDK configured) nothing is propagated, and the message
    keeps the caller's attributes object (``None`` stays ``None``: the producer's plain path)."""
    from opentelemetry.trace import NoOpTracerProvider

    tel = telemetry_for(Telemetry(tracer_provider=NoOpTracerProvider()))
    assert tel is not None
    with tel.send_span("orders", 5, None) as handle:
        assert handle.attributes is None
    mine = {"k": "v"}
    with tel.send_span("orders", 5, mine) as handle:
        assert handle.attributes is mine
    assert mine == {"k": "v"}


def test_traceparent_is_added_to_a_copy(otel: InMemoryTelemetry) -> None:
    tel = telemetry_for(otel.telemetry())
    assert tel is not None
    mine = {"k": "v"}
    with tel.send_span("orders", 5, mine) as handle:
        assert handle.attributes is not mine
        assert handle.attributes is not None
        assert set(handle.attributes) == {"k", TRACEPARENT}
    assert mine == {"k": "v"}


def test_sends_to_many_topics_are_each_counted(otel: InMemoryTelemetry) -> None:
    """The per-topic label cache is bounded; topics beyond it are still counted correctly."""
    tel = telemetry_for(otel.telemetry())
    assert tel is not None
    topics = [f"t{i}" for i in range(300)]
    for topic in topics + topics[:1] + topics[-1:]:
        with tel.send_span(topic, 1, None):
            pass
    points = otel.metrics()["messaging.client.sent.messages"]
    by_topic = {labels["messaging.destination.name"]: value for labels, value in points}
    assert len(by_topic) == 300
    assert by_topic["t0"] == by_topic["t299"] == 2
    assert by_topic["t150"] == 1
    spans = otel.spans()
    assert {s.name for s in spans} == {f"send {t}" for t in topics}
    assert all(dict(s.attributes or {})["messaging.destination.name"] == s.name[5:] for s in spans)


# ---- only the API installed: nothing recorded, nothing paid ------------------------------------


class _SdkTracerProvider:
    """Stands in for an SDK's global tracer provider (setting a real one is once per process)."""

    def get_tracer(self, *args: object, **kwargs: object) -> object:
        raise AssertionError("not called by active()")


def test_api_only_is_inactive_and_live_gives_none() -> None:
    tel = telemetry_for(None)
    assert tel is not None
    assert tel.active() is False
    assert live(tel) is None
    assert live(None) is None


def test_named_providers_are_always_active(otel: InMemoryTelemetry) -> None:
    from opentelemetry.trace import NoOpTracerProvider

    for options in (otel.telemetry(), Telemetry(tracer_provider=NoOpTracerProvider())):
        tel = telemetry_for(options)
        assert tel is not None
        assert tel.active() is True
        assert live(tel) is tel


def test_an_sdk_installed_later_is_seen_after_the_recheck_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    tel = telemetry_for(None)
    assert tel is not None
    assert tel.active() is False
    monkeypatch.setattr(tel, "_global_tracer_provider", _SdkTracerProvider)
    clock[0] += RECHECK_SECONDS / 2
    assert tel.active() is False  # the "idle" answer is kept for a while
    clock[0] += RECHECK_SECONDS
    assert tel.active() is True
    monkeypatch.setattr(tel, "_global_tracer_provider", lambda: None)
    clock[0] += 10 * RECHECK_SECONDS
    assert tel.active() is True  # a global provider cannot be taken back: kept for good


def test_an_sdk_meter_provider_alone_makes_it_active(monkeypatch: pytest.MonkeyPatch) -> None:
    tel = telemetry_for(None)
    assert tel is not None
    monkeypatch.setattr(tel, "_global_meter_provider", object)
    monkeypatch.setattr(tel, "_next_check", 0.0)
    assert tel.active() is True


async def test_api_only_sends_skip_the_span_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the API but no SDK the producer's sends (single, nowait, many) never enter the
    traced path, and still arrive."""
    from tubemq_aio import Producer
    from tubemq_aio.testing import FakeCluster

    async def traced(*args: object, **kwargs: object) -> object:
        raise AssertionError("the traced path was taken without an SDK")

    async with FakeCluster(topics={"demo": 2}) as cluster:
        async with Producer(cluster.master_addr, topics=["demo"], telemetry=None) as p:
            assert p.telemetry is not None
            assert not p.telemetry.active()
            monkeypatch.setattr(p, "_traced_send", traced)
            await p.send("demo", b"one")
            await p.send("demo", b"two", attributes={"k": "v"})
            await p.send_many("demo", [b"three", b"four"])
        payloads = sorted(m.payload for m in cluster.messages("demo"))
        assert payloads[1:] == [b"four", b"one", b"three"]
        assert payloads[0].endswith(b"k=vtwo")  # the attribute block, then the body
