"""OpenTelemetry against the real cluster: spans, the producer -> consumer link, metrics."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from tubemq_aio import Consumer, Producer
from tubemq_aio.models import Message
from tubemq_aio.telemetry import TRACEPARENT
from tubemq_aio.testing import LocalCluster, wait_until
from tubemq_aio.testing.otel import InMemoryTelemetry

MESSAGES = 120


@pytest.fixture
def otel() -> Iterator[InMemoryTelemetry]:
    setup = InMemoryTelemetry()
    yield setup
    setup.shutdown()


async def test_spans_link_and_metrics_across_producer_and_consumer(
    cluster: LocalCluster, topic: str, otel: InMemoryTelemetry
) -> None:
    consumer_side = InMemoryTelemetry()  # a separate "process": its own providers
    try:
        async with Producer(
            cluster.master_addr, topics=[topic], telemetry=otel.telemetry()
        ) as producer:
            results = [
                await producer.send(topic, f"m-{i}".encode(), attributes={"i": str(i)})
                for i in range(MESSAGES)
            ]
        sends = [s for s in otel.spans() if s.name == f"send {topic}"]
        assert len(sends) == MESSAGES
        by_message_id = {}
        for span, result in zip(sends, results, strict=True):
            attrs = dict(span.attributes or {})
            assert span.kind.name == "PRODUCER"
            assert attrs["messaging.system"] == "tubemq"
            assert attrs["messaging.destination.name"] == topic
            assert attrs["messaging.operation.type"] == "send"
            assert attrs["messaging.message.id"] == str(result.message_id)
            assert attrs["messaging.destination.partition.id"] == result.partition_key
            assert str(attrs["server.address"]).startswith("127.0.0.")
            assert isinstance(attrs["server.port"], int)
            by_message_id[result.message_id] = span.context
        assert otel.total("messaging.client.sent.messages") == MESSAGES

        handled: list[Message] = []

        async def handler(message: Message) -> None:
            handled.append(message)

        consumer = Consumer(
            cluster.master_addr,
            group=f"otel_{topic}",
            topics=[topic],
            consume_from="earliest",
            heartbeat_interval=2.0,
            telemetry=consumer_side.telemetry(),
        )
        await consumer.start()
        runner = asyncio.ensure_future(consumer.run(handler))
        await wait_until(lambda: len({m.message_id for m in handled}) >= MESSAGES, 60, "messages")
        lag_points = consumer_side.metrics().get("tubemq.client.partition.lag", [])
        await consumer.close()
        await asyncio.wait_for(runner, 10)
    finally:
        consumer_side.shutdown()

    assert {m.message_id for m in handled} == set(by_message_id)
    assert all(TRACEPARENT in m.attributes and m.attributes["i"] for m in handled)
    spans = consumer_side.spans()
    receives = [s for s in spans if s.name == f"receive {topic}"]
    processes = [s for s in spans if s.name == f"process {topic}"]
    delivered = sum(
        int(str((s.attributes or {})["messaging.batch.message_count"])) for s in receives
    )
    assert delivered == len(handled)
    assert consumer_side.total("messaging.client.consumed.messages") == delivered
    assert len(processes) == len(handled)
    for span in processes:
        attrs = dict(span.attributes or {})
        assert span.kind.name == "CONSUMER"
        assert attrs["messaging.consumer.group.name"] == f"otel_{topic}"
        producer_context = by_message_id[int(str(attrs["messaging.message.id"]))]
        (link,) = span.links
        assert link.context.trace_id == producer_context.trace_id
        assert link.context.span_id == producer_context.span_id
    assert {str(labels["messaging.destination.partition.id"]) for labels, _ in lag_points}
    # Per-group alerts: every consumer instrument names the group (and the partition).
    assert {labels["messaging.consumer.group.name"] for labels, _ in lag_points} == {
        f"otel_{topic}"
    }
    durations = consumer_side.metrics()["messaging.process.duration"]
    (count, _), *_ = [v for _, v in durations]
    assert count >= 1
    for labels, _ in durations:
        assert labels["messaging.consumer.group.name"] == f"otel_{topic}"
        assert f":{topic}:" in str(labels["messaging.destination.partition.id"])


async def test_telemetry_off_sends_no_trace_context(cluster: LocalCluster, topic: str) -> None:
    async with Producer(cluster.master_addr, topics=[topic], telemetry=False) as producer:
        assert producer.telemetry is None
        await producer.send(topic, b"plain", attributes={"a": "1"})
    consumer = Consumer(
        cluster.master_addr,
        group=f"plain_{topic}",
        topics=[topic],
        consume_from="earliest",
        heartbeat_interval=2.0,
        telemetry=False,
    )
    async with consumer:
        deadline = time.monotonic() + 60
        while True:
            assert time.monotonic() < deadline, "no message"
            async with await consumer.getmany(timeout=0.5) as batch:
                if batch:
                    (message,) = list(batch)
                    break
    assert dict(message.attributes) == {"a": "1"}
