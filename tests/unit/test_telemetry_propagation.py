"""Trace context through the global propagator (B3/Jaeger-style ones included) and the group
and partition labels of every consumer instrument."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import (
    CarrierT,
    Getter,
    Setter,
    TextMapPropagator,
    default_getter,
    default_setter,
)
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from tubemq_aio import Consumer
from tubemq_aio.models import Message
from tubemq_aio.telemetry import TRACEPARENT, ClientTelemetry, process_span, telemetry_for
from tubemq_aio.testing.otel import InMemoryTelemetry

#: The single key of the test's propagator, formatted like Jaeger's ``trace:span:parent:flags``.
KEY = "x-demo-trace"


class ColonPropagator(TextMapPropagator):
    """A propagator of the application's choice, not W3C: one ``trace:span:0:1`` field, plus a
    ``tracestate``-like field that cannot be a TubeMQ attribute."""

    def inject(
        self,
        carrier: CarrierT,
        context: Context | None = None,
        setter: Setter[CarrierT] = default_setter,
    ) -> None:
        span_context = trace.get_current_span(context).get_span_context()
        if not span_context.is_valid:
            return
        value = f"{span_context.trace_id:032x}:{span_context.span_id:016x}:0:1"
        setter.set(carrier, KEY, value)
        setter.set(carrier, "x-demo-state", "vendor=a,other=b")

    def extract(
        self,
        carrier: CarrierT,
        context: Context | None = None,
        getter: Getter[CarrierT] = default_getter,
    ) -> Context:
        values = getter.get(carrier, KEY)
        if not values:
            return context or Context()
        trace_id, span_id, _, _ = values[0].split(":")
        span_context = SpanContext(
            int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=TraceFlags(1)
        )
        return trace.set_span_in_context(NonRecordingSpan(span_context), context)

    @property
    def fields(self) -> set[str]:
        return {KEY, "x-demo-state"}


@pytest.fixture
def otel() -> Iterator[InMemoryTelemetry]:
    setup = InMemoryTelemetry()
    yield setup
    setup.shutdown()


@pytest.fixture
def colon_propagator() -> Iterator[None]:
    previous = propagate.get_global_textmap()
    propagate.set_global_textmap(ColonPropagator())
    try:
        yield
    finally:
        propagate.set_global_textmap(previous)


def _client(otel: InMemoryTelemetry) -> ClientTelemetry:
    tel = telemetry_for(otel.telemetry())
    assert tel is not None
    return tel


class _FakeConsumer:
    def __init__(self, tel: ClientTelemetry, group: str) -> None:
        self.telemetry = tel
        self.config = type("Config", (), {"group": group})()


@pytest.mark.usefixtures("colon_propagator")
def test_the_global_propagator_writes_and_reads_the_context(otel: InMemoryTelemetry) -> None:
    tel = _client(otel)
    with tel.send_span("t", 3, {"user": "kept"}) as handle:
        attributes = handle.attributes
    assert attributes is not None
    assert attributes["user"] == "kept"
    assert TRACEPARENT not in attributes  # the W3C propagator is not hard-wired
    # A field with ',' or '=' would corrupt the attribute block: left out.
    assert "x-demo-state" not in attributes
    (send,) = otel.spans()
    assert attributes[KEY] == f"{send.context.trace_id:032x}:{send.context.span_id:016x}:0:1"

    message = Message(
        topic="t", body=b"abc", attributes=attributes, message_id=1, partition_key="1:t:0"
    )
    with process_span(_FakeConsumer(tel, "g"), message):
        pass
    _, process = otel.spans()
    assert [link.context.span_id for link in process.links] == [send.context.span_id]
    assert process.links[0].context.trace_id == send.context.trace_id


def test_a_message_from_another_propagator_gets_no_link(otel: InMemoryTelemetry) -> None:
    tel = _client(otel)
    foreign = {KEY: "0af7651916cd43dd8448eb211c80319c:b7ad6b7169203331:0:1"}
    message = Message(topic="t", body=b"", attributes=foreign, partition_key="1:t:0")
    with process_span(_FakeConsumer(tel, "g"), message):
        pass
    (process,) = otel.spans()
    assert process.links == ()


def test_every_consumer_metric_carries_group_and_partition(otel: InMemoryTelemetry) -> None:
    tel = _client(otel)
    tel.received("t", "1:t:2", "g1", 4, started_ns=1)
    tel.received("t", "1:t:2", "g2", 6, started_ns=1)
    message = Message(topic="t", body=b"x", partition_key="1:t:2")
    with process_span(_FakeConsumer(tel, "g1"), message):
        pass
    metrics = otel.metrics()

    def by_group(name: str) -> dict[str, Any]:
        points = [p for p in metrics[name] if p[0]["messaging.operation.name"] != "send"]
        for labels, _ in points:
            assert labels["messaging.destination.partition.id"] == "1:t:2", (name, labels)
        return {labels["messaging.consumer.group.name"]: value for labels, value in points}

    assert by_group("messaging.client.consumed.messages") == {"g1": 4, "g2": 6}
    assert set(by_group("messaging.client.operation.duration")) == {"g1", "g2"}
    assert set(by_group("messaging.process.duration")) == {"g1"}


def test_consumer_gauges_carry_the_group(otel: InMemoryTelemetry) -> None:
    first = Consumer("127.0.0.1:1", group="ga", topics=["t"], telemetry=otel.telemetry())
    second = Consumer("127.0.0.1:1", group="gb", topics=["t"], telemetry=otel.telemetry())
    points = otel.metrics()["tubemq.client.fetch.buffered"]
    assert sorted(labels["messaging.consumer.group.name"] for labels, _ in points) == ["ga", "gb"]
    assert first.config.group != second.config.group
