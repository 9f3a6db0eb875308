"""Client configuration: validation, master lists and URLs."""

from __future__ import annotations

import dataclasses
import ssl

import pytest

from tubemq_aio.config import ClientConfig, Credentials, HostPort, parse_host_port, parse_masters
from tubemq_aio.errors import ConfigError


def test_masters_string_is_parsed_and_deduplicated() -> None:
    cfg = ClientConfig(masters="127.0.0.1:8715, 127.0.0.2:9000,127.0.0.1:8715")  # type: ignore[arg-type]
    assert cfg.masters == (HostPort("127.0.0.1", 8715), HostPort("127.0.0.2", 9000))


def test_default_master_port() -> None:
    assert parse_masters(["example"]) == (HostPort("example", 8715),)


@pytest.mark.parametrize("bad", ["", " , ", "host:0", "host:70000", ":8715", "h:p"])
def test_bad_master_lists(bad: str) -> None:
    with pytest.raises(ConfigError):
        parse_masters(bad)


def test_config_error_is_value_error() -> None:
    with pytest.raises(ValueError, match="rpc_timeout"):
        ClientConfig(masters=parse_masters("h:1"), rpc_timeout=1.0)


def test_host_port_requires_port_without_default() -> None:
    with pytest.raises(ConfigError):
        parse_host_port("host")


def test_frozen() -> None:
    cfg = ClientConfig(masters=parse_masters("h:1"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.rpc_timeout = 5.0  # type: ignore[misc]


def test_from_url_options() -> None:
    cfg = ClientConfig.from_url(
        "tubemq://h1:8715,h2:8716?rpc_timeout=5&connection_reuse=false&client_host=10.0.0.1"
    )
    assert cfg.masters == (HostPort("h1", 8715), HostPort("h2", 8716))
    assert cfg.rpc_timeout == 5.0
    assert cfg.connection_reuse is False
    assert cfg.client_host == "10.0.0.1"
    assert cfg.ssl_context is None


def test_from_url_tls_and_overrides() -> None:
    cfg = ClientConfig.from_url("tubemq://h1?tls=true", rpc_timeout=20.0)
    assert isinstance(cfg.ssl_context, ssl.SSLContext)
    assert cfg.rpc_timeout == 20.0
    assert isinstance(ClientConfig.from_url("tubemqs://h1").ssl_context, ssl.SSLContext)


@pytest.mark.parametrize(
    "url",
    [
        "http://h1:8715",
        "tubemq://h1?nope=1",
        "tubemq://h1?rpc_timeout=abc",
        "tubemq://h1?connection_reuse=maybe",
        "tubemq://h1?ssl_context=x",
        "tubemq://",
        # a key given twice: which one was meant is unknowable (the last one was taken)
        "tubemq://h1?rpc_timeout=5&rpc_timeout=6",
        "h1:8715?readTimeout=5000&rpc_timeout=6",
    ],
)
def test_from_url_errors(url: str) -> None:
    with pytest.raises(ConfigError):
        ClientConfig.from_url(url)


def test_credentials_hide_password_and_need_user() -> None:
    assert "secret" not in repr(Credentials(user_name="u", password="secret"))
    with pytest.raises(ConfigError):
        Credentials(user_name=" ", password="x")
