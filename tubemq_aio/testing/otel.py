"""Capture a client's OpenTelemetry spans and metrics in memory, for tests.

Needs ``opentelemetry-sdk`` (not a dependency of the package: install it in the test
environment). Hand :meth:`InMemoryTelemetry.telemetry` to a client as ``telemetry=`` and read
back what it reported::

    otel = InMemoryTelemetry()
    async with Producer(addr, telemetry=otel.telemetry()) as producer:
        await producer.send("t", b"x")
    assert [s.name for s in otel.spans()] == ["send t"]
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tubemq_aio.telemetry import Telemetry

__all__ = ["InMemoryTelemetry", "MetricPoint"]

#: One data point: its attributes and its value (``(count, sum)`` for a histogram).
MetricPoint = tuple[dict[str, Any], Any]


class InMemoryTelemetry:
    """A tracer provider and a meter provider that keep everything in memory."""

    def __init__(self) -> None:
        """Create both providers (independent of the global ones)."""
        self._exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self._exporter))
        self._reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self._reader])

    def telemetry(self, *, propagate: bool = True) -> Telemetry:
        """The ``telemetry=`` option that reports into this object."""
        return Telemetry(
            tracer_provider=self.tracer_provider,
            meter_provider=self.meter_provider,
            propagate=propagate,
        )

    def spans(self) -> tuple[ReadableSpan, ...]:
        """Every finished span so far, in the order they ended."""
        return tuple(self._exporter.get_finished_spans())

    def metrics(self) -> dict[str, list[MetricPoint]]:
        """Collect now: instrument name -> its data points."""
        data = self._reader.get_metrics_data()
        found: dict[str, list[MetricPoint]] = {}
        if data is None:
            return found
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        value: Any = getattr(point, "value", None)
                        if value is None:
                            value = (getattr(point, "count"), getattr(point, "sum"))  # noqa: B009
                        labels = dict(point.attributes or {})
                        found.setdefault(metric.name, []).append((labels, value))
        return found

    def total(self, name: str) -> float:
        """The sum of a counter's data points (0 when it has none)."""
        return float(sum(value for _, value in self.metrics().get(name, [])))

    def shutdown(self) -> None:
        """Stop both providers."""
        self.meter_provider.shutdown()
        self.tracer_provider.shutdown()
