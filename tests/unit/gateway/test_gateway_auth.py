"""API keys: Bearer parsing, SHA-256 digests, scopes by glob."""

from __future__ import annotations

import hashlib

import pytest

from tubemq_aio.gateway.auth import ANONYMOUS, Authenticator, AuthError, ForbiddenScopeError
from tubemq_aio.gateway.config import ApiKey

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
