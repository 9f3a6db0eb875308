"""The gateway checks on the one dialect: a config or a call with several bad fields names all
of them in one typed error (ConfigError for the config, InvalidRequestError for a call)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.gateway_config_data import base
from tubemq_aio.errors import ConfigError
from tubemq_aio.gateway.config.gateway_config import GatewayConfig
from tubemq_aio.gateway.config.tables import GroupSpec, HousekeeperConfig
from tubemq_aio.gateway.config.tubemq_access import TubeMQAccess
from tubemq_aio.gateway.engine.arguments import (
    checked_fetch,
    checked_rate,
    checked_reset,
    checked_settle,
)
from tubemq_aio.gateway.engine.data import ConsumeSettings
from tubemq_aio.gateway.errors import InvalidRequestError
from tubemq_aio.tls import TlsFiles


def wrong(value: object) -> Any:
    """``value`` typed as anything: the tests pass what the type hints forbid."""
    return value


def test_a_config_names_every_bad_top_level_key_at_once() -> None:
    with pytest.raises(ConfigError) as info:
        GatewayConfig.from_mapping(
            base(max_batch=0, rpc_timeout=1, docs="yes", auth_cache_size=-1, deployment="a b")
        )
    text = str(info.value)
    assert text.startswith("gateway config: ")
    for key in ("max_batch", "rpc_timeout", "docs", "auth_cache_size", "deployment"):
        assert key in text


def test_the_tables_name_every_bad_key_at_once() -> None:
    bad = base(
        bogus=1,
        groups=[{"name": "g1", "topics": ["demo"], "x": 1, "mode": 5}],
        keys=[{"key": "short", "scopes": ["eat:*"]}],
        housekeeper={"leader_lease": 1},
    )
    with pytest.raises(ConfigError) as info:
        GatewayConfig.from_mapping(bad)
    text = str(info.value)
    for named in (
        "bogus",
        "groups[0].x",
        "groups[0].mode",
        "keys[0].key",
        "eat:*",
        "housekeeper.leader_lease",
    ):
        assert named in text


def test_a_group_and_the_housekeeper_name_every_bad_field() -> None:
    with pytest.raises(ConfigError) as info:
        GroupSpec(
            name="g1",
            topics=("t",),
            mode=wrong("fanout"),
            start=wrong("middle"),
            lease_ms=0,
            max_clients=-1,
        )
    text = str(info.value)
    assert text.startswith("groups['g1']: ")
    for key in ("mode", "start", "lease_ms", "max_clients"):
        assert key in text
    with pytest.raises(ConfigError) as info:
        HousekeeperConfig(enabled=wrong("yes"), leader_lease_ms=1, probe_interval_ms=500)
    text = str(info.value)
    for key in ("enabled", "leader_lease_ms", "probe_interval_ms"):
        assert f"housekeeper.{key}" in text


def test_a_call_names_every_bad_argument_at_once() -> None:
    with pytest.raises(InvalidRequestError) as info:
        checked_fetch(-1, wrong(1), "", 0)
    text = str(info.value)
    assert text.startswith("fetch: ")
    for name in ("wait_ms", "holder", "max_messages"):
        assert name in text
    with pytest.raises(InvalidRequestError, match=r"action.*; delay_ms"):
        checked_settle(wrong("drop"), -5)
    with pytest.raises(InvalidRequestError, match=r"offset of 'a'.*; offset of 'b'"):
        checked_reset({"a": -1, "b": True})
    with pytest.raises(InvalidRequestError, match=r"messages_per_second.*; burst"):
        checked_rate(float("nan"), -1)


def test_good_calls_pass_through() -> None:
    assert checked_fetch(0, "h", "o", None) == 1
    assert checked_fetch(30_000, "h", "o", 10_000) == 10_000
    assert checked_reset({"1:t:0": 28}) == ("", [("1:t:0", 28)])
    assert checked_rate(0, None) == (0.0, 1)
    assert checked_rate(2.5, None) == (2.5, 3)
    with pytest.raises(InvalidRequestError, match="0 \\(off\\) or >="):
        checked_rate(0.0001, None)


def test_the_engine_settings_name_every_bad_knob_at_once() -> None:
    with pytest.raises(ConfigError) as info:
        ConsumeSettings(
            masters="",
            redis="redis://h:1/0",
            rpc_timeout=1,
            redis_max_connections=1,
            not_found_wait_ms=True,
        )
    text = str(info.value)
    assert text.startswith("ConsumeSettings: ")
    for name in ("masters", "rpc_timeout", "redis_max_connections", "not_found_wait_ms"):
        assert name in text


def test_the_cors_table_names_every_bad_key_at_once() -> None:
    cors = {"allow_origins": ["*", "ftp:/x"], "allow_methods": ["BREW"], "max_age": -1}
    with pytest.raises(ConfigError) as info:
        GatewayConfig.from_mapping(base(cors=cors))
    text = str(info.value)
    for named in ("'ftp:/x'", "'*' stands alone", "'BREW'", "cors.max_age"):
        assert named in text


def test_the_tubemq_table_names_every_bad_key_at_once() -> None:
    with pytest.raises(ConfigError) as info:
        TubeMQAccess(user=" ", password="", tls=wrong("yes"), tls_files=TlsFiles(key_file="k.pem"))
    text = str(info.value)
    assert text.startswith("tubemq: ")
    for named in ("tubemq.user", "tubemq.password", "tubemq.tls must", "tls_cert_file"):
        assert named in text
