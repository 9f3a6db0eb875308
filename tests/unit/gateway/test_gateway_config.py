"""GatewayConfig: every key validated, with the key named in the error; secrets not in repr."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from tubemq_aio.errors import ConfigError
from tubemq_aio.gateway import GatewayConfig

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


def base(**over: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "masters": "127.0.0.1:8715",
        "redis": "redis://127.0.0.1:6379/0",
        "secret": "0123456789abcdef-secret",
        "groups": [{"name": "g1", "topics": ["demo"]}],
        "keys": [{"key": "k-123456", "scopes": ["consume:*"]}],
    }
    data.update(over)
    return data


def test_from_toml_reads_the_issue_example(tmp_path: Path) -> None:
    path = tmp_path / "gw.toml"
    path.write_text(GOOD)
    cfg = GatewayConfig.from_toml(path)
    assert cfg.produce_topics == ("demo",)
    group = cfg.group("g1")
    assert group is not None
    assert group.topics == ("demo",)
    assert group.lease_ms == 60000
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
    ],
)
def test_bad_values_name_the_key(over: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace("[", r"\[").replace("]", r"\]")):
        GatewayConfig.from_mapping(base(**over))


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
