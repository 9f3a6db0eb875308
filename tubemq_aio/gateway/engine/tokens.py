"""Lease tokens: ``t1.`` + base64url(JSON payload) + ``.`` + base64url(truncated HMAC-SHA256).

No I/O. The payload names the lease (group, scope, partition key, lease id); the
MAC proves a replica of this deployment issued it, so a forged or altered token is refused before
Redis is asked anything. The only authority is the 128-bit lease id, compared inside Redis.

The one piece of state: the tokens this process issued are remembered (the latest
:data:`ISSUED_MEMO` of them, with their secret), so the ack of a lease granted here is not
verified again: a token this process signed with the same secret is one :func:`decode_token`
accepts, naming the same lease (about 37 µs of HMAC and JSON per acked fetch saved).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json

from tubemq_aio.gateway.errors import TokenError
from tubemq_aio.gateway.leases.lease_key import LeaseKey

__all__ = ["ISSUED_MEMO", "MAX_TOKEN_LENGTH", "decode_token", "encode_token", "verify_token"]

PREFIX = "t1."
MAC_BYTES = 16
#: Longest token accepted; longer input is refused without decoding it.
MAX_TOKEN_LENGTH = 1024
#: Tokens issued by this process remembered for :func:`decode_token` (the oldest go first).
ISSUED_MEMO = 4096
_issued: dict[tuple[bytes, str], LeaseKey] = {}


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(secret: bytes, signed: str) -> bytes:
    return hmac.new(secret, signed.encode("ascii"), hashlib.sha256).digest()[:MAC_BYTES]


def encode_token(claims: LeaseKey, secret: bytes) -> str:
    """Build the token for ``claims``, signed with ``secret``.

    Raises:
        TokenError: the token would be longer than :data:`MAX_TOKEN_LENGTH` (which
            :func:`decode_token` refuses), so it is never handed out.
    """
    payload = json.dumps(
        [claims.group, claims.scope, claims.partition_key, claims.lease_id],
        separators=(",", ":"),
        ensure_ascii=True,
    )
    signed = PREFIX + _b64(payload.encode("ascii"))
    token = signed + "." + _b64(_mac(secret, signed))
    if len(token) > MAX_TOKEN_LENGTH:
        raise TokenError(f"the lease token would exceed {MAX_TOKEN_LENGTH} characters")
    fields = (claims.group, claims.scope, claims.partition_key, claims.lease_id)
    if all(isinstance(f, str) and f for f in fields):  # what decode_token accepts
        if len(_issued) >= ISSUED_MEMO:
            del _issued[next(iter(_issued))]
        _issued[secret, token] = claims
    return token


def decode_token(token: str, secret: bytes) -> LeaseKey:
    """What ``token`` names: remembered when this process issued it with ``secret``, else
    verified by :func:`verify_token`.

    Raises:
        TokenError: wrong version, bad encoding, bad MAC or a payload of the wrong shape.
    """
    issued = _issued.get((secret, token))
    return verify_token(token, secret) if issued is None else issued


def verify_token(token: str, secret: bytes) -> LeaseKey:
    """Verify ``token`` (its MAC, canonical form and payload) and return what it names.

    Raises:
        TokenError: wrong version, bad encoding, bad MAC or a payload of the wrong shape.
    """
    if len(token) > MAX_TOKEN_LENGTH or not token.startswith(PREFIX):
        raise TokenError("not a lease token issued by this gateway")
    signed, dot, mac_text = token.rpartition(".")
    if not dot or signed == PREFIX[:-1]:
        raise TokenError("not a lease token issued by this gateway")
    try:
        mac = _unb64(mac_text)
        payload_raw = _unb64(signed[len(PREFIX) :])
    except (binascii.Error, ValueError):
        raise TokenError("lease token is not valid base64url") from None
    if not hmac.compare_digest(mac, _mac(secret, signed)) or _b64(mac) != mac_text:
        # the canonical form only: no padding, no +/ alphabet, no changed unused bits
        raise TokenError("lease token signature does not match (forged or altered)")
    if _b64(payload_raw) != signed[len(PREFIX) :]:
        raise TokenError("lease token is not in its canonical base64url form")
    try:
        fields = json.loads(payload_raw)
    except ValueError:
        raise TokenError("lease token payload is not JSON") from None
    if (
        not isinstance(fields, list)
        or len(fields) != 4
        or not all(isinstance(f, str) and f for f in fields)
    ):
        raise TokenError("lease token payload has the wrong shape")
    return LeaseKey(*fields)
