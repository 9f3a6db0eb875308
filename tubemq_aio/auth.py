"""Authentication: the request signature and the tokens a producer carries (sans-I/O).

docs/protocol/wire.md §6. The signature is::

    URLEncode(Base64(HMAC-SHA1(key=UTF8(password), msg=UTF8(user + str(timestamp) + str(nonce)))))

:class:`TokenState` stores what the master hands out and says what goes into the next master
request and into every send. Nothing here reads a clock or a random source: the wall-clock
timestamp (milliseconds since the epoch) and the nonce are arguments.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass, field
from urllib.parse import quote

from tubemq_aio.checks import Checks
from tubemq_aio.protocol.producer_master_values import (
    AuthenticateInfo,
    BrokerAuthorization,
    MasterAuthorization,
    MasterCertificate,
)

__all__ = [
    "INITIAL_VISIT_TOKEN",
    "MAX_NONCE",
    "Credentials",
    "TokenState",
    "broker_token",
    "sign",
]

#: ``visitAuthorizedToken`` sent to brokers before the master issued one (§5.1).
INITIAL_VISIT_TOKEN = -2
#: Nonces are non-negative ints below this bound (Java ``Integer.MAX_VALUE``).
MAX_NONCE = 2**31 - 1


def sign(user_name: str, password: str, timestamp_ms: int, nonce: int) -> str:
    """The URL-encoded signature of ``AuthenticateInfo`` (§6.2).

    ``sign("admin", "secret", 1700000000000, 12345) == "GzIEn3jIHQZaZeKFky5I832KCzg%3D"``.

    Args:
        user_name: the user.
        password: the user's secret (the HMAC key).
        timestamp_ms: milliseconds since the epoch, as sent in ``timestamp``.
        nonce: the non-negative random int sent in ``nonce``.

    Returns:
        The signature text: Base64 with padding, then form-URL-encoded (``+ / =`` escaped).
    """
    message = f"{user_name}{timestamp_ms}{nonce}".encode()
    digest = hmac.new(password.encode(), message, hashlib.sha1).digest()
    return quote(base64.b64encode(digest).decode("ascii"), safe="")


def broker_token(user_name: str, timestamp_ms: int, nonce: int, signature: str) -> str:
    """The broker-style token string ``"user timestamp nonce signature"`` (single spaces, §6.2).

    Sent to brokers as ``authAuthorizedToken`` when the master issued none (:class:`TokenState`).
    """
    return f"{user_name} {timestamp_ms} {nonce} {signature}"


@dataclass(frozen=True, slots=True)
class Credentials:
    """A user name and password for authenticating at the master.

    Attributes:
        user_name: the user; non-blank.
        password: the secret used as HMAC key; not shown by ``repr``.
    """

    user_name: str
    password: str = field(repr=False)

    def __post_init__(self) -> None:
        checks = Checks("Credentials")
        checks.text("user_name", self.user_name)
        if not isinstance(self.password, str):  # never echoed, not even its type name
            checks.problem("password must be a string")
        checks.done()

    def __str__(self) -> str:
        return f"Credentials(user_name={self.user_name!r})"

    def authenticate(self, timestamp_ms: int, nonce: int) -> AuthenticateInfo:
        """Fresh signed credentials.

        Args:
            timestamp_ms: wall-clock milliseconds since the epoch (the master accepts ±20 s).
            nonce: a random int in ``[0, MAX_NONCE)``.

        Raises:
            ConfigError: the timestamp is not an ``int`` >= 0 or the nonce is out of range.
        """
        checks = Checks("Credentials.authenticate")
        checks.integer("timestamp_ms", timestamp_ms, low=0)
        checks.integer("nonce", nonce, low=0, high=MAX_NONCE - 1)
        checks.done()
        return AuthenticateInfo(
            self.user_name,
            timestamp_ms,
            nonce,
            sign(self.user_name, self.password, timestamp_ms, nonce),
        )


class TokenState:
    """Tokens from the master and the ``authInfo`` of the next requests (§6.3).

    Without credentials, master requests carry no ``authInfo`` and sends carry the visit token
    only. With credentials, register and close carry fresh signed credentials; a heartbeat carries
    them too when the previous heartbeat asked for them (``requireAuth``) or when the master never
    issued an auth token. Only when it did (a custom master handler) does the heartbeat carry that
    token instead, as the Java client does. The stock master rejects token-only heartbeats and
    never issues a token (§6.4), so against it every master request is fully authenticated.

    Brokers with produce or consume authentication on refuse calls whose ``authAuthorizedToken``
    is blank (415). Since the stock master never issues one, the broker token is then the
    broker-style signed string (:func:`broker_token`), renewed with every signed register or
    heartbeat; a master-issued token takes precedence.

    Args:
        credentials: the user to authenticate as, or ``None`` when authentication is off.
    """

    __slots__ = (
        "_auth_token",
        "_broker_auth",
        "_credentials",
        "_require_auth",
        "_signed_token",
        "_visit_token",
    )

    def __init__(self, credentials: Credentials | None = None) -> None:
        self._credentials = credentials
        self._visit_token = INITIAL_VISIT_TOKEN
        self._auth_token: str | None = None
        self._require_auth = False
        self._signed_token: str | None = None
        self._broker_auth = BrokerAuthorization(INITIAL_VISIT_TOKEN, None)

    def __repr__(self) -> str:
        return (
            f"<TokenState auth={'on' if self._credentials else 'off'} "
            f"visit_token={self._visit_token} auth_token={'set' if self._auth_token else 'none'} "
            f"require_auth={self._require_auth}>"
        )

    @property
    def visit_token(self) -> int:
        """The last visit token from the master (-2 before any)."""
        return self._visit_token

    @property
    def auth_token(self) -> str | None:
        """The last auth token the master issued, or ``None``."""
        return self._auth_token

    def apply(
        self, authorization: MasterAuthorization | None, *, require_auth: bool = False
    ) -> None:
        """Store the tokens of a register or heartbeat response.

        The visit token is always overwritten; the auth token only when non-blank (§6.3).

        Args:
            authorization: the response's ``authorizedInfo``, if any.
            require_auth: the heartbeat response's ``requireAuth`` flag.
        """
        if require_auth:
            self._require_auth = True
        if authorization is None:
            return
        self._visit_token = authorization.visit_token
        token = authorization.auth_token
        if token is not None and token.strip():
            self._auth_token = token
        self._set_broker_auth()

    def _set_broker_auth(self) -> None:
        self._broker_auth = BrokerAuthorization(
            self._visit_token, self._auth_token or self._signed_token
        )

    def _signed(self, timestamp_ms: int, nonce: int) -> MasterCertificate:
        """Fresh credentials for the master; also renews the broker-style token."""
        assert self._credentials is not None
        info = self._credentials.authenticate(timestamp_ms, nonce)
        self._signed_token = broker_token(
            info.user_name, info.timestamp, info.nonce, info.signature
        )
        self._set_broker_auth()
        return MasterCertificate(authenticate=info)

    def register_auth(self, timestamp_ms: int, nonce: int) -> MasterCertificate | None:
        """``authInfo`` for a register (or close) request; ``None`` when authentication is off."""
        if self._credentials is None:
            return None
        return self._signed(timestamp_ms, nonce)

    close_auth = register_auth

    def heartbeat_auth(self, timestamp_ms: int, nonce: int) -> MasterCertificate | None:
        """``authInfo`` for the next heartbeat; clears the ``requireAuth`` flag when it is used."""
        if self._credentials is None:
            return None
        if self._require_auth or not self._auth_token:
            self._require_auth = False
            return self._signed(timestamp_ms, nonce)
        return MasterCertificate(authorized_token=self._auth_token)

    def broker_auth(self) -> BrokerAuthorization:
        """``authInfo`` for every send: the visit token (and auth token if any), always set."""
        return self._broker_auth
