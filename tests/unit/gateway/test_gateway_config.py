"""GatewayConfig: every key validated, with the key named in the error; secrets not in repr."""

from __future__ import annotations

import dataclasses
import hashlib
import math
from pathlib import Path
from typing import Any

import pytest

from tests.support.gateway_config_data import base
from tubemq_aio.errors import ConfigError
from tubemq_aio.gateway import GatewayConfig
from tubemq_aio.gateway.config.tables import HousekeeperConfig

GOOD = """
masters = "127.0.0.1:8715"
redis = "redis://127.0.0.1:6379/0"
secret = "0123456789abcdef-secret"
produce_topics = ["demo"]
[[groups]]
name = "g1"
topics = ["demo"]
mode = "clustering"
start = "earliest"
lease_ms = 60000
[[keys]]
key = "k-123456"
scopes = ["produce:*", "consume:g*", "admin:g1"]
"""


def test_from_toml_reads_the_issue_example(tmp_path: Path) -> None:
    path = tmp_path / "gw.toml"
    path.write_text(GOOD)
    cfg = GatewayConfig.from_toml(path)
    assert cfg.produce_topics == ("demo",)
    group = cfg.group("g1")
    assert group is not None
    assert group.spec.topics == ("demo",)
    assert group.spec.lease_ms == 60000
    assert cfg.keys[0].digest == hashlib.sha256(b"k-123456").digest()
    assert cfg.keys[0].allows("admin", "g1")
    assert not cfg.keys[0].allows("admin", "g2")
    assert cfg.keys[0].allows("consume", "gx")
    assert not cfg.keys[0].allows("consume", "h")


def test_secret_and_keys_never_in_repr(tmp_path: Path) -> None:
    path = tmp_path / "gw.toml"
    path.write_text(GOOD)
    text = repr(GatewayConfig.from_toml(path))
    assert "0123456789abcdef-secret" not in text
    assert "k-123456" not in text
    assert hashlib.sha256(b"k-123456").hexdigest() not in text


def test_redis_password_never_in_repr() -> None:
    cfg = GatewayConfig.from_mapping(base(redis="redis://:hunter2-pass@127.0.0.1:6379/0"))
    assert "hunter2-pass" not in repr(cfg)
    assert cfg.redis.endswith("@127.0.0.1:6379/0")


def test_limits_accept_the_bounds_their_messages_name() -> None:
    assert GatewayConfig.from_mapping(base(rpc_timeout=3)).rpc_timeout == 3
    assert GatewayConfig.from_mapping(base(rpc_timeout=600)).rpc_timeout == 600
    with pytest.raises(ConfigError, match=r"rpc_timeout must be in \[3, 600\] seconds, got 2\.99"):
        GatewayConfig.from_mapping(base(rpc_timeout=2.99))
    assert GatewayConfig.from_mapping(base()).redis_max_connections == 64
    for bad in (1, 10_001, True, 2.5):
        with pytest.raises(ConfigError, match="redis_max_connections"):
            GatewayConfig.from_mapping(base(redis_max_connections=bad))


async def test_master_probe_timeout_reaches_the_probe_and_outlasts_a_slow_connect(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # before: 1 s, fixed; a connect whose first SYN was lost (the kernel sends the second 1 s
    # later) made a reachable master look down, and the guarded produce was cancelled
    import asyncio

    from tubemq_aio.gateway.app import create_app

    assert GatewayConfig.from_mapping(base()).master_probe_timeout == 1.5
    config = GatewayConfig.from_mapping(base(masters="127.0.0.1:9", master_probe_timeout=0.3))
    reach = create_app(config).state.gateway.reach
    assert reach.connect_timeout == 0.3

    class Writer:
        def close(self) -> None:
            pass

        async def wait_closed(self) -> None:
            pass

    async def slow_connect(host: str, port: int) -> tuple[None, Writer]:
        await asyncio.sleep(0.15)
        return None, Writer()

    monkeypatch.setattr(asyncio, "open_connection", slow_connect)
    assert await reach.reachable()
    reach.connect_timeout = 0.05
    reach.ttl = 0.0
    assert not await reach.reachable()
    for bad in (0, -1, 61, float("nan"), float("inf"), True, "1.5"):
        with pytest.raises(ConfigError, match="master_probe_timeout"):
            GatewayConfig.from_mapping(base(master_probe_timeout=bad))


def test_auth_cache_size_reaches_the_authenticator() -> None:
    from tubemq_aio.gateway.app import create_app

    assert GatewayConfig.from_mapping(base()).auth_cache_size == 1024
    config = GatewayConfig.from_mapping(base(auth_cache_size=0))
    assert create_app(config).state.gateway.auth.cache_size == 0
    for bad in (-1, 1_000_001, True, 2.5):
        with pytest.raises(ConfigError, match="auth_cache_size"):
            GatewayConfig.from_mapping(base(auth_cache_size=bad))


def test_token_cache_size_reaches_the_lease_tokens() -> None:
    from tubemq_aio.gateway.app import create_app

    assert GatewayConfig.from_mapping(base()).token_cache_size == 4096
    config = GatewayConfig.from_mapping(base(token_cache_size=0))
    assert create_app(config).state.gateway.tokens.cache_size == 0
    for bad in (-1, 1_000_001, 2**64, True, 2.5, float("nan"), float("inf"), "10"):
        with pytest.raises(ConfigError, match="token_cache_size"):
            GatewayConfig.from_mapping(base(token_cache_size=bad))


def test_config_limits_are_the_request_limits() -> None:
    from tubemq_aio.gateway.app import default_engine

    edge = {
        "name": "g1",
        "topics": ["demo"],
        "lease_ms_min": 100,
        "lease_ms": 100,
        "lease_ms_max": 43_200_000,
    }
    cfg = GatewayConfig.from_mapping(base(max_batch=500, groups=[edge]))
    spec = default_engine(cfg).settings.groups[0]
    assert (spec.lease_ms_min, spec.lease_ms_max) == (100, 43_200_000)
    for over in ({"lease_ms_min": 99}, {"lease_ms_max": 43_200_001}):
        with pytest.raises(ConfigError, match="lease_ms"):
            GatewayConfig.from_mapping(base(groups=[{**edge, **over}]))
    with pytest.raises(ConfigError, match=r"max_batch must be an integer in \[1, 500\]"):
        GatewayConfig.from_mapping(base(max_batch=501))


@pytest.mark.parametrize(
    ("over", "named"),
    [
        ({"secret": "short"}, "secret"),
        ({"secret": 5}, "secret"),
        ({"masters": ""}, "masters"),
        ({"redis": "http://x"}, "redis"),
        ({"bogus": 1}, "bogus"),
        ({"keys": []}, "keys"),
        ({"keys": [{"key": "k-123456", "scopes": ["eat:*"]}]}, "scopes"),
        ({"keys": [{"key": "short", "scopes": []}]}, "keys[0].key"),
        ({"keys": [{"scopes": []}]}, "keys[0]"),
        ({"keys": [{"key_sha256": "zz", "scopes": []}]}, "key_sha256"),
        ({"keys": [{"key": "k-123456", "scopes": [], "x": 1}]}, "keys[0].x"),
        ({"groups": [{"name": "g1", "topics": []}]}, "topics"),
        ({"groups": [{"name": "g 1", "topics": ["t"]}]}, "name"),
        ({"groups": [{"name": "g", "topics": ["t"]}]}, "name"),
        ({"groups": [{"name": "1g", "topics": ["t"]}]}, "name"),
        ({"groups": [{"name": "g1", "topics": ["t#x"]}]}, "topics"),
        ({"groups": [{"name": "g1", "topics": ["t"], "mode": "fanout"}]}, "mode"),
        ({"groups": [{"name": "g1", "topics": ["t"], "start": "middle"}]}, "start"),
        ({"groups": [{"name": "g1", "topics": ["t"], "lease_ms": 0}]}, "lease_ms"),
        ({"groups": [{"name": "g1", "topics": ["t"], "lease_ms": 5000}]}, "lease_ms"),
        ({"groups": [{"name": "g1", "topics": ["t"], "extra": 1}]}, "groups[0].extra"),
        ({"groups": [{"name": "g1", "topics": ["t"]}] * 2}, "twice"),
        ({"groups": {"name": "g1"}}, "groups"),
        ({"produce_topics": "demo"}, "produce_topics"),
        ({"produce_timeout": float("nan")}, "produce_timeout"),
        ({"produce_timeout": float("inf")}, "produce_timeout"),
        ({"max_batch": 0}, "max_batch"),
        ({"rpc_timeout": 1}, "rpc_timeout"),
        ({"max_batch": True}, "max_batch"),
        ({"allow_anonymous": "yes"}, "allow_anonymous"),
        ({"kept_batch_bytes": -1}, "kept_batch_bytes"),
        ({"kept_batch_bytes": True}, "kept_batch_bytes"),
        ({"kept_batch_bytes": 1.5}, "kept_batch_bytes"),
        ({"kept_batch_bytes": float("nan")}, "kept_batch_bytes"),
        ({"kept_batch_bytes": "32MiB"}, "kept_batch_bytes"),
        ({"kept_batch_bytes": 1 << 41}, "kept_batch_bytes"),
        ({"body_timeout": float("nan")}, "body_timeout"),
        ({"body_timeout": float("inf")}, "body_timeout"),
        ({"body_timeout": float("-inf")}, "body_timeout"),
        ({"body_timeout": 0}, "body_timeout"),
        ({"body_timeout": 0.0}, "body_timeout"),
        ({"body_timeout": -1}, "body_timeout"),
        ({"body_timeout": 3600.5}, "body_timeout"),
        ({"body_timeout": True}, "body_timeout"),
        ({"body_timeout": "30"}, "body_timeout"),
        ({"body_timeout": [30]}, "body_timeout"),
    ],
)
def test_bad_values_name_the_key(over: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace("[", r"\[").replace("]", r"\]")):
        GatewayConfig.from_mapping(base(**over))


def test_body_timeout_is_30_seconds_by_default_and_taken_as_given() -> None:
    assert GatewayConfig.from_mapping(base()).body_timeout == 30.0
    assert GatewayConfig.from_mapping(base(body_timeout=0.25)).body_timeout == 0.25
    assert GatewayConfig.from_mapping(base(body_timeout=3600)).body_timeout == 3600
    with pytest.raises(ConfigError, match=r"body_timeout must be in \(0, 3600\] seconds"):
        GatewayConfig.from_mapping(base(body_timeout=0))


def test_kept_batch_bytes_is_32_mib_by_default_and_taken_as_given() -> None:
    assert GatewayConfig.from_mapping(base()).kept_batch_bytes == 0
    assert GatewayConfig.from_mapping(base(kept_batch_bytes=0)).kept_batch_bytes == 0
    assert GatewayConfig.from_mapping(base(kept_batch_bytes=1 << 25)).kept_batch_bytes == 1 << 25


def test_missing_required_keys() -> None:
    for key in ("masters", "redis", "secret"):
        data = base()
        del data[key]
        with pytest.raises(ConfigError, match=key):
            GatewayConfig.from_mapping(data)


def test_no_keys_needs_allow_anonymous() -> None:
    with pytest.raises(ConfigError, match="allow_anonymous"):
        GatewayConfig.from_mapping(base(keys=[]))
    assert GatewayConfig.from_mapping(base(keys=[], allow_anonymous=True)).allow_anonymous


def test_key_sha256_accepted() -> None:
    digest = hashlib.sha256(b"k-abcdefgh").hexdigest()
    cfg = GatewayConfig.from_mapping(base(keys=[{"key_sha256": digest, "scopes": ["admin:*"]}]))
    assert cfg.keys[0].digest.hex() == digest


def test_unreadable_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        GatewayConfig.from_toml(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("masters = [")
    with pytest.raises(ConfigError, match="TOML"):
        GatewayConfig.from_toml(bad)


def test_housekeeper_defaults_and_table() -> None:
    cfg = GatewayConfig.from_mapping(base())
    hk = cfg.housekeeper
    assert (hk.enabled, hk.leader_lease_ms, hk.probe_interval_ms) == (True, 15_000, 60_000)
    assert hk.client_idle_ms == 7 * 86_400_000
    assert hk.session_idle_ms == 600_000
    assert cfg.sync_interval == 10.0
    cfg = GatewayConfig.from_mapping(
        base(
            sync_interval=0.5,
            housekeeper={"leader_lease_ms": 3000, "client_idle_ms": 1000, "probe_interval_ms": 0},
        )
    )
    assert cfg.housekeeper.client_idle_ms == 1000
    assert cfg.housekeeper.probe_interval_ms == 0


@pytest.mark.parametrize(
    ("over", "text"),
    [
        ({"housekeeper": {"leader_lease_ms": 999}}, "housekeeper.leader_lease_ms"),
        ({"housekeeper": {"leader_lease_ms": True}}, "housekeeper.leader_lease_ms"),
        ({"housekeeper": {"probe_interval_ms": 500}}, "housekeeper.probe_interval_ms"),
        ({"housekeeper": {"probe_interval_ms": -1}}, "housekeeper.probe_interval_ms"),
        ({"housekeeper": {"session_idle_ms": 1.5}}, "housekeeper.session_idle_ms"),
        ({"housekeeper": {"client_idle_ms": 10_000}}, "2 x sync_interval"),
        ({"housekeeper": {"client_idle_ms": math.inf}}, "housekeeper.client_idle_ms"),
        ({"housekeeper": {"enabled": "yes"}}, "housekeeper.enabled"),
        ({"housekeeper": {"leader_lease": 1}}, "unknown config key housekeeper.leader_lease"),
        ({"housekeeper": 5}, "housekeeper must be a table"),
        ({"sync_interval": 0.01}, "sync_interval"),
        ({"sync_interval": math.nan}, "sync_interval"),
    ],
)
def test_bad_housekeeper_keys_name_the_key(over: dict[str, Any], text: str) -> None:
    with pytest.raises(ConfigError, match=text.replace(".", r"\.")):
        GatewayConfig.from_mapping(base(**over))


def test_housekeeper_field_must_be_the_dataclass() -> None:
    with pytest.raises(ConfigError, match="housekeeper must be"):
        GatewayConfig(
            masters="m:1",
            redis="redis://h:1/0",
            secret="x" * 16,
            allow_anonymous=True,
            housekeeper={"enabled": False},  # type: ignore[arg-type]
        )
    assert not HousekeeperConfig(enabled=False).enabled


def test_poison_batch_keys() -> None:
    group = {"name": "g1", "topics": ["demo"], "max_redeliveries": 3, "dlq_topic": "dead"}
    cfg = GatewayConfig.from_mapping(base(groups=[group], produce_topics=["dead"]))
    g = cfg.group("g1")
    assert g is not None
    assert (g.max_redeliveries, g.dlq_topic) == (3, "dead")
    assert GatewayConfig.from_mapping(base()).groups[0].max_redeliveries == 0


@pytest.mark.parametrize(
    ("group", "produce", "text"),
    [
        ({"max_redeliveries": 3}, ["dead"], "go together"),
        ({"dlq_topic": "dead"}, ["dead"], "go together"),
        ({"max_redeliveries": -1, "dlq_topic": "dead"}, ["dead"], "max_redeliveries"),
        ({"max_redeliveries": True, "dlq_topic": "dead"}, ["dead"], "max_redeliveries"),
        ({"max_redeliveries": 2, "dlq_topic": "dead"}, [], "one of produce_topics"),
        ({"max_redeliveries": 2, "dlq_topic": "demo"}, ["demo"], "must not be a topic"),
        ({"max_redeliveries": 2, "dlq_topic": 5}, ["dead"], "dlq_topic must be a string"),
        ({"max_redeliveries": 2, "dlq_topic": "bad topic"}, ["dead"], "dlq_topic"),
    ],
)
def test_bad_poison_batch_keys(group: dict[str, Any], produce: list[str], text: str) -> None:
    raw = {"name": "g1", "topics": ["demo"], **group}
    with pytest.raises(ConfigError, match=text):
        GatewayConfig.from_mapping(base(groups=[raw], produce_topics=produce))


def test_a_config_group_holds_the_engine_group_spec() -> None:
    """``[[groups]]`` is flat; the gateway holds it as the engine's spec plus the poison-batch
    fields, and names every bad field of both in one error, as before."""
    from tubemq_aio.gateway.config.tables import GroupConfig, GroupSpec, group_table
    from tubemq_aio.gateway.engine.data import ConsumeSettings

    raw = {"name": "gg", "topics": ["t"], "lease_ms": 30_000, "max_redeliveries": 2}
    group = group_table({**raw, "dlq_topic": "dead"}, 0)
    assert group.spec == GroupSpec(name="gg", topics=("t",), lease_ms=30_000)
    assert (group.max_redeliveries, group.dlq_topic) == (2, "dead")
    table = {**dataclasses.asdict(group.spec), **raw, "topics": ("t",), "dlq_topic": "dead"}
    assert group.table() == table
    settings = ConsumeSettings(masters="m:1", redis="redis://x", groups=(group.spec,))
    assert settings.groups == (group.spec,)
    for bad in ({"lease_ms": 5}, {"name": "g"}, {"topics": ()}, {"mode": "fanout"}):
        options: dict[str, Any] = {"name": "gg", "topics": ("t",), **bad}
        with pytest.raises(ConfigError) as spec_error:
            GroupSpec(**options)
        with pytest.raises(ConfigError) as config_error:
            group_table(options, 0)
        assert str(spec_error.value) == str(config_error.value)
    with pytest.raises(ConfigError) as both:
        group_table({**raw, "mode": "fanout", "topics": ["t", "dead"], "dlq_topic": "dead"}, 0)
    text = str(both.value)
    assert text.startswith("groups['gg']: ")
    assert text.count("groups['gg']") == 1
    assert "mode" in text
    assert "dlq_topic must not be a topic the group consumes" in text
    with pytest.raises(ConfigError, match="max_redeliveries > 0 and dlq_topic go together"):
        GroupConfig(spec=group.spec, max_redeliveries=1)
    with pytest.raises(ConfigError, match="spec must be a GroupSpec"):
        GroupConfig(spec=raw)  # type: ignore[arg-type]
