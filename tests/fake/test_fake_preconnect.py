"""The producer connects to every broker of its metadata before the first send
(``tubemq_aio/producer/_preconnect.py``), and records a broker it cannot reach."""

from __future__ import annotations

from tubemq_aio import Producer
from tubemq_aio.testing import FakeCluster, wait_until


def _opened(producer: Producer) -> int:
    return int(producer.metrics()["transport"]["connections_opened"])


async def test_every_broker_is_connected_before_the_first_send() -> None:
    async with (
        FakeCluster(topics={"demo": 2}, brokers=3) as cluster,
        Producer(cluster.master_addr, topics=["demo"]) as producer,
    ):
        # the master's connection and one per broker, with no send made
        await wait_until(lambda: _opened(producer) >= 4, 5.0, "a connection to each broker")
        assert producer.metrics()["transport"]["requests_sent"] >= 1  # the master's calls only
        assert producer.sent == 0
        opened = _opened(producer)
        await producer.send("demo", b"x")
        assert _opened(producer) == opened  # the send used a connection opened beforehand


async def test_a_broker_that_cannot_be_reached_is_recorded_and_the_others_connected() -> None:
    async with FakeCluster(topics={"demo": 1}, brokers=2) as cluster:
        await cluster.stop_broker(2)
        host, port = cluster.brokers[1].address
        async with Producer(cluster.master_addr, topics=["demo"]) as producer:

            def refused() -> bool:
                failures: dict[str, int] = producer.metrics()["blocking"].connect_failures
                return failures.get(f"{host}:{port}", 0) >= 1

            await wait_until(refused, 5.0, "the refused pre-connect recorded")
            result = await producer.send("demo", b"x")
            assert result.partition_key.startswith("1:")  # the reachable broker took it
