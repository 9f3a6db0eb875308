"""The automatic join heartbeat (issue 32): ``join_heartbeat_interval=None`` means 1 s while a
consumer waits for its first partitions when every master address is a loopback address (a
development cluster), and the Java client's heartbeats otherwise; 0 turns it off, seconds set
it. Pure: no event loop, no network."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tubemq_aio import Consumer, ConsumerConfig
from tubemq_aio.config import is_loopback_host, parse_masters
from tubemq_aio.consumer._session import JOIN_HEARTBEATS_MAX, MasterSession
from tubemq_aio.consumer.config import (
    JOIN_HEARTBEAT_OFF,
    LOOPBACK_JOIN_HEARTBEAT,
    join_heartbeat_in_effect,
)
from tubemq_aio.errors import ConfigError
from tubemq_aio.protocol.rebalance import MasterHeartbeatState


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "127.0.0.2",  # the local cluster's brokers' addresses: all of 127.0.0.0/8
        "127.255.255.254",
        "::1",
        "0:0:0:0:0:0:0:1",
        "::ffff:127.0.0.1",  # IPv4-mapped
        "localhost",
        "LocalHost",
        "localhost.",
    ],
)
def test_loopback_hosts(host: str) -> None:
    assert is_loopback_host(host)


@pytest.mark.parametrize(
    "host",
    [
        "10.0.0.7",
        "128.0.0.1",
        "0.0.0.0",
        "::",
        "::2",
        "::ffff:10.0.0.7",
        "fe80::1",
        "master.example.com",
        "localhost.example.com",  # names are not resolved: only "localhost" itself
        "my-localhost",
        "",
    ],
)
def test_other_hosts(host: str) -> None:
    assert not is_loopback_host(host)


@pytest.mark.parametrize(
    ("masters", "automatic"),
    [
        ("127.0.0.1:8715", LOOPBACK_JOIN_HEARTBEAT),
        ("127.0.0.1:8715,127.0.0.2:8716", LOOPBACK_JOIN_HEARTBEAT),
        ("localhost:8715,[::1]:8716", LOOPBACK_JOIN_HEARTBEAT),
        ("10.0.0.7:8715", None),
        ("master1:8715,master2:8715", None),
        # mixed: one production address makes it a production cluster
        ("127.0.0.1:8715,10.0.0.7:8715", None),
        ("[::1]:8715,master:8715", None),
    ],
)
def test_automatic_is_1_s_only_when_every_master_is_loopback(
    masters: str, automatic: float | None
) -> None:
    hosts = parse_masters(masters)
    assert join_heartbeat_in_effect(None, hosts) == automatic
    # an explicit setting wins everywhere
    assert join_heartbeat_in_effect(2.5, hosts) == 2.5
    assert join_heartbeat_in_effect(JOIN_HEARTBEAT_OFF, hosts) is None
    assert join_heartbeat_in_effect(0, hosts) is None


def test_no_master_is_not_a_loopback_cluster() -> None:
    assert join_heartbeat_in_effect(None, []) is None


def _config(masters: str, **options: object) -> ConsumerConfig:
    return ConsumerConfig(masters=masters, group="gg", topics=["t"], **options)  # type: ignore[arg-type]


def test_the_config_resolves_the_setting_against_its_masters() -> None:
    assert _config("127.0.0.1:8715").join_heartbeat == LOOPBACK_JOIN_HEARTBEAT
    assert _config("10.0.0.7:8715").join_heartbeat is None
    assert _config("127.0.0.1:8715", join_heartbeat_interval=0).join_heartbeat is None
    assert _config("127.0.0.1:8715", join_heartbeat_interval=0.0).join_heartbeat is None
    assert _config("10.0.0.7:8715", join_heartbeat_interval=3).join_heartbeat == 3
    url = ConsumerConfig.from_url("tubemq://localhost:8715", group="gg", topics=["t"])
    assert url.join_heartbeat == LOOPBACK_JOIN_HEARTBEAT
    off = ConsumerConfig.from_url(
        "tubemq://localhost:8715?join_heartbeat_interval=0", group="gg", topics=["t"]
    )
    assert off.join_heartbeat is None


@pytest.mark.parametrize("value", [False, True, "0", "off", -0.5, float("nan"), 301])
def test_zero_is_the_only_new_value_accepted(value: object) -> None:
    with pytest.raises(ConfigError, match="join_heartbeat_interval"):
        _config("127.0.0.1:8715", join_heartbeat_interval=value)


def _waits(masters: str, count: int, **options: object) -> list[float]:
    consumer = Consumer(masters, group="gg", topics=["t"], heartbeat_interval=13, **options)  # type: ignore[arg-type]
    session = SimpleNamespace(
        config=consumer.config, hb_state=MasterHeartbeatState(), _join_heartbeats=0
    )
    return [MasterSession._heartbeat_wait(session) for _ in range(count)]  # type: ignore[arg-type]


def test_the_session_heartbeats_at_the_value_in_effect() -> None:
    n = JOIN_HEARTBEATS_MAX + 2
    # default against a loopback master: 1 s for at most JOIN_HEARTBEATS_MAX heartbeats
    assert _waits("127.0.0.1:8715", n) == [1.0] * JOIN_HEARTBEATS_MAX + [13, 13]
    # default against a production master: the Java client's period throughout
    assert _waits("10.0.0.7:8715", n) == [13] * n
    # off against a loopback master; an explicit value against a production one
    assert _waits("127.0.0.1:8715", 3, join_heartbeat_interval=0) == [13] * 3
    assert _waits("10.0.0.7:8715", 2, join_heartbeat_interval=2) == [2, 2]
