"""RPC envelope: hand-derived bytes from docs/protocol/wire.md (§1.4) and server-side round
trips."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from tubemq_aio.errors import (
    LocalProtocolError,
    RemoteProtocolError,
    RemoteRpcError,
    ServerNotReadyError,
    ServiceNotPublishedError,
    StandbyMasterError,
)
from tubemq_aio.protocol.rpc import (
    SERVICE_OF_METHOD,
    Method,
    RpcRequest,
    ServiceType,
    decode_request,
    decode_response,
    encode_exception,
    encode_request,
    encode_success,
    request_head,
)


def test_request_bytes_match_notes() -> None:
    body = b"BODY"
    expected = (
        bytes.fromhex("02 08 00")  # RpcConnHeader{flag=0}
        + bytes.fromhex("04 08 01 10 03")  # RequestHeader{serviceType=1, protocolVer=3}
        + bytes.fromhex("0B")  # length of RequestBody below: 7 header bytes + 4 body bytes
        + bytes.fromhex("08 02 10 90 4E 1A 04")  # method=2, timeout=10000, request len 4
        + body
    )
    assert encode_request(1, 2, 10_000, body) == expected


def test_request_timeout_15000_varint() -> None:
    payload = encode_request(3, 13, 15_000, b"")
    assert bytes.fromhex("10 98 75") in payload


def test_request_with_long_body_uses_multibyte_length() -> None:
    body = bytes(300)
    payload = encode_request(2, 17, 5000, body)
    assert decode_request(payload) == RpcRequest(2, 3, 17, 5000, body)


@pytest.mark.parametrize("timeout", [0, -1])
def test_non_positive_timeout_refused(timeout: int) -> None:
    with pytest.raises(LocalProtocolError, match="positive"):
        encode_request(1, 1, timeout, b"x")


def test_unknown_service_type_refused() -> None:
    with pytest.raises(LocalProtocolError):
        encode_request(9, 1, 1000, b"x")


def test_success_response_from_hand_bytes() -> None:
    data = b"\x08\x01"
    payload = (
        bytes.fromhex("02 08 01")
        + bytes.fromhex("04 08 00 18 03")
        + bytes([2 + 2 + len(data)])
        + bytes.fromhex("08 05 12")
        + bytes([len(data)])
        + data
    )
    assert decode_response(payload) == data
    assert encode_success(5, data) == payload


def test_success_header_without_fast_path_shape() -> None:
    # A server could add serviceType (field 2) to the header; the generic path must cope.
    payload = (
        bytes.fromhex("02 08 01")
        + bytes.fromhex("06 08 00 10 01 18 03")
        + bytes.fromhex("04 08 05 12 00")
    )
    assert decode_response(payload) == b""


def test_error_response_standby_master() -> None:
    name = b"org.apache.inlong.tubemq.corerpc.exception.StandbyException"
    text = b"127.0.0.1:8715 is not master now. the connecting client id is x"
    body = b"\x0a" + bytes([len(name)]) + name + b"\x12" + bytes([len(text)]) + text
    payload = bytes.fromhex("02 08 01 04 08 01 18 03") + bytes([len(body)]) + body
    err = decode_response(payload)
    assert isinstance(err, StandbyMasterError)
    assert err.retriable
    assert not err.fatal
    assert err.remote_message == text.decode()
    assert payload == encode_exception(name.decode(), text.decode())


def test_fatal_response_old_spelling() -> None:
    payload = encode_exception(
        "com.apache.tubemq.corerpc.exception.ServerNotReadyException", "", fatal=True
    )
    assert payload.startswith(bytes.fromhex("02 08 01 02 08 02"))
    err = decode_response(payload)
    assert isinstance(err, ServerNotReadyError)
    assert err.fatal


@pytest.mark.parametrize(
    "text",
    ["No service 3 found on the server", "No method 13 in service 3 found on the server"],
)
def test_a_service_not_published_yet_is_a_retriable_not_ready_error(text: str) -> None:
    err = decode_response(encode_exception("java.lang.Exception", text))
    assert isinstance(err, ServiceNotPublishedError)
    assert isinstance(err, ServerNotReadyError)
    assert err.retriable
    assert err.remote_message == text


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("java.lang.Exception", "Unsupported method 13in service type 2!"),
        ("java.lang.RuntimeException", "No service 3 found on the server"),
        ("java.lang.Exception", "rejected: No service 3 found on the server"),
        ("java.lang.Exception", "No service x found on the server"),
    ],
    ids=["bad-pairing", "other-class", "not-at-start", "not-a-number"],
)
def test_only_the_dispatcher_s_exact_texts_mean_not_published(name: str, text: str) -> None:
    err = decode_response(encode_exception(name, text))
    assert type(err) is RemoteRpcError
    assert not err.retriable


def test_unknown_exception_is_generic_remote_error() -> None:
    err = decode_response(encode_exception("java.lang.Exception", "Unsupported method ID :11"))
    assert type(err) is RemoteRpcError
    assert "Unsupported method" in str(err)


@pytest.mark.parametrize("cut", [1, 3, 5, 8, 10])
def test_truncated_response_is_remote_protocol_error(cut: int) -> None:
    payload = encode_success(5, b"0123456789")
    with pytest.raises(RemoteProtocolError):
        decode_response(payload[:cut])


def test_service_of_method_table() -> None:
    assert SERVICE_OF_METHOD[Method.MASTER_PRODUCER_REGISTER] is ServiceType.MASTER
    assert SERVICE_OF_METHOD[Method.MASTER_CONSUMER_GET_PART_META] is ServiceType.MASTER
    assert SERVICE_OF_METHOD[Method.BROKER_PRODUCER_SEND_MESSAGE] is ServiceType.BROKER_WRITE
    assert SERVICE_OF_METHOD[Method.BROKER_CONSUMER_GET_MESSAGE] is ServiceType.BROKER_READ
    assert [int(m) for m in Method] == [*range(1, 10), *range(11, 23)]


@given(
    service=st.sampled_from(list(ServiceType)),
    method=st.sampled_from(list(Method)),
    timeout=st.integers(1, 2**31 - 1),
    body=st.binary(max_size=2000),
)
@settings(max_examples=examples(200), deadline=None)
def test_request_round_trip(service: int, method: int, timeout: int, body: bytes) -> None:
    assert decode_request(encode_request(service, method, timeout, body)) == RpcRequest(
        service, 3, method, timeout, body
    )


@given(st.binary(max_size=300))
@settings(max_examples=examples(300), deadline=None)
def test_decode_response_fuzz(data: bytes) -> None:
    try:
        result = decode_response(data)
    except RemoteProtocolError:
        return
    assert isinstance(result, bytes | RemoteRpcError)


@settings(max_examples=examples(150), deadline=None)
@given(method=st.integers(1, 200), data=st.binary(max_size=300))
def test_success_round_trip_fast_and_generic_shapes(method: int, data: bytes) -> None:
    # One-byte lengths take the fast path, longer ones and two-byte methods the generic reader.
    assert decode_response(encode_success(method, data)) == data


def test_request_head_is_encode_request_without_its_body() -> None:
    body = b"b" * 200
    head = request_head(3, 13, 5000, len(body))
    assert head + body == encode_request(3, 13, 5000, body)
