"""Every metric a producer and a consumer report carries ``messaging.system``; the counters,
histograms and the lag gauge carry the destination too, as docs/observability.md says."""

from __future__ import annotations

from tests.support.fake_helpers import group_consumer
from tubemq_aio import Producer
from tubemq_aio.testing import FakeCluster
from tubemq_aio.testing.otel import InMemoryTelemetry

#: Metrics every producer/consumer pair reports.
EVERY_CLIENT = {
    "messaging.client.sent.messages",
    "messaging.client.consumed.messages",
    "messaging.client.operation.duration",
    "tubemq.client.partition.lag",
}
#: The gauges that describe a whole client (one value per client, whatever its topics).
CLIENT_WIDE = {
    "tubemq.client.sends.in_flight",
    "tubemq.client.fetch.buffered",
    "tubemq.client.brokers.blocked",
    "tubemq.client.reconnects",
}


async def test_every_metric_carries_the_system_and_the_destination() -> None:
    otel = InMemoryTelemetry()
    try:
        async with (
            FakeCluster(topics={"demo": 2}) as cluster,
            Producer(cluster.master_addr, topics=["demo"], telemetry=otel.telemetry()) as producer,
        ):
            await producer.send_many("demo", [b"a", b"b", b"c", b"d"])
            async with group_consumer(cluster, "g1", telemetry=otel.telemetry()) as consumer:
                got = 0
                async for _ in consumer:
                    got += 1
                    if got == 4:
                        break
                await consumer.commit()
                metrics = otel.metrics()
        names = set(metrics)
        assert names >= EVERY_CLIENT
        assert CLIENT_WIDE & names
        for name, points in metrics.items():
            assert points, name
            for labels, _ in points:
                assert labels["messaging.system"] == "tubemq", (name, labels)
                if name in CLIENT_WIDE:
                    assert labels["tubemq.client.id"], (name, labels)
                else:
                    assert labels["messaging.destination.name"] == "demo", (name, labels)
    finally:
        otel.shutdown()
