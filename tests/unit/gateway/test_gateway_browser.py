"""What a browser gets: ``/docs`` and ``/redoc`` with assets served by the gateway itself (no
CDN, so they work without internet access), and CORS off by default or as configured."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from tests.support.gateway_fakes import ADMIN, BASE_CONFIG, CFG, FakeEngine, fake_app
from tubemq_aio.errors import ConfigError, TubeMQError
from tubemq_aio.gateway import GatewayConfig, create_app
from tubemq_aio.gateway.config.cors import CorsConfig

ORIGIN = "https://app.example.com"


def _client(config: GatewayConfig) -> TestClient:
    engine = FakeEngine({"g1": "clustering"})
    engine.add("1:demo:0", b"a1")
    return TestClient(fake_app(engine, config))


@pytest.fixture
def client() -> Iterator[TestClient]:
    with _client(CFG) as c:
        yield c


@pytest.fixture
def cors_client() -> Iterator[TestClient]:
    with _client(
        GatewayConfig.from_mapping({**BASE_CONFIG, "cors": {"allow_origins": [ORIGIN]}})
    ) as c:
        yield c


def test_docs_pages_load_their_assets_from_the_gateway(client: TestClient) -> None:
    for page, script in (("/docs", "swagger-ui-bundle.js"), ("/redoc", "redoc.standalone.js")):
        r = client.get(page)
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("text/html")
        sources = re.findall(r"""(?:src|href)=["']([^"']+)["']""", r.text)
        assert f"/docs/assets/{script}" in sources, sources
        # nothing from another host: the page works on a network without internet access
        assert not [s for s in sources if "//" in s], sources
        assert "/openapi.json" in r.text
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png"):
        r = client.get(f"/docs/assets/{asset}")
        assert r.status_code == 200, asset
        assert len(r.content) > 1000, asset
    assert "SwaggerUIBundle" in client.get("/docs/assets/swagger-ui-bundle.js").text
    assert client.get("/docs/assets/../config.py").status_code == 404
    assert client.get("/docs/assets/nope.js").status_code == 404


def test_docs_pages_follow_a_mount_prefix() -> None:
    inner = create_app(CFG)
    outer = FastAPI()
    outer.mount("/mq", inner)
    with TestClient(outer) as c:
        page = c.get("/mq/docs").text
        assert "/mq/docs/assets/swagger-ui-bundle.js" in page
        assert "/mq/openapi.json" in page
        assert c.get("/mq/docs/assets/swagger-ui.css").status_code == 200


def test_docs_can_be_turned_off() -> None:
    with _client(GatewayConfig.from_mapping({**BASE_CONFIG, "docs": False})) as c:
        for path in ("/docs", "/redoc", "/docs/assets/swagger-ui-bundle.js"):
            assert c.get(path).status_code == 404, path
        assert c.get("/openapi.json").status_code == 200
    with pytest.raises(ConfigError, match="docs must be true or false"):
        GatewayConfig.from_mapping({**BASE_CONFIG, "docs": "yes"})


def test_docs_without_the_assets_package_is_a_clear_config_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "fastapi_offline", None)  # as if not installed
    with pytest.raises(ConfigError, match="fastapi-offline"):
        create_app(CFG)
    no_docs = GatewayConfig.from_mapping({**BASE_CONFIG, "docs": False})
    assert create_app(no_docs).openapi()["info"]["title"]


def test_cors_is_off_by_default(client: TestClient) -> None:
    r = client.options(
        "/v1/groups/g1/fetch",
        headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"},
    )
    assert "access-control-allow-origin" not in r.headers
    r = client.post("/v1/groups/g1/fetch", json={}, headers={**ADMIN, "Origin": ORIGIN})
    assert r.status_code == 200
    assert "access-control-allow-origin" not in r.headers


def test_cors_preflight_and_simple_request(cors_client: TestClient) -> None:
    preflight = {
        "Origin": ORIGIN,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type",
    }
    r = cors_client.options("/v1/groups/g1/fetch", headers=preflight)
    assert r.status_code == 200, r.text
    assert r.headers["access-control-allow-origin"] == ORIGIN
    assert "POST" in r.headers["access-control-allow-methods"]
    allowed = r.headers["access-control-allow-headers"].lower()
    assert "authorization" in allowed
    assert "content-type" in allowed
    assert r.headers["access-control-max-age"] == "600"
    assert "access-control-allow-credentials" not in r.headers
    # an origin not listed gets no permission
    r = cors_client.options(
        "/v1/groups/g1/fetch", headers={**preflight, "Origin": "https://evil.example"}
    )
    assert r.status_code == 400
    assert "access-control-allow-origin" not in r.headers
    # the actual request, and an error answer, carry the headers a browser needs to read them
    r = cors_client.post("/v1/groups/g1/fetch", json={}, headers={**ADMIN, "Origin": ORIGIN})
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == ORIGIN
    assert "retry-after" in r.headers["access-control-expose-headers"].lower()
    r = cors_client.post("/v1/groups/g1/fetch", json={}, headers={"Origin": ORIGIN})
    assert r.status_code == 401
    assert r.headers["access-control-allow-origin"] == ORIGIN
    assert r.json()["error"]["code"]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"allow_origins": ["app.example.com"]}, "not '\\*' or scheme://host"),
        ({"allow_origins": ["https://a.example/path"]}, "not '\\*' or scheme://host"),
        ({"allow_origins": ["*", ORIGIN]}, "stands alone"),
        ({"allow_origins": ["*"], "allow_credentials": True}, "explicit origins"),
        ({"allow_origins": [ORIGIN], "allow_methods": ["BREW"]}, "allow_methods"),
        ({"allow_origins": [ORIGIN], "allow_headers": ["bad header"]}, "not a header name"),
        ({"allow_origins": [ORIGIN], "max_age": -1}, "max_age"),
        ({"allow_origins": [ORIGIN], "max_age": True}, "max_age"),
        ({"allow_origins": ORIGIN}, "list of strings"),
        ({"allow_origin": [ORIGIN]}, "unknown config key cors.allow_origin"),
        ("on", "must be a table"),
    ],
)
def test_bad_cors_settings_are_refused(table: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        GatewayConfig.from_mapping({**BASE_CONFIG, "cors": table})
    assert isinstance(info.value, TubeMQError)


def test_cors_accepts_any_origin_and_ipv6_hosts() -> None:
    assert CorsConfig(allow_origins=("*",)).enabled
    assert CorsConfig(allow_origins=("http://[::1]:8080", "http://localhost:3000")).enabled
    assert not CorsConfig().enabled
