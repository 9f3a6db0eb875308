"""Prometheus metrics of one replica (prometheus-client, ``tubemq_gateway_`` prefix).

Each app has its own registry, so several apps in one process (tests, mounting) do not clash.
The consume engine's plain counters (``ConsumeService.stats()``) are exported on every scrape
as ``tubemq_gateway_engine_<name>``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["GatewayMetrics", "stats_items"]

PREFIX = "tubemq_gateway_"


def stats_items(stats: object) -> dict[str, float]:
    """The numeric fields of an engine stats object (dataclass, mapping or plain object)."""
    if stats is None:
        return {}
    if dataclasses.is_dataclass(stats) and not isinstance(stats, type):
        raw: Mapping[str, Any] = {f.name: getattr(stats, f.name) for f in dataclasses.fields(stats)}
    elif isinstance(stats, Mapping):
        raw = stats
    else:
        raw = {k: v for k, v in vars(stats).items() if not k.startswith("_")}
    return {
        k: float(v)
        for k, v in raw.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }


class _EngineCollector(Collector):
    def __init__(self, source: Callable[[], object]) -> None:
        self._source = source

    def collect(self) -> Iterator[GaugeMetricFamily]:
        for name, value in sorted(stats_items(self._source()).items()):
            yield GaugeMetricFamily(
                f"{PREFIX}engine_{name}", f"consume engine counter {name}", value=value
            )


class _Delegate(Collector):
    """Yields what its current source yields (none while unset): a collector registered once
    whose source comes and goes with the app's lifespan."""

    def __init__(self) -> None:
        self.source: Callable[[], Iterable[Metric]] | None = None

    def collect(self) -> Iterator[Metric]:
        source = self.source
        if source is not None:
            yield from source()


class GatewayMetrics:
    """The replica's metrics and their registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            PREFIX + "http_requests",
            "HTTP requests by route template and status",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            PREFIX + "http_request_seconds",
            "HTTP request latency by route template",
            ["route"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 30),
        )
        self.fetch_outcomes = Counter(
            PREFIX + "fetch_outcomes",
            "fetch results by group and status",
            ["group", "outcome"],
            registry=self.registry,
        )
        self.messages_delivered = Counter(
            PREFIX + "messages_delivered",
            "messages returned by fetches",
            ["group"],
            registry=self.registry,
        )
        self.settles = Counter(
            PREFIX + "settle",
            "ack/nack/extend results by group",
            ["group", "action", "result"],
            registry=self.registry,
        )
        self.dead_lettered = Counter(
            PREFIX + "dead_lettered_messages",
            "messages of poison batches moved to the group's dlq_topic",
            ["group"],
            registry=self.registry,
        )
        self.produced = Counter(
            PREFIX + "produced_messages",
            "produce results by topic and HTTP status",
            ["topic", "status"],
            registry=self.registry,
        )
        self.error_answers = Counter(
            PREFIX + "error_answers",
            "error answers by code and the class of their cause (details are in the log)",
            ["code", "cause"],
            registry=self.registry,
        )
        self._engine: Callable[[], object] | None = None
        self._housekeeper = _Delegate()
        self.registry.register(self._housekeeper)
        self._children: dict[tuple[Counter, tuple[str, ...]], Counter] = {}

    def child(self, metric: Counter, *values: str) -> Counter:
        """``metric.labels(*values)``, kept after the first call: prometheus_client takes a
        lock and checks the values on every ``labels`` call, a few of which every fetch makes.
        Only for label values of a bounded set (configured groups, fixed outcomes)."""
        key = (metric, values)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*values)
        return found

    def watch_engine(self, source: Callable[[], object]) -> None:
        """Export ``source()`` (the engine's stats) on every scrape; call once."""
        if self._engine is None:
            self._engine = source
            self.registry.register(_EngineCollector(source))

    def watch_housekeeper(self, source: Callable[[], Iterable[Metric]] | None) -> None:
        """Export the families ``source()`` yields (the housekeeper's) on every scrape; None
        stops exporting them."""
        self._housekeeper.source = source

    def render(self) -> bytes:
        """The Prometheus text exposition."""
        return generate_latest(self.registry)
