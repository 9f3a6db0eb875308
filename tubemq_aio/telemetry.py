"""OpenTelemetry spans and metrics for producers and consumers (extra ``otel``).

Follows the OpenTelemetry messaging semantic conventions: a PRODUCER span ``send {topic}`` per
send, a CONSUMER span ``receive {topic}`` per delivered batch and a CONSUMER span
``process {topic}`` per message handled by ``Consumer.run`` (or by :func:`process_span` around
an ``async for`` body). The trace context travels in message attributes written and read by the
configured global propagator (``opentelemetry.propagate``: W3C ``traceparent`` by default, B3 or
Jaeger when the application sets those), so a process span links to the span of the send that
produced the message, across processes. Every consumer instrument carries the consumer group
and the partition.

Without ``opentelemetry-api`` installed (or with ``telemetry=False``) clients hold ``None``
instead of a :class:`ClientTelemetry` and pay one ``is None`` test per operation.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from tubemq_aio._version import __version__
from tubemq_aio.checks import Checks
from tubemq_aio.errors import ConfigError

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, Meter, Observation
    from opentelemetry.trace import Span, Tracer

    from tubemq_aio.models import Message

__all__ = [
    "RECHECK_SECONDS",
    "TRACEPARENT",
    "ClientTelemetry",
    "Gauge",
    "Telemetry",
    "TracedConsumer",
    "TracedConsumerConfig",
    "live",
    "process_span",
    "telemetry_for",
]

#: The message attribute that carries the trace context of the producing span with the default
#: (W3C trace context) propagator; other propagators write their own keys.
TRACEPARENT = "traceparent"

_SCOPE = "tubemq_aio"
_SYSTEM = "tubemq"

#: How long a client keeps the answer "no SDK is installed" (see :meth:`ClientTelemetry.active`).
RECHECK_SECONDS = 1.0

#: ``(gauge name, value, attributes)`` reported by a client for its observable instruments.
Gauge = tuple[str, float, Mapping[str, str]]

#: The clients' own gauges: name -> (description, unit).
GAUGES: dict[str, tuple[str, str]] = {
    "tubemq.client.sends.in_flight": ("Sends written or waiting for an answer", "{message}"),
    "tubemq.client.fetch.buffered": ("Fetched batches waiting for the application", "{batch}"),
    "tubemq.client.partition.lag": ("Messages between the group offset and the end", "{message}"),
    "tubemq.client.brokers.blocked": ("Brokers the producer avoids right now", "{broker}"),
    "tubemq.client.reconnects": ("Connections re-opened after a loss", "{connection}"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Telemetry:
    """How a client reports to OpenTelemetry (pass as ``telemetry=`` to a client).

    Attributes:
        tracer_provider: the provider to take the tracer from; ``None`` = the global one.
        meter_provider: the provider to take the meter from; ``None`` = the global one.
        propagate: write the trace context on sent messages (through the global propagator
            of ``opentelemetry.propagate``) and link process spans to it.
    """

    tracer_provider: Any = None
    meter_provider: Any = None
    propagate: bool = True

    def __post_init__(self) -> None:
        checks = Checks("Telemetry")
        if self.tracer_provider is not None and not callable(
            getattr(self.tracer_provider, "get_tracer", None)
        ):
            checks.problem("tracer_provider must be an OpenTelemetry TracerProvider or None")
        if self.meter_provider is not None and not callable(
            getattr(self.meter_provider, "get_meter", None)
        ):
            checks.problem("meter_provider must be an OpenTelemetry MeterProvider or None")
        checks.flag("propagate", self.propagate)
        checks.done()


def telemetry_for(setting: Telemetry | bool | None) -> ClientTelemetry | None:
    """Resolve a client's ``telemetry`` option.

    Args:
        setting: ``None`` (on when ``opentelemetry-api`` is installed), ``True`` (required),
            ``False`` (off), or a :class:`Telemetry`.

    Returns:
        The client's instrumentation, or ``None`` when it is off.

    Raises:
        ConfigError: ``True``/:class:`Telemetry` was asked for but ``opentelemetry-api`` is
            missing, or ``setting`` has the wrong type.
    """
    if setting is False:
        return None
    if setting is not True:
        checks = Checks("telemetry")
        checks.instance("telemetry", setting, (bool, Telemetry), optional=True)
        checks.done()
    try:
        import opentelemetry.metrics
        import opentelemetry.trace  # noqa: F401
    except ImportError:
        if setting is None:
            return None
        raise ConfigError(
            "telemetry needs opentelemetry-api: the `otel` extra (pip install '.[otel]' in a clone)"
        ) from None
    return ClientTelemetry(setting if isinstance(setting, Telemetry) else Telemetry())


class ClientTelemetry:
    """One client's tracer, meter and instruments (built by :func:`telemetry_for`)."""

    def __init__(self, options: Telemetry) -> None:
        """Take the tracer and meter from the configured (or global) providers."""
        from opentelemetry import metrics, propagate, trace

        self.options = options
        # Providers named by the caller are always used; the global ones count only once an
        # SDK has replaced the API's default (proxy, no-op) providers.
        self._active = options.tracer_provider is not None or options.meter_provider is not None
        self._next_check = 0.0
        self._global_tracer_provider = trace.get_tracer_provider
        self._global_meter_provider = metrics.get_meter_provider
        self._idle_tracer_providers = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
        self._idle_meter_providers = _idle_meter_providers()
        self.tracer: Tracer = trace.get_tracer(
            _SCOPE, __version__, tracer_provider=options.tracer_provider
        )
        meter: Meter = metrics.get_meter(_SCOPE, __version__, meter_provider=options.meter_provider)
        # The global propagator is looked up per message: an application may set it (B3,
        # Jaeger, ...) after this client was built.
        self._inject_into = propagate.inject
        self._extract_from = propagate.extract
        self._in_context = trace.set_span_in_context
        # Per-topic attribute and label dicts of sends, built once (they never change and the
        # OpenTelemetry API only reads them); bounded so a client writing to many topics does
        # not grow without limit.
        self._send_attrs: dict[str, dict[str, Any]] = {}
        self._send_labels: dict[str, dict[str, str]] = {}
        self._producer_kind = trace.SpanKind.PRODUCER
        self._consumer_kind = trace.SpanKind.CONSUMER
        self.sent = meter.create_counter(
            "messaging.client.sent.messages", "{message}", "Messages the client tried to send"
        )
        self.consumed = meter.create_counter(
            "messaging.client.consumed.messages", "{message}", "Messages delivered to the app"
        )
        self.operation_duration = meter.create_histogram(
            "messaging.client.operation.duration", "s", "Duration of send and receive calls"
        )
        self.process_duration = meter.create_histogram(
            "messaging.process.duration", "s", "Duration of message processing in Consumer.run"
        )
        self._hub = _gauge_hub(meter)

    def active(self) -> bool:
        """Whether spans or metrics would be recorded: providers were named in
        :class:`Telemetry`, or an OpenTelemetry SDK is installed as a global provider.

        With only the API installed (its default proxy and no-op providers), every span and
        metric is dropped anyway; clients check this per operation and skip the
        instrumentation then. Asking the API is slow (it reads the environment), so the answer
        "idle" is kept for :data:`RECHECK_SECONDS`: an SDK set up after the client was built is
        used from at most that long after. A global provider cannot be replaced once set, so
        "active" is kept for good.
        """
        if self._active:
            return True
        now = time.monotonic()
        if now < self._next_check:
            return False
        self._next_check = now + RECHECK_SECONDS
        self._active = not isinstance(
            self._global_tracer_provider(), self._idle_tracer_providers
        ) or not isinstance(self._global_meter_provider(), self._idle_meter_providers)
        return self._active

    def watch(self, source: Callable[[], Iterable[Gauge]]) -> None:
        """Report ``source()``'s gauges while the bound method's object lives."""
        self._hub.add(source)

    # ---- producer ------------------------------------------------------------------------

    @contextmanager
    def send_span(
        self, topic: str, body_size: int, attributes: Mapping[str, str] | None
    ) -> Iterator[SendSpan]:
        """A PRODUCER span around one ``send``; yields the attributes to send with.

        Args:
            topic: the destination topic.
            body_size: the body's length in bytes.
            attributes: the user's attributes (a copy with the trace context added is yielded).
        """
        started = time.perf_counter()
        base = self._send_attrs.get(topic)
        if base is None:
            base = _bounded_put(self._send_attrs, topic, _base("send", "send", topic))
        span = self.tracer.start_span(
            f"send {topic}",
            kind=self._producer_kind,
            attributes={**base, "messaging.message.body.size": body_size},
        )
        handle = SendSpan(span, attributes)
        # A span with an invalid context (no SDK configured: the API's no-op tracer) has
        # nothing to propagate, and the message keeps the caller's attributes unchanged.
        if self.options.propagate and span.get_span_context().is_valid:
            handle.attributes = self._inject(span, attributes)
        try:
            yield handle
        except BaseException as exc:
            error = _error_type(exc)
            span.set_attribute("error.type", error)
            span.set_status(_error_status(exc))
            self._count_send(started, topic, error)
            span.end()
            raise
        self._count_send(started, topic, None)
        span.end()

    def _inject(self, span: Span, attributes: Mapping[str, str] | None) -> Mapping[str, str] | None:
        carrier: dict[str, str] = {}
        self._inject_into(carrier, context=self._in_context(span))
        fields = {k: v for k, v in carrier.items() if _fits_attribute(k) and _fits_attribute(v)}
        if not fields:
            return attributes
        return {**(attributes or {}), **fields}

    def _count_send(self, started: float, topic: str, error: str | None) -> None:
        if error is None:
            labels = self._send_labels.get(topic)
            if labels is None:
                labels = _bounded_put(self._send_labels, topic, _metric_labels("send", topic, None))
        else:
            labels = _metric_labels("send", topic, error)
        self.sent.add(1, labels)
        self.operation_duration.record(time.perf_counter() - started, labels)

    # ---- consumer ------------------------------------------------------------------------

    def received(
        self, topic: str, partition_key: str, group: str, count: int, started_ns: int
    ) -> None:
        """Record a delivered batch: a CONSUMER ``receive`` span and the consumed counter.

        Args:
            topic: the batch's topic.
            partition_key: the batch's partition.
            group: the consumer group.
            count: messages in the batch.
            started_ns: ``time.time_ns()`` when the receive call started.
        """
        span = self.tracer.start_span(
            f"receive {topic}",
            kind=self._consumer_kind,
            start_time=started_ns,
            attributes={
                **_base("receive", "receive", topic),
                "messaging.destination.partition.id": partition_key,
                "messaging.consumer.group.name": group,
                "messaging.batch.message_count": count,
            },
        )
        span.end()
        labels = _consumer_labels("receive", topic, None, group, partition_key)
        self.consumed.add(count, labels)
        self.operation_duration.record((time.time_ns() - started_ns) / 1e9, labels)

    @contextmanager
    def process(self, message: Message, group: str) -> Iterator[Span]:
        """A CONSUMER ``process`` span around handling one message (see :func:`process_span`)."""
        links = []
        if self.options.propagate:
            context = self._producer_context(message)
            if context is not None:
                from opentelemetry.trace import Link

                links.append(Link(context))
        started = time.perf_counter()
        attributes = {
            **_base("process", "process", message.topic),
            "messaging.destination.partition.id": message.partition_key,
            "messaging.message.id": str(message.message_id),
            "messaging.message.body.size": len(message.body),
            "messaging.consumer.group.name": group,
        }
        error: str | None = None
        with self.tracer.start_as_current_span(
            f"process {message.topic}",
            kind=self._consumer_kind,
            attributes=attributes,
            links=links,
            record_exception=True,
            set_status_on_exception=True,
        ) as span:
            try:
                yield span
            except BaseException as exc:
                error = _error_type(exc)
                span.set_attribute("error.type", error)
                raise
            finally:
                labels = _consumer_labels(
                    "process", message.topic, error, group, message.partition_key
                )
                self.process_duration.record(time.perf_counter() - started, labels)

    def _producer_context(self, message: Message) -> Any:
        from opentelemetry import trace

        if not message.attributes:
            return None
        context = self._extract_from(message.attributes)
        span_context = trace.get_current_span(context).get_span_context()
        return span_context if span_context.is_valid else None


class SendSpan:
    """What :meth:`ClientTelemetry.send_span` yields: the span and the attributes to send."""

    __slots__ = ("attributes", "span")

    def __init__(self, span: Span, attributes: Mapping[str, str] | None) -> None:
        """Wrap ``span``; ``attributes`` are the ones to send (with the trace context)."""
        self.span = span
        self.attributes = attributes

    def stored(self, message_id: int, partition_key: str, host: str, port: int) -> None:
        """Add what the broker answered to the span."""
        span = self.span
        if span.is_recording():
            span.set_attributes(
                {
                    "messaging.message.id": str(message_id),
                    "messaging.destination.partition.id": partition_key,
                    "server.address": host,
                    "server.port": port,
                }
            )


class TracedConsumerConfig(Protocol):
    """What :func:`process_span` reads of a consumer's configuration
    (:class:`~tubemq_aio.ConsumerConfig` has it): the consumer group."""

    @property
    def group(self) -> str:
        """The consumer group, the spans' ``messaging.consumer.group.name``."""


class TracedConsumer(Protocol):
    """What :func:`process_span` reads of a consumer (``Consumer`` and
    ``ClientBalancedConsumer`` have both)."""

    @property
    def telemetry(self) -> ClientTelemetry | None:
        """The consumer's instrumentation, ``None`` when off."""

    @property
    def config(self) -> TracedConsumerConfig:
        """The consumer's configuration (its ``group`` names the spans' consumer group)."""


@contextmanager
def process_span(consumer: TracedConsumer, message: Message) -> Iterator[Span | None]:
    """Trace the handling of one message from ``async for`` like ``Consumer.run`` does.

    Example::

        async for msg in consumer:
            with process_span(consumer, msg):
                await handle(msg)

    Args:
        consumer: the consumer the message came from.
        message: the message being handled.

    Yields:
        The span, or ``None`` when the consumer's telemetry is off or records nothing (no SDK).
    """
    telemetry = live(consumer.telemetry)
    if telemetry is None:
        yield None
        return
    with telemetry.process(message, consumer.config.group) as span:
        yield span


# ---- helpers ---------------------------------------------------------------------------------


def _idle_meter_providers() -> tuple[type, ...]:
    """The API's own meter providers, which drop everything: the public no-op one and the
    default proxy (a private class: if a later API moves it, the global meter provider is
    treated as live, which costs time but loses nothing)."""
    from opentelemetry import metrics

    idle: list[type] = [metrics.NoOpMeterProvider]
    try:
        from opentelemetry.metrics._internal import _ProxyMeterProvider
    except ImportError:  # pragma: no cover - depends on the API's internals
        pass
    else:
        idle.append(_ProxyMeterProvider)
    return tuple(idle)


def live(telemetry: ClientTelemetry | None) -> ClientTelemetry | None:
    """``telemetry`` when it would record anything now (:meth:`ClientTelemetry.active`),
    else ``None``."""
    return telemetry if telemetry is not None and telemetry.active() else None


def _base(operation_type: str, operation_name: str, topic: str) -> dict[str, Any]:
    return {
        "messaging.system": _SYSTEM,
        "messaging.operation.type": operation_type,
        "messaging.operation.name": operation_name,
        "messaging.destination.name": topic,
    }


#: Topics whose send attributes and labels a client keeps built (more are built per send).
_CACHED_TOPICS = 256

_V = TypeVar("_V")


def _bounded_put(cache: dict[str, _V], topic: str, value: _V) -> _V:
    """Keep ``value`` for ``topic`` unless :data:`_CACHED_TOPICS` topics are kept already."""
    if len(cache) < _CACHED_TOPICS:
        cache[topic] = value
    return value


def _metric_labels(operation: str, topic: str, error: str | None) -> dict[str, str]:
    labels = {
        "messaging.system": _SYSTEM,
        "messaging.operation.name": operation,
        "messaging.destination.name": topic,
    }
    if error is not None:
        labels["error.type"] = error
    return labels


def _consumer_labels(
    operation: str, topic: str, error: str | None, group: str, partition_key: str
) -> dict[str, str]:
    """The labels of a consumer's metric: per group and partition, so per-group alerts work."""
    labels = _metric_labels(operation, topic, error)
    labels["messaging.consumer.group.name"] = group
    labels["messaging.destination.partition.id"] = partition_key
    return labels


def _fits_attribute(text: str) -> bool:
    """Whether a propagator's field can travel as a TubeMQ attribute key or value: the
    attribute block is ``k=v,k=v``, so W3C ``tracestate`` and ``baggage`` lists are left out."""
    return bool(text.strip()) and "," not in text and "=" not in text and "$" not in text


def _error_type(exc: BaseException) -> str:
    return type(exc).__qualname__


def _error_status(exc: BaseException) -> Any:
    from opentelemetry.trace import Status, StatusCode

    return Status(StatusCode.ERROR, _error_type(exc))


class _GaugeHub:
    """One set of observable instruments per meter, reading every live client's gauges."""

    def __init__(self, meter: Meter) -> None:
        self._methods: dict[int, tuple[weakref.ref[Any], str]] = {}
        for name, (description, unit) in GAUGES.items():
            if name == "tubemq.client.reconnects":
                meter.create_observable_counter(name, [self._callback(name)], unit, description)
            else:
                meter.create_observable_gauge(name, [self._callback(name)], unit, description)

    def add(self, source: Callable[[], Iterable[Gauge]]) -> None:
        owner = getattr(source, "__self__", None)
        if owner is None:
            raise TypeError("gauge sources must be bound methods")
        self._methods[id(owner)] = (weakref.ref(owner), source.__name__)

    def _callback(self, name: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(_options: CallbackOptions) -> Iterable[Observation]:
            from opentelemetry.metrics import Observation

            observations = []
            for key, (ref, method) in list(self._methods.items()):
                owner = ref()
                if owner is None:
                    del self._methods[key]
                    continue
                for gauge, value, attributes in getattr(owner, method)():
                    if gauge == name:
                        labels = {"messaging.system": _SYSTEM, **attributes}
                        observations.append(Observation(value, labels))
            return observations

        return observe


_HUBS: dict[int, tuple[Meter, _GaugeHub]] = {}


def _gauge_hub(meter: Meter) -> _GaugeHub:
    # Creating an observable instrument twice on one meter keeps only the first callback, so
    # every client of a meter shares one hub (keyed by the meter, which the provider caches).
    entry = _HUBS.get(id(meter))
    if entry is None or entry[0] is not meter:
        entry = (meter, _GaugeHub(meter))
        _HUBS[id(meter)] = entry
    return entry[1]
