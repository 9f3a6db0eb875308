"""``[stream]`` and ``ui`` in the gateway config, and the ``/ui`` routes: off by default, the
page served with a policy that keeps it on its own origin, its session refused without an
``admin:`` scope."""

from __future__ import annotations

import math
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.support.gateway_fakes import ADMIN, BASE_CONFIG, CFG, READER, FakeEngine, fake_app
from tubemq_aio.errors import ConfigError
from tubemq_aio.gateway import GatewayConfig
from tubemq_aio.gateway.config.stream_config import StreamConfig
from tubemq_aio.gateway.dev import DevOptions, dev_config


def _config(**extra: Any) -> GatewayConfig:
    return GatewayConfig.from_mapping({**BASE_CONFIG, **extra})


def test_stream_defaults_and_a_valid_table() -> None:
    assert CFG.stream == StreamConfig()
    assert (CFG.stream.window, CFG.stream.max_window, CFG.ui) == (4, 64, False)
    got = _config(stream={"window": 8, "max_window": 16, "max_seconds": 60.0}, ui=True)
    assert (got.stream.window, got.stream.max_window, got.stream.max_seconds) == (8, 16, 60.0)
    assert got.ui is True


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ({"window": 0}, "stream.window"),
        ({"window": 9, "max_window": 8}, "stream.window must be <= stream.max_window"),
        ({"max_window": 257}, "stream.max_window"),
        ({"window": True}, "stream.window"),
        ({"window": 2.0}, "stream.window"),
        ({"wait_ms": 0}, "stream.wait_ms"),
        ({"wait_ms": 30001}, "stream.wait_ms"),
        ({"heartbeat_seconds": math.nan}, "stream.heartbeat_seconds"),
        ({"max_seconds": math.inf}, "stream.max_seconds"),
        ({"max_seconds": 0.5}, "stream.max_seconds"),
        ({"probe_interval_ms": 10}, "stream.probe_interval_ms"),
        ({"max_streams": -1}, "stream.max_streams"),
        ({"release_timeout": "5"}, "stream.release_timeout"),
        ({"windw": 4}, "windw"),
    ],
)
def test_bad_stream_settings_are_named(table: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError, match=words.replace(".", r"\.")):
        _config(stream=table)


def test_stream_must_be_a_table_and_ui_a_boolean() -> None:
    with pytest.raises(ConfigError, match="stream must be a table"):
        _config(stream=4)
    with pytest.raises(ConfigError, match="ui must be true or false"):
        _config(ui="yes")


def _client(config: GatewayConfig) -> TestClient:
    return TestClient(fake_app(FakeEngine({"g1": "clustering"}), config))


def test_ui_is_off_by_default() -> None:
    with _client(CFG) as c:
        assert c.get("/ui").status_code == 404
        assert c.get("/ui/session", headers=ADMIN).status_code == 404


def test_ui_page_and_session() -> None:
    keys = [
        {"key": "k-admin-1", "scopes": ["produce:*", "consume:*", "admin:*"]},
        {"key": "k-reader-1", "scopes": ["consume:g*"]},
    ]
    with _client(_config(ui=True, keys=keys)) as c:
        page = c.get("/ui")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        policy = page.headers["content-security-policy"]
        assert "default-src 'none'" in policy
        assert "connect-src 'self'" in policy
        assert "//" not in page.text.replace("http://", "").split("<script>")[0]  # no CDN
        assert "/v1/groups/" in page.text
        assert "/stream" in page.text
        assert c.get("/ui/session").status_code == 401
        refused = c.get("/ui/session", headers=READER)
        assert refused.status_code == 403
        assert "admin" in refused.json()["error"]["message"]
        me = c.get("/ui/session", headers=ADMIN).json()
        assert "admin:*" in me["scopes"]
        # not in the API document: the page is no API
        assert "/ui" not in c.get("/openapi.json").json()["paths"]


def test_the_dev_gateway_serves_the_ui() -> None:
    config = dev_config(DevOptions(masters=None, fake=True), "127.0.0.1:1", "redis://x/0", "k" * 32)
    assert config.ui is True
