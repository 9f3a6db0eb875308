"""The three clients of the lifecycle tests, built fast against a FakeCluster with topic ``t``
(``tests/fake/test_fake_lifecycle.py`` and ``tests/fake/test_fake_lifecycle_table.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tubemq_aio import ClientBalancedConsumer, Consumer, Producer
from tubemq_aio._client import AsyncLifecycle
from tubemq_aio.protocol.rpc import Method

__all__ = ["CLIENTS", "FAST", "Factory", "cb_consumer", "consumer", "producer"]

FAST: dict[str, Any] = {"rpc_timeout": 3.0, "connect_timeout": 10.0, "heartbeat_interval": 1.0}

Factory = Callable[..., AsyncLifecycle]


def producer(address: str, **options: Any) -> Producer:
    return Producer(address, topics=["t"], connection_reuse=False, **{**FAST, **options})


def consumer(address: str, **options: Any) -> Consumer:
    return Consumer(
        address, group="g1", topics=["t"], connection_reuse=False, **{**FAST, **options}
    )


def cb_consumer(address: str, **options: Any) -> ClientBalancedConsumer:
    return ClientBalancedConsumer(
        address, group="g1", topics=["t"], connection_reuse=False, **{**FAST, **options}
    )


CLIENTS: dict[str, tuple[Factory, Method, Method]] = {
    "producer": (producer, Method.MASTER_PRODUCER_REGISTER, Method.MASTER_PRODUCER_CLOSE),
    "consumer": (consumer, Method.MASTER_CONSUMER_REGISTER, Method.MASTER_CONSUMER_CLOSE),
    "cb-consumer": (
        cb_consumer,
        Method.MASTER_CONSUMER_REGISTER_V2,
        Method.MASTER_CONSUMER_CLOSE,
    ),
}
