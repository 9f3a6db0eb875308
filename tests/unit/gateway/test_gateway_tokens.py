"""Lease tokens: round trip, and every forgery or alteration refused (pure, no I/O)."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tubemq_aio.gateway.engine.tokens import (
    ISSUED_MEMO,
    MAX_TOKEN_LENGTH,
    decode_token,
    encode_token,
    verify_token,
)
from tubemq_aio.gateway.errors import TokenError
from tubemq_aio.gateway.leases.lease_key import LeaseKey

SECRET = b"s" * 32
CLAIMS = LeaseKey("g1", "b:client-1", "1:demo:0", "ab" * 16)
text = st.text(min_size=1, max_size=40)


@given(text, text, text, text)
def test_round_trip(group: str, scope: str, pk: str, lease: str) -> None:
    claims = LeaseKey(group, scope, pk, lease)
    try:
        token = encode_token(claims, SECRET)
    except TokenError:
        # Only claims whose escaped JSON outgrows the limit are refused, never handed out.
        assert len(json.dumps([group, scope, pk, lease], ensure_ascii=True)) * 4 // 3 > 900
        return
    assert len(token) <= MAX_TOKEN_LENGTH
    assert token.startswith("t1.")
    assert "/" not in token
    assert "+" not in token
    assert decode_token(token, SECRET) == claims  # remembered: issued by this process
    assert verify_token(token, SECRET) == claims  # and the full check agrees


def test_issued_tokens_are_remembered_per_secret_and_bounded() -> None:
    token = encode_token(CLAIMS, SECRET)
    assert decode_token(token, SECRET) is CLAIMS  # no second verification
    with pytest.raises(TokenError, match="signature"):  # remembered under its own secret only
        decode_token(token, b"t" * 32)
    altered = token[:-1] + ("A" if token[-1] != "A" else "B")
    with pytest.raises(TokenError):
        decode_token(altered, SECRET)
    for i in range(ISSUED_MEMO):  # the oldest is forgotten, and still verifies
        encode_token(LeaseKey("g1", "c", "1:demo:0", f"{i:032x}"), SECRET)
    again = decode_token(token, SECRET)
    assert again == CLAIMS
    assert again is not CLAIMS


def test_other_secret_refused() -> None:
    with pytest.raises(TokenError, match="signature"):
        decode_token(encode_token(CLAIMS, SECRET), b"t" * 32)


@given(st.integers(min_value=0, max_value=200), st.sampled_from("AQgw_-x"))
def test_any_altered_character_refused(position: int, char: str) -> None:
    token = encode_token(CLAIMS, SECRET)
    i = position % len(token)
    altered = token[:i] + char + token[i + 1 :]
    if altered != token:
        with pytest.raises(TokenError):
            decode_token(altered, SECRET)


def test_forged_payload_with_copied_mac_refused() -> None:
    token = encode_token(CLAIMS, SECRET)
    mac = token.rsplit(".", 1)[1]
    payload = base64.urlsafe_b64encode(b'["g1","c","1:demo:0","00"]').rstrip(b"=").decode()
    with pytest.raises(TokenError):
        decode_token(f"t1.{payload}.{mac}", SECRET)


@pytest.mark.parametrize(
    "bad",
    ["", "t1.", "t1..", "t2.abc.def", "x" * (MAX_TOKEN_LENGTH + 1), "t1.!!!.???", "t1.abc"],
)
def test_garbage_refused(bad: str) -> None:
    with pytest.raises(TokenError):
        decode_token(bad, SECRET)


def test_well_signed_payload_of_the_wrong_shape_refused() -> None:
    import hashlib
    import hmac

    for raw in (b'{"a":1}', b'["a","b"]', b'["a","b","c",""]', b"not json"):
        signed = "t1." + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        mac = hmac.new(SECRET, signed.encode(), hashlib.sha256).digest()[:16]
        token = signed + "." + base64.urlsafe_b64encode(mac).rstrip(b"=").decode()
        with pytest.raises(TokenError):
            decode_token(token, SECRET)


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
            decode_token(bad, SECRET)
    assert decode_token(token, SECRET) == CLAIMS
