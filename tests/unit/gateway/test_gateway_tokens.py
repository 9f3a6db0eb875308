"""Lease tokens: round trip, and every forgery or alteration refused (pure, no I/O)."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.gateway_config_data import base
from tubemq_aio.gateway.app import create_app
from tubemq_aio.gateway.config.gateway_config import GatewayConfig
from tubemq_aio.gateway.config.limits import DEFAULT_TOKEN_CACHE_SIZE, MAX_TOKEN_CACHE_SIZE
from tubemq_aio.gateway.engine.tokens import (
    MAX_TOKEN_LENGTH,
    LeaseTokens,
    encode_token,
    verify_token,
)
from tubemq_aio.gateway.errors import TokenError
from tubemq_aio.gateway.leases.lease_key import LeaseKey

SECRET = b"s" * 32
OTHER = b"t" * 32
CLAIMS = LeaseKey("g1", "b:client-1", "1:demo:0", "ab" * 16)
text = st.text(min_size=1, max_size=40)


def decode_token(token: str, secret: bytes = SECRET) -> LeaseKey:
    """``token`` checked by a fresh app's tokens (nothing remembered)."""
    return LeaseTokens(secret).decode(token)


@given(text, text, text, text)
def test_round_trip(group: str, scope: str, pk: str, lease: str) -> None:
    claims = LeaseKey(group, scope, pk, lease)
    tokens = LeaseTokens(SECRET)
    try:
        token = tokens.encode(claims)
    except TokenError:
        # Only claims whose escaped JSON outgrows the limit are refused, never handed out.
        assert len(json.dumps([group, scope, pk, lease], ensure_ascii=True)) * 4 // 3 > 900
        return
    assert len(token) <= MAX_TOKEN_LENGTH
    assert token.startswith("t1.")
    assert "/" not in token
    assert "+" not in token
    assert tokens.decode(token) == claims  # remembered: issued by this app
    assert verify_token(token, SECRET) == claims  # and the full check agrees
    assert encode_token(claims, SECRET) == token


def test_issued_tokens_are_remembered_per_app_and_bounded() -> None:
    tokens = LeaseTokens(SECRET, cache_size=8)
    token = tokens.encode(CLAIMS)
    assert tokens.decode(token) is CLAIMS  # no second verification
    with pytest.raises(TokenError, match="signature"):  # another app, another secret
        LeaseTokens(OTHER).decode(token)
    altered = token[:-1] + ("A" if token[-1] != "A" else "B")
    with pytest.raises(TokenError):
        tokens.decode(altered)
    for i in range(8):  # the oldest is forgotten, and still verifies
        tokens.encode(LeaseKey("g1", "c", "1:demo:0", f"{i:032x}"))
        assert len(tokens) <= 8
    assert len(tokens) == 8
    again = tokens.decode(token)
    assert again == CLAIMS
    assert again is not CLAIMS
    assert LeaseTokens(SECRET).cache_size == DEFAULT_TOKEN_CACHE_SIZE == 4096


def test_two_apps_in_one_process_do_not_share_their_tokens() -> None:
    """Each app remembers only what it issued: a token of one is checked in full by the other
    (refused under another secret, a fresh LeaseKey under the same one)."""
    first, second, third = LeaseTokens(SECRET), LeaseTokens(OTHER), LeaseTokens(SECRET)
    token = first.encode(CLAIMS)
    assert first.decode(token) is CLAIMS
    assert (len(first), len(second), len(third)) == (1, 0, 0)
    with pytest.raises(TokenError, match="signature"):
        second.decode(token)
    verified = third.decode(token)  # same secret (two replicas): verified, not remembered
    assert verified == CLAIMS
    assert verified is not CLAIMS
    assert len(third) == 0


def test_the_apps_of_create_app_each_own_their_tokens() -> None:
    one = create_app(GatewayConfig.from_mapping(base())).state.gateway.tokens
    two = create_app(GatewayConfig.from_mapping(base(token_cache_size=2))).state.gateway.tokens
    assert one is not two
    assert (one.cache_size, two.cache_size) == (DEFAULT_TOKEN_CACHE_SIZE, 2)
    token = one.encode(CLAIMS)
    assert one.decode(token) is CLAIMS
    assert two.decode(token) is not CLAIMS  # the same secret: verified in full
    assert len(two) == 0
    for i in range(5):
        two.encode(LeaseKey("g1", "c", "1:demo:0", f"{i:032x}"))
    assert len(two) == 2


def test_a_cache_size_of_zero_remembers_nothing() -> None:
    tokens = LeaseTokens(SECRET, cache_size=0)
    token = tokens.encode(CLAIMS)
    assert len(tokens) == 0
    got = tokens.decode(token)
    assert got == CLAIMS
    assert got is not CLAIMS


def test_claims_of_a_shape_decode_refuses_are_not_remembered() -> None:
    tokens = LeaseTokens(SECRET)
    token = tokens.encode(LeaseKey("g1", "", "1:demo:0", "ab" * 16))
    assert len(tokens) == 0
    with pytest.raises(TokenError, match="shape"):
        tokens.decode(token)


@pytest.mark.parametrize(
    ("secret", "cache_size", "error", "words"),
    [
        ("s" * 32, 1, TypeError, "secret must be bytes"),
        (bytearray(SECRET), 1, TypeError, "secret must be bytes"),
        (None, 1, TypeError, "secret must be bytes"),
        (b"short", 1, ValueError, "at least 16 bytes"),
        (b"", 1, ValueError, "at least 16 bytes"),
        (SECRET, True, TypeError, "cache_size must be an int"),
        (SECRET, 1.0, TypeError, "cache_size must be an int"),
        (SECRET, float("nan"), TypeError, "cache_size must be an int"),
        (SECRET, float("inf"), TypeError, "cache_size must be an int"),
        (SECRET, "10", TypeError, "cache_size must be an int"),
        (SECRET, -1, ValueError, "cache_size must be in"),
        (SECRET, MAX_TOKEN_CACHE_SIZE + 1, ValueError, "cache_size must be in"),
        (SECRET, 2**100, ValueError, "cache_size must be in"),
    ],
)
def test_bad_settings_are_refused(
    secret: object, cache_size: object, error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words):
        LeaseTokens(secret, cache_size)  # type: ignore[arg-type]


def test_wrong_types_to_encode_and_decode_are_refused() -> None:
    tokens = LeaseTokens(SECRET)
    for bad in (None, 5, b"t1.abc.def", ["t1.abc.def"], {"t": 1}):
        with pytest.raises(TypeError, match="a lease token is a str"):
            tokens.decode(bad)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="a lease token is a str"):
            verify_token(bad, SECRET)  # type: ignore[arg-type]
    for claims in (None, ("g1", "c", "1:demo:0", "ab"), "g1"):
        with pytest.raises(TypeError, match="claims must be a LeaseKey"):
            tokens.encode(claims)  # type: ignore[arg-type]
    assert len(tokens) == 0
    huge = LeaseKey("g" * 2000, "c", "1:demo:0", "ab" * 16)
    with pytest.raises(TokenError, match="exceed"):
        tokens.encode(huge)
    assert len(tokens) == 0
    with pytest.raises(TokenError):
        tokens.decode("t1." + "A" * 10**6)


def test_other_secret_refused() -> None:
    with pytest.raises(TokenError, match="signature"):
        decode_token(encode_token(CLAIMS, SECRET), OTHER)


@given(st.integers(min_value=0, max_value=200), st.sampled_from("AQgw_-x"))
def test_any_altered_character_refused(position: int, char: str) -> None:
    token = encode_token(CLAIMS, SECRET)
    i = position % len(token)
    altered = token[:i] + char + token[i + 1 :]
    if altered != token:
        with pytest.raises(TokenError):
            decode_token(altered)


def test_forged_payload_with_copied_mac_refused() -> None:
    token = encode_token(CLAIMS, SECRET)
    mac = token.rsplit(".", 1)[1]
    payload = base64.urlsafe_b64encode(b'["g1","c","1:demo:0","00"]').rstrip(b"=").decode()
    with pytest.raises(TokenError):
        decode_token(f"t1.{payload}.{mac}")


@pytest.mark.parametrize(
    "bad",
    ["", "t1.", "t1..", "t2.abc.def", "x" * (MAX_TOKEN_LENGTH + 1), "t1.!!!.???", "t1.abc"],
)
def test_garbage_refused(bad: str) -> None:
    with pytest.raises(TokenError):
        decode_token(bad)


def test_well_signed_payload_of_the_wrong_shape_refused() -> None:
    import hashlib
    import hmac

    for raw in (b'{"a":1}', b'["a","b"]', b'["a","b","c",""]', b"not json"):
        signed = "t1." + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        mac = hmac.new(SECRET, signed.encode(), hashlib.sha256).digest()[:16]
        token = signed + "." + base64.urlsafe_b64encode(mac).rstrip(b"=").decode()
        with pytest.raises(TokenError):
            decode_token(token)


def test_only_the_canonical_encoding_is_accepted() -> None:
    token = encode_token(CLAIMS, SECRET)
    signed, _, mac = token.rpartition(".")
    payload = signed[len("t1.") :]
    raw_mac = base64.urlsafe_b64decode(mac + "=" * (-len(mac) % 4))
    std_mac = base64.b64encode(raw_mac).decode().rstrip("=")
    variants = [
        token + "=",  # padding appended
        f"{signed}.{mac}==",
        f"t1.{payload}=.{mac}",
    ]
    if std_mac != mac:  # the +/ alphabet
        variants.append(f"{signed}.{std_mac}")
    # the last character carries unused low bits: a different one decodes to the same bytes
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    for c in alphabet:
        other = mac[:-1] + c
        if other != mac and base64.urlsafe_b64decode(other + "=" * (-len(other) % 4)) == raw_mac:
            variants.append(f"{signed}.{other}")
    assert len(variants) >= 4
    for bad in variants:
        with pytest.raises(TokenError):
            decode_token(bad)
    assert decode_token(token) == CLAIMS
