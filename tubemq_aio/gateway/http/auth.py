"""API-key authentication and scope checks.

``Authorization: Bearer <key>``: the key is hashed with SHA-256 and compared in constant time
against every configured digest (no early exit, so timing reveals nothing about which key was
close). Scopes are ``produce:<topic glob>``, ``consume:<group glob>``, ``admin:<group glob>``.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from tubemq_aio.errors import TubeMQError
from tubemq_aio.gateway.config import ApiKey

__all__ = ["ANONYMOUS", "AuthError", "Authenticator", "ForbiddenScopeError"]

#: The principal of requests without a key when ``allow_anonymous`` is set and no key is
#: configured (a development setup); with keys it gets ``anonymous_scopes`` (default none).
ANONYMOUS = ApiKey(name="anonymous", digest=b"", scopes=("produce:*", "consume:*", "admin:*"))


class AuthError(TubeMQError):
    """No key, a malformed header or an unknown key (HTTP 401)."""


class ForbiddenScopeError(TubeMQError):
    """The key is valid but lacks the scope for this resource (HTTP 403)."""


@dataclass(frozen=True, slots=True)
class Authenticator:
    """Turns an ``Authorization`` header into the :class:`ApiKey` it names.

    Attributes:
        keys: the configured keys.
        allow_anonymous: requests with no header act as ``anonymous``.
        anonymous_scopes: the scopes of ``anonymous`` (None: those of :data:`ANONYMOUS`).
    """

    keys: tuple[ApiKey, ...]
    allow_anonymous: bool = False
    anonymous_scopes: tuple[str, ...] | None = None

    def authenticate(self, header: str | None) -> ApiKey:
        """The principal for ``header``.

        Raises:
            AuthError: missing (and anonymous not allowed), not ``Bearer``, or unknown key.
        """
        if header is None or not header.strip():
            if self.allow_anonymous:
                if self.anonymous_scopes is None:
                    return ANONYMOUS
                return ApiKey(name="anonymous", digest=b"", scopes=self.anonymous_scopes)
            raise AuthError("missing Authorization: Bearer <key>")
        scheme, _, presented = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not presented.strip():
            raise AuthError("Authorization must be 'Bearer <key>'")
        digest = hashlib.sha256(presented.strip().encode("utf-8", "surrogatepass")).digest()
        found: ApiKey | None = None
        for key in self.keys:
            if hmac.compare_digest(digest, key.digest) and found is None:
                found = key
        if found is None:
            raise AuthError("unknown API key")
        return found

    @staticmethod
    def require(principal: ApiKey, kind: str, resource: str) -> None:
        """Check that ``principal`` has a ``kind`` scope covering ``resource``.

        Raises:
            ForbiddenScopeError: it does not.
        """
        if not principal.allows(kind, resource):
            raise ForbiddenScopeError(f"this key has no {kind}:{resource} scope")
