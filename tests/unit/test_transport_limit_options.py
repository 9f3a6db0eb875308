"""The transport's other limits are client options too: ``max_frame_bytes``, ``sweep_interval``,
``connection_close_timeout`` and the ``connect_backoff_*`` settings were fixed in the
transport, with no way to change them from a producer or consumer."""

from __future__ import annotations

import math

import pytest

from tubemq_aio import ConfigError, Consumer, Producer
from tubemq_aio._client import open_pool
from tubemq_aio._io.settings import TransportSettings
from tubemq_aio.config import ClientConfig, parse_masters

MASTERS = parse_masters("h:8715")

#: client option -> the transport setting it sets.
OPTIONS = {
    "max_frame_bytes": "max_frame_bytes",
    "sweep_interval": "sweep_interval",
    "connection_close_timeout": "close_timeout",
    "connect_backoff_initial": "backoff_initial",
    "connect_backoff_max": "backoff_max",
    "connect_backoff_multiplier": "backoff_multiplier",
    "connect_backoff_jitter": "backoff_jitter",
    "read_coalescing": "read_coalescing",
}


def test_the_defaults_are_the_transport_s() -> None:
    config = ClientConfig(masters=MASTERS)
    transport = TransportSettings()
    for option, setting in OPTIONS.items():
        assert getattr(config, option) == getattr(transport, setting), option


async def test_each_option_reaches_the_pool_s_settings() -> None:
    given = {
        "max_frame_bytes": 65536,
        "sweep_interval": 0.002,
        "connection_close_timeout": 0.5,
        "connect_backoff_initial": 0.3,
        "connect_backoff_max": 4.0,
        "connect_backoff_multiplier": 1.5,
        "connect_backoff_jitter": 0.0,
        "read_coalescing": 0.0,
    }
    pool = open_pool(ClientConfig(masters=MASTERS, connection_reuse=False, **given))  # type: ignore[arg-type]
    try:
        for option, setting in OPTIONS.items():
            assert getattr(pool.settings, setting) == given[option], option
    finally:
        await pool.close()


def test_clients_take_them_as_keywords() -> None:
    producer = Producer("h:8715", max_frame_bytes=8192, connect_backoff_max=2.0)
    assert (producer.config.max_frame_bytes, producer.config.connect_backoff_max) == (8192, 2.0)
    consumer = Consumer("h:8715", group="g1", topics=["t"], sweep_interval=0.01)
    assert consumer.config.sweep_interval == 0.01


def test_from_url_takes_them() -> None:
    config = ClientConfig.from_url(
        "tubemq://h:8715?max_frame_bytes=16384&sweep_interval=0.02&connection_close_timeout=2"
        "&connect_backoff_initial=0.5&connect_backoff_max=5&connect_backoff_multiplier=3"
        "&connect_backoff_jitter=1&read_coalescing=0.125"
    )
    assert config.max_frame_bytes == 16384
    assert (config.sweep_interval, config.connection_close_timeout) == (0.02, 2.0)
    assert (config.connect_backoff_initial, config.connect_backoff_max) == (0.5, 5.0)
    assert (config.connect_backoff_multiplier, config.connect_backoff_jitter) == (3.0, 1.0)
    assert config.read_coalescing == 0.125


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"max_frame_bytes": 0}, "max_frame_bytes"),
        ({"max_frame_bytes": 8191}, "max_frame_bytes"),
        ({"max_frame_bytes": 3585 * 8192}, "max_frame_bytes"),  # more than a server sends
        ({"max_frame_bytes": 65536.0}, "max_frame_bytes"),
        ({"max_frame_bytes": True}, "max_frame_bytes"),
        ({"max_frame_bytes": "65536"}, "max_frame_bytes"),
        ({"sweep_interval": 0}, "sweep_interval"),
        ({"sweep_interval": 0.0005}, "sweep_interval"),  # a busy loop
        ({"sweep_interval": 2.0}, "sweep_interval"),
        ({"sweep_interval": math.nan}, "sweep_interval"),
        ({"sweep_interval": True}, "sweep_interval"),
        ({"connection_close_timeout": 0}, "connection_close_timeout"),
        ({"connection_close_timeout": -1}, "connection_close_timeout"),
        ({"connection_close_timeout": math.inf}, "connection_close_timeout"),
        ({"connection_close_timeout": "1"}, "connection_close_timeout"),
        ({"connect_backoff_initial": 0}, "connect_backoff_initial"),
        ({"connect_backoff_initial": math.nan}, "connect_backoff_initial"),
        ({"connect_backoff_initial": 61}, "connect_backoff_initial"),
        ({"connect_backoff_max": -1}, "connect_backoff_max"),
        ({"connect_backoff_max": 601}, "connect_backoff_max"),
        ({"connect_backoff_initial": 2, "connect_backoff_max": 1}, "connect_backoff_max"),
        ({"connect_backoff_multiplier": 0.5}, "connect_backoff_multiplier"),
        ({"connect_backoff_multiplier": math.inf}, "connect_backoff_multiplier"),
        ({"connect_backoff_multiplier": False}, "connect_backoff_multiplier"),
        ({"connect_backoff_jitter": -0.1}, "connect_backoff_jitter"),
        ({"connect_backoff_jitter": 1.5}, "connect_backoff_jitter"),
        ({"connect_backoff_jitter": math.nan}, "connect_backoff_jitter"),
        ({"read_coalescing": -0.01}, "read_coalescing"),
        ({"read_coalescing": 0.5}, "read_coalescing"),  # a read waiting for half the answers
        ({"read_coalescing": math.nan}, "read_coalescing"),
        ({"read_coalescing": math.inf}, "read_coalescing"),
        ({"read_coalescing": True}, "read_coalescing"),
        ({"read_coalescing": "0.1"}, "read_coalescing"),
    ],
)
def test_bad_limits_are_config_errors(options: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        ClientConfig(masters=MASTERS, **options)  # type: ignore[arg-type]


def test_every_bad_limit_is_named_in_one_error() -> None:
    with pytest.raises(ConfigError) as caught:
        ClientConfig(
            masters=MASTERS,
            max_frame_bytes=-1,
            sweep_interval=math.inf,
            connection_close_timeout=0,
            connect_backoff_jitter=2,
        )
    for name in ("max_frame_bytes", "sweep_interval", "connection_close_timeout", "jitter"):
        assert name in str(caught.value)
