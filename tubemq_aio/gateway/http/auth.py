"""API-key authentication and scope checks.

``Authorization: Bearer <key>``: the key is hashed with SHA-256 and compared in constant time
against every configured digest (no early exit, so timing reveals nothing about which key was
close). A header that passed is remembered by its exact text (at most ``cache_size`` of them), so
a client's next request costs one dictionary lookup instead of a hash and a pass over the keys;
only verified headers are remembered, so unknown keys cannot fill the cache. Scopes are
``produce:<topic glob>``, ``consume:<group glob>``, ``admin:<group glob>``.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field

from tubemq_aio.gateway.config.tables import ApiKey
from tubemq_aio.gateway.errors import AuthError, ForbiddenScopeError

__all__ = ["ANONYMOUS", "Authenticator"]

#: The principal of requests without a key when ``allow_anonymous`` is set and no key is
#: configured (a development setup); with keys it gets ``anonymous_scopes`` (default none).
ANONYMOUS = ApiKey(name="anonymous", digest=b"", scopes=("produce:*", "consume:*", "admin:*"))


@dataclass(frozen=True, slots=True)
class Authenticator:
    """Turns an ``Authorization`` header into the :class:`ApiKey` it names.

    Attributes:
        keys: the configured keys.
        allow_anonymous: requests with no header act as ``anonymous``.
        anonymous_scopes: the scopes of ``anonymous`` (None: those of :data:`ANONYMOUS`).
        cache_size: verified headers remembered (the oldest is forgotten first; 0: none).
    """

    keys: tuple[ApiKey, ...]
    allow_anonymous: bool = False
    anonymous_scopes: tuple[str, ...] | None = None
    cache_size: int = 1024
    _verified: dict[str, ApiKey] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

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
        known = self._verified.get(header)
        if known is not None:
            return known
        found = self._verify(header)
        if self.cache_size > 0:
            if len(self._verified) >= self.cache_size:
                del self._verified[next(iter(self._verified))]
            self._verified[header] = found
        return found

    def _verify(self, header: str) -> ApiKey:
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

    @staticmethod
    def sees_group(principal: ApiKey, group: str) -> bool:
        """Whether ``principal`` may read ``group``'s state (a ``consume:`` or ``admin:``
        scope)."""
        return principal.allows("consume", group) or principal.allows("admin", group)

    @staticmethod
    def require_reader(principal: ApiKey, group: str) -> None:
        """Check :meth:`sees_group`.

        Raises:
            ForbiddenScopeError: it does not (403).
        """
        if not Authenticator.sees_group(principal, group):
            raise ForbiddenScopeError(f"this key has no consume:{group} or admin:{group} scope")
