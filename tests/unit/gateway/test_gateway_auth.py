"""API keys: Bearer parsing, SHA-256 digests, scopes by glob."""

from __future__ import annotations

import hashlib

import pytest

from tubemq_aio.errors import ConfigError
from tubemq_aio.gateway.config.tables import ApiKey
from tubemq_aio.gateway.errors import AuthError, ForbiddenScopeError
from tubemq_aio.gateway.http.auth import ANONYMOUS, Authenticator

KEY = ApiKey(
    name="k", digest=hashlib.sha256(b"k-123456").digest(), scopes=("produce:de*", "admin:g1")
)
AUTH = Authenticator((KEY,))


def test_valid_key() -> None:
    assert AUTH.authenticate("Bearer k-123456") is KEY
    assert AUTH.authenticate("bearer   k-123456 ") is KEY


@pytest.mark.parametrize(
    "header", [None, "", "Bearer", "Bearer ", "Basic k-123456", "k-123456", "Bearer k-1234567"]
)
def test_refused_headers(header: str | None) -> None:
    with pytest.raises(AuthError):
        AUTH.authenticate(header)


def test_anonymous_only_when_allowed() -> None:
    assert Authenticator((), allow_anonymous=True).authenticate(None) is ANONYMOUS
    with pytest.raises(AuthError):
        Authenticator((KEY,), allow_anonymous=True).authenticate("Bearer wrong-key")


def test_scopes() -> None:
    Authenticator.require(KEY, "produce", "demo")
    Authenticator.require(KEY, "admin", "g1")
    for kind, resource in (("produce", "other"), ("consume", "g1"), ("admin", "g10")):
        with pytest.raises(ForbiddenScopeError):
            Authenticator.require(KEY, kind, resource)


def test_anonymous_scopes_never_exceed_a_named_key_by_default(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from tubemq_aio.gateway import GatewayConfig
    from tubemq_aio.gateway.app import create_app

    common = {"masters": "m:1", "redis": "redis://r:1/0", "secret": "s" * 32}
    keyed = GatewayConfig.from_mapping(
        {**common, "allow_anonymous": True, "keys": [{"key": "k-123456", "scopes": ["consume:*"]}]}
    )
    assert keyed.anonymous_grant() == ()
    with caplog.at_level("WARNING", logger="tubemq_aio.gateway"):
        app = create_app(keyed)
    assert "allow_anonymous" in caplog.text
    anonymous = app.state.gateway.auth.authenticate(None)
    for kind in ("produce", "consume", "admin"):
        with pytest.raises(ForbiddenScopeError):
            Authenticator.require(anonymous, kind, "g1")
    chosen = GatewayConfig.from_mapping(
        {**common, "allow_anonymous": True, "anonymous_scopes": ["consume:public-*"]}
    )
    principal = create_app(chosen).state.gateway.auth.authenticate(None)
    Authenticator.require(principal, "consume", "public-1")
    with pytest.raises(ForbiddenScopeError):
        Authenticator.require(principal, "admin", "public-1")
    dev = GatewayConfig.from_mapping({**common, "allow_anonymous": True})
    assert "admin:*" in dev.anonymous_grant()  # no key at all: a development setup
    with pytest.raises(ConfigError, match="anonymous_scopes"):  # not a scope
        GatewayConfig.from_mapping(
            {**common, "allow_anonymous": True, "anonymous_scopes": ["root"]}
        )
    with pytest.raises(ConfigError, match="needs allow_anonymous"):
        GatewayConfig.from_mapping(
            {**common, "keys": [{"key": "k-123456"}], "anonymous_scopes": ["consume:*"]}
        )


def test_one_key_cannot_take_every_long_poll_slot() -> None:
    import contextlib

    from tubemq_aio.gateway import GatewayConfig
    from tubemq_aio.gateway.app import create_app
    from tubemq_aio.gateway.errors import TooManyWaitersError

    keys = [{"key": "k-aaaaaaaa", "name": "a"}, {"key": "k-bbbbbbbb", "name": "b"}]
    config = GatewayConfig.from_mapping(
        {
            "masters": "m:1",
            "redis": "redis://r:1/0",
            "secret": "s" * 32,
            "keys": keys,
            "max_long_poll_waiters": 4,
        }
    )
    assert config.long_poll_share() == 2
    gateway = create_app(config).state.gateway
    with contextlib.ExitStack() as held:
        for _ in range(2):
            held.enter_context(gateway.long_poll_slot("a", 1000))
        with pytest.raises(TooManyWaitersError):
            held.enter_context(gateway.long_poll_slot("a", 1000))
        held.enter_context(gateway.long_poll_slot("a", 0))  # no wait: not a long poll
        held.enter_context(gateway.long_poll_slot("b", 1000))  # the other tenant still gets in
        assert dict(gateway.long_polls) == {"a": 2, "b": 1}
    assert not gateway.long_polls
    fixed = GatewayConfig.from_mapping(
        {
            "masters": "m:1",
            "redis": "redis://r:1/0",
            "secret": "s" * 32,
            "keys": keys,
            "max_long_polls_per_key": 7,
        }
    )
    assert fixed.long_poll_share() == 7


def test_verified_headers_are_remembered_within_the_cache_size() -> None:
    other = ApiKey(name="o", digest=hashlib.sha256(b"o-123456").digest(), scopes=())
    auth = Authenticator((KEY, other), cache_size=2)
    assert auth.authenticate("Bearer k-123456") is KEY
    assert auth.authenticate("Bearer k-123456") is KEY  # from the cache this time
    assert auth.authenticate("bearer k-123456") is KEY  # another text of the same key
    assert auth.authenticate("Bearer o-123456") is other  # the oldest text is forgotten
    assert list(auth._verified) == ["bearer k-123456", "Bearer o-123456"]
    for _ in range(3):  # refused headers are never remembered
        with pytest.raises(AuthError):
            auth.authenticate("Bearer unknown-1")
    assert "Bearer unknown-1" not in auth._verified
    assert auth.authenticate("Bearer k-123456") is KEY


def test_a_cache_size_of_zero_remembers_nothing() -> None:
    auth = Authenticator((KEY,), cache_size=0)
    assert auth.authenticate("Bearer k-123456") is KEY
    assert auth._verified == {}
