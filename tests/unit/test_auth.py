"""Authentication (docs/protocol/wire.md §6): the signature test vector, the broker token, token
bookkeeping."""

from __future__ import annotations

import pytest

from tubemq_aio.auth import Credentials, TokenState, broker_token, sign
from tubemq_aio.errors import ConfigError
from tubemq_aio.protocol.producer_master_values import (
    AuthenticateInfo,
    BrokerAuthorization,
    MasterAuthorization,
    MasterCertificate,
)


def test_signature_vector_from_notes() -> None:
    assert sign("admin", "secret", 1700000000000, 12345) == "GzIEn3jIHQZaZeKFky5I832KCzg%3D"


def test_broker_token_format() -> None:
    assert broker_token("u", 1, 2, "s%3D") == "u 1 2 s%3D"


def test_credentials_sign_and_hide_password() -> None:
    creds = Credentials("admin", "secret")
    assert creds.authenticate(1700000000000, 12345) == AuthenticateInfo(
        "admin", 1700000000000, 12345, "GzIEn3jIHQZaZeKFky5I832KCzg%3D", ""
    )
    assert "secret" not in repr(creds)
    with pytest.raises(ConfigError):
        creds.authenticate(1, -1)
    with pytest.raises(ConfigError):
        Credentials(" ", "x")


def test_no_credentials() -> None:
    state = TokenState()
    assert state.register_auth(1, 2) is None
    assert state.heartbeat_auth(1, 2) is None
    assert state.close_auth(1, 2) is None
    assert state.broker_auth() == BrokerAuthorization(-2, None)


def test_tokens_stored_from_responses() -> None:
    state = TokenState()
    state.apply(MasterAuthorization(77, None))
    assert state.broker_auth() == BrokerAuthorization(77, None)
    state.apply(MasterAuthorization(78, "tok"))
    assert state.broker_auth() == BrokerAuthorization(78, "tok")
    state.apply(MasterAuthorization(79, "  "))  # blank auth token: keep the old one
    assert state.broker_auth() == BrokerAuthorization(79, "tok")
    before = state.broker_auth()
    state.apply(None)
    assert state.broker_auth() is before  # unchanged object, so encoders can cache


def test_heartbeat_uses_token_only_when_issued_and_not_required() -> None:
    state = TokenState(Credentials("admin", "secret"))
    full = MasterCertificate(
        authenticate=AuthenticateInfo("admin", 5, 6, sign("admin", "secret", 5, 6))
    )
    assert state.register_auth(5, 6) == full
    # The stock master never issues an auth token: every heartbeat is fully authenticated.
    assert state.heartbeat_auth(5, 6) == full
    state.apply(MasterAuthorization(1, "issued"))
    assert state.heartbeat_auth(5, 6) == MasterCertificate(authorized_token="issued")
    state.apply(None, require_auth=True)
    assert state.heartbeat_auth(5, 6) == full
    assert state.heartbeat_auth(5, 6) == MasterCertificate(authorized_token="issued")
    assert "auth=on" in repr(state)


def test_signed_broker_token_when_the_master_issues_none() -> None:
    """Brokers with authentication on refuse a blank ``authAuthorizedToken`` (415); the stock
    master issues none, so sends and broker calls carry the broker-style signed token, renewed
    by every signed master request (regression: it was blank, found on a real cluster)."""
    state = TokenState(Credentials("admin", "secret"))
    state.register_auth(5, 6)
    token = broker_token("admin", 5, 6, sign("admin", "secret", 5, 6))
    assert state.broker_auth() == BrokerAuthorization(-2, token)
    state.apply(MasterAuthorization(77, None))
    assert state.broker_auth() == BrokerAuthorization(77, token)
    state.heartbeat_auth(8, 9)
    assert state.broker_auth() == BrokerAuthorization(
        77, broker_token("admin", 8, 9, sign("admin", "secret", 8, 9))
    )
    state.apply(MasterAuthorization(78, "issued"))  # a master-issued token wins
    assert state.broker_auth() == BrokerAuthorization(78, "issued")
