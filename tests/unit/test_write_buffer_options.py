"""The transport's write buffer limits are client options: ``write_high_water`` (the bytes
buffered at which senders pause) and ``write_low_water`` (where they resume) were fixed at
1 MiB / 256 KiB in the transport, with no way to change them from a client."""

from __future__ import annotations

import math

import pytest

from tubemq_aio import ConfigError, Consumer, Producer
from tubemq_aio._client import open_pool
from tubemq_aio.config import ClientConfig, parse_masters
from tubemq_aio.producer.config import ProducerConfig

MASTERS = parse_masters("h:8715")


def test_the_defaults_are_the_transport_s() -> None:
    config = ClientConfig(masters=MASTERS)
    assert (config.write_high_water, config.write_low_water) == (1024 * 1024, None)


async def test_the_low_water_mark_defaults_to_a_quarter_of_the_high_one() -> None:
    for high, low in ((1024 * 1024, 256 * 1024), (8192, 2048), (1, 0)):
        pool = open_pool(
            ClientConfig(masters=MASTERS, write_high_water=high, connection_reuse=False)
        )
        try:
            assert (pool.settings.write_high_water, pool.settings.write_low_water) == (high, low)
        finally:
            await pool.close()


async def test_the_limits_reach_every_connection_of_the_client() -> None:
    config = ProducerConfig(
        masters=MASTERS, write_high_water=64 * 1024, write_low_water=0, connection_reuse=False
    )
    pool = open_pool(config)
    try:
        assert (pool.settings.write_high_water, pool.settings.write_low_water) == (65536, 0)
    finally:
        await pool.close()


def test_clients_take_them_as_keywords() -> None:
    producer = Producer("h:8715", write_high_water=4096, write_low_water=1024)
    assert producer.config.write_high_water == 4096
    consumer = Consumer("h:8715", group="g1", topics=["t"], write_high_water=8192)
    assert consumer.config.write_high_water == 8192


def test_from_url_takes_them() -> None:
    config = ClientConfig.from_url("tubemq://h:8715?write_high_water=2048&write_low_water=512")
    assert (config.write_high_water, config.write_low_water) == (2048, 512)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"write_high_water": 0}, "write_high_water"),
        ({"write_high_water": -1}, "write_high_water"),
        ({"write_high_water": math.nan}, "write_high_water"),
        ({"write_high_water": 1.5}, "write_high_water"),
        ({"write_high_water": True}, "write_high_water"),
        ({"write_high_water": "1024"}, "write_high_water"),
        ({"write_high_water": 1 << 31}, "write_high_water"),
        ({"write_low_water": -1}, "write_low_water"),
        ({"write_low_water": math.inf}, "write_low_water"),
        ({"write_high_water": 1024, "write_low_water": 1025}, "write_low_water"),
    ],
)
def test_bad_limits_are_config_errors(options: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        ClientConfig(masters=MASTERS, **options)  # type: ignore[arg-type]
