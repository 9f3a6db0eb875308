"""A Producer or Consumer given a broker's client port for the master's: the broker answers
``No service 1 found on the server``, which a start retried for ``register_attempts`` (about
4 s) and then raised as a bare ``ServiceNotPublishedError``. It fails at the first answer now,
with a :class:`NoMasterServiceError` that names the address and the master's port."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from tubemq_aio import (
    ClientBalancedConsumer,
    ConnectError,
    Consumer,
    NoMasterServiceError,
    Producer,
    ServiceNotPublishedError,
)
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster

Client = Producer | Consumer | ClientBalancedConsumer

CLIENTS: dict[str, tuple[Callable[[str], Client], Method]] = {
    "producer": (
        lambda address: Producer(address, topics=["demo"]),
        Method.MASTER_PRODUCER_REGISTER,
    ),
    "consumer": (
        lambda address: Consumer(address, group="g1", topics=["demo"]),
        Method.MASTER_CONSUMER_REGISTER,
    ),
    "client-balanced": (
        lambda address: ClientBalancedConsumer(address, group="g1", topics=["demo"]),
        Method.MASTER_CONSUMER_REGISTER_V2,
    ),
}


@pytest.mark.parametrize("kind", sorted(CLIENTS))
async def test_a_start_at_a_broker_port_fails_at_once_naming_the_master_port(kind: str) -> None:
    make, register = CLIENTS[kind]
    async with FakeCluster(topics={"demo": 1}) as cluster:
        address = cluster.broker_addr(1)
        client = make(address)
        with pytest.raises(NoMasterServiceError) as caught:
            async with asyncio.timeout(30):
                await client.start()
        assert client.closed
        assert cluster.requests(register) == 1  # no retry
        error = caught.value
        assert isinstance(error, ServiceNotPublishedError)  # what was raised before
        assert error.address == address
        assert f"{address} is a TubeMQ node without the master service" in str(error)
        assert "8715" in str(error)


async def test_a_broker_listed_before_the_master_is_passed_over() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        masters = f"{cluster.broker_addr(1)},{cluster.master_addr}"
        async with Producer(masters, topics=["demo"]) as producer:
            await producer.send("demo", b"x")
        assert cluster.requests(Method.MASTER_PRODUCER_REGISTER) == 2


async def test_a_broker_port_and_an_unreachable_address_both_named() -> None:
    """Every address a broker's port or unreachable: the start raised the last address's
    ``ConnectError`` alone, and the hint that the other one is a broker's port was lost."""
    async with FakeCluster(topics={"demo": 1}) as cluster:
        broker = cluster.broker_addr(1)
        producer = Producer(f"{broker},127.0.0.1:1", topics=["demo"], register_attempts=1)
        with pytest.raises(ConnectError) as caught:  # the type raised before
            async with asyncio.timeout(30):
                await producer.start()
        text = str(caught.value)
        assert f"{broker} is a TubeMQ node without the master service" in text
        assert text.index(broker) < text.index("cannot connect to 127.0.0.1:1")
