"""``[tubemq]`` and ``tubemq://`` / ``tubemqs://`` masters: TLS and credentials towards a secured
cluster, with the password never in a repr or an error text."""

from __future__ import annotations

import logging
import ssl
from pathlib import Path
from typing import Any

import pytest

from tests.support.gateway_fakes import BASE_CONFIG
from tubemq_aio.errors import ConfigError
from tubemq_aio.gateway import GatewayConfig
from tubemq_aio.gateway.app import default_engine, default_producer
from tubemq_aio.gateway.config.report import render_config
from tubemq_aio.gateway.config.tubemq_access import TubeMQAccess, split_masters_url
from tubemq_aio.gateway.engine.service import ConsumeService
from tubemq_aio.tls import TlsFiles

SECRET_PASSWORD = "pw-Zq8-never-shown"
BASE: dict[str, Any] = {**BASE_CONFIG, "masters": "127.0.0.1:8715"}


def _config(**extra: Any) -> GatewayConfig:
    return GatewayConfig.from_mapping({**BASE, **extra})


def test_no_table_means_plain_tcp_without_credentials() -> None:
    config = _config()
    assert config.tubemq == TubeMQAccess()
    assert config.tubemq.client_options() == {}
    assert config.masters == "127.0.0.1:8715"


def test_table_gives_credentials_and_tls(tmp_path: Path) -> None:
    ca = _self_signed_ca(tmp_path)
    config = _config(
        tubemq={
            "user": "alice",
            "password": SECRET_PASSWORD,
            "tls": True,
            "tls_ca_file": str(ca),
            "tls_server_hostname": "tube.internal",
        }
    )
    options = config.tubemq.client_options()
    assert options["credentials"].user_name == "alice"
    assert options["credentials"].password == SECRET_PASSWORD
    assert isinstance(options["ssl_context"], ssl.SSLContext)
    assert options["ssl_context"].verify_mode == ssl.CERT_REQUIRED
    assert options["tls_server_hostname"] == "tube.internal"
    assert SECRET_PASSWORD not in repr(config)
    assert SECRET_PASSWORD not in str(config.tubemq)


def test_masters_url_is_split_into_addresses_credentials_and_tls() -> None:
    config = _config(masters=f"tubemqs://alice:{SECRET_PASSWORD}@10.0.0.1:8716,[::1]:8716")
    assert config.masters == "10.0.0.1:8716,[::1]:8716"
    assert config.tubemq.tls is True
    assert config.tubemq.user == "alice"
    assert config.tubemq.password == SECRET_PASSWORD
    assert SECRET_PASSWORD not in repr(config)
    plain = _config(masters="tubemq://h1:8715,h2")
    assert plain.masters == "h1:8715,h2:8715"
    assert plain.tubemq.tls is False
    assert plain.tubemq.credentials is None
    # percent-encoded user info, as the SDK's from_url reads it
    encoded = split_masters_url("tubemq://a%40b:p%3Aw@h:1", TubeMQAccess())[1]
    assert (encoded.user, encoded.password) == ("a@b", "p:w")


def test_tubemqs_url_takes_the_tls_files_of_the_table(tmp_path: Path) -> None:
    ca = _self_signed_ca(tmp_path)
    config = _config(masters="tubemqs://h:8716", tubemq={"tls_ca_file": str(ca)})
    assert config.tubemq.tls is True
    assert config.tubemq.tls_files == TlsFiles(str(ca))


def test_the_table_reads_back_as_its_keys(tmp_path: Path) -> None:
    """The TLS files are one value inside, and still the three keys a file writes (what
    ``tubemq-gateway check`` prints)."""
    ca = _self_signed_ca(tmp_path)
    table = {"tls": True, "tls_ca_file": str(ca), "tls_cert_file": str(ca), "framing": "standard"}
    access = TubeMQAccess.from_mapping(table)
    assert access.tls_files == TlsFiles(str(ca), str(ca))
    shown = {k: v for k, v in access.table().items() if v is not None}
    assert shown == table
    assert TubeMQAccess.from_mapping(shown) == access
    text = render_config(_config(tubemq=table), {})
    assert f"tls_ca_file = {str(ca)!r}".replace("'", '"') in text
    assert "tls_files" not in text


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"tubemq": {"user": "alice"}}, "go together"),
        ({"tubemq": {"user": " ", "password": "x"}}, "non-blank"),
        ({"tubemq": {"user": "alice", "password": ""}}, "non-empty"),
        ({"tubemq": {"tls": "yes"}}, "tls must be true or false"),
        ({"tubemq": {"tls_ca_file": "/ca.pem"}}, "needs tls = true"),
        ({"tubemq": {"tls": True, "tls_ca_file": "/no/such/ca.pem"}}, "is not a file"),
        ({"tubemq": {"tls": True, "tls_server_hostname": ""}}, "non-empty string"),
        ({"tubemq": {"password_file": "x"}}, "unknown config key tubemq.password_file"),
        ({"tubemq": "tls"}, "must be a table"),
        ({"masters": f"tubemq://alice:{SECRET_PASSWORD}@h:1?rpc_timeout=5"}, "\\[tubemq\\] table"),
        ({"masters": f"tubemq://alice:{SECRET_PASSWORD}@h:1/path"}, "path"),
        ({"masters": f"tubemq://alice{SECRET_PASSWORD}@h:1"}, "user:password"),
        ({"masters": f"http://alice:{SECRET_PASSWORD}@h:1"}, "not a valid"),
        ({"masters": f"alice:{SECRET_PASSWORD}@h:1"}, "not a valid"),
        ({"masters": "h:notaport"}, "masters: "),
        ({"tubemq": {"user": 7, "password": SECRET_PASSWORD}}, "non-blank string"),
        ({"tubemq": {"user": "alice", "password": 12345678}}, "non-empty string"),
        ({"tubemq": {"tls": True, "tls_key_file": __file__}}, "needs tls_cert_file"),
        (
            {
                "masters": f"tubemq://alice:{SECRET_PASSWORD}@h:1",
                "tubemq": {"user": "bob", "password": "x"},
            },
            "both give a user",
        ),
    ],
)
def test_bad_settings_are_refused_without_showing_the_password(
    extra: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        _config(**extra)
    assert SECRET_PASSWORD not in str(info.value)


def test_unloadable_tls_files_are_a_config_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    access = TubeMQAccess(tls=True, tls_files=TlsFiles(str(junk)))
    with pytest.raises(ConfigError, match=r"TLS CA file .* cannot be loaded"):
        access.ssl_context()


def test_the_producer_and_engine_get_the_options(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    ca = _self_signed_ca(tmp_path)
    config = _config(
        masters=f"tubemqs://alice:{SECRET_PASSWORD}@127.0.0.1:8716",
        tubemq={"tls_ca_file": str(ca), "tls_server_hostname": "localhost"},
    )
    producer = default_producer(config)
    assert producer.config.tls_server_hostname == "localhost"
    assert producer.config.credentials is not None
    assert producer.config.credentials.user_name == "alice"
    assert producer.config.ssl_context is not None
    engine = default_engine(config)
    assert isinstance(engine, ConsumeService)
    assert engine.settings.tubemq == config.tubemq
    sessions = engine.sessions.reach.client_options  # what every group's TubeMQ session gets
    assert sessions["credentials"] == producer.config.credentials
    assert isinstance(sessions["ssl_context"], ssl.SSLContext)
    assert sessions["tls_server_hostname"] == "localhost"
    for text in (repr(producer.config), repr(engine.settings), caplog.text):
        assert SECRET_PASSWORD not in text


def _self_signed_ca(tmp_path: Path) -> Path:
    """A CA bundle the ssl module can load (the system's, copied; no openssl needed)."""
    paths = ssl.get_default_verify_paths()
    source = next(
        (Path(p) for p in (paths.cafile, paths.openssl_cafile) if p and Path(p).is_file()), None
    )
    assert source is not None, "the test needs the system CA bundle (ca-certificates)"
    target = tmp_path / "ca.pem"
    target.write_bytes(source.read_bytes())
    return target
