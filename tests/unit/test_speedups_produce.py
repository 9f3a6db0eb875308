"""The compiled twins of the produce answer path (``ResponseDecoder``, ``SendResultParser``):
used when built, and equal to the pure code on valid, random and malformed input."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from tests.support.held_producer import HeldConnection, started_producer
from tests.support.speedup_impls import EXT
from tubemq_aio import accelerator
from tubemq_aio.errors import RemoteRpcError
from tubemq_aio.protocol import producer_send, rpc
from tubemq_aio.protocol.pb import BrokerService_pb2 as broker_pb
from tubemq_aio.protocol.producer_meta import Broker, Partition
from tubemq_aio.protocol.producer_send import SendResult, SendResultParser
from tubemq_aio.protocol.rpc import Method, encode_exception, encode_success
from tubemq_aio.protocol.wire import encode_varint

#: Built from this source (a build from an older one lacks these twins and runs the pure code).
CURRENT = EXT is not None and hasattr(EXT, "SendResultParser") and hasattr(EXT, "ResponseDecoder")
PARTITION = Partition(Broker(7, "127.0.0.1", 8123), "demo", 3)
SendParse = Callable[[bytes, Partition], SendResult]
Decode = Callable[[bytes], object]


def outcome(func: Callable[..., object], *args: object) -> tuple[Any, ...]:
    """``("ok", result)`` or ``("error", type, text)``; a remote error compares by type and text."""
    try:
        got = func(*args)
    except Exception as exc:
        return ("error", type(exc), str(exc))
    if isinstance(got, RemoteRpcError):
        return ("remote", type(got), str(got), got.exception_name)
    return ("ok", got)


def send_parsers() -> list[Any]:
    pure = SendResultParser().parse
    params = [pytest.param(pure, id="pure")]
    if CURRENT:
        assert EXT is not None
        compiled = EXT.SendResultParser(SendResult, producer_send._RESULT_FIELDS, pure)
        params.append(pytest.param(compiled, id="compiled"))
    return params


def response_decoders() -> list[Any]:
    params = [pytest.param(rpc.decode_response_py, id="pure")]
    if CURRENT:
        assert EXT is not None
        compiled = EXT.ResponseDecoder(rpc.decode_response_py)
        params.append(pytest.param(compiled, id="compiled"))
    return params


# ---- selection ---------------------------------------------------------------------------------


def test_compiled_twins_are_used_when_present() -> None:
    if os.environ.get(accelerator.ENV_EXPECT, "") not in ("", "0"):
        assert CURRENT, "the built extension is older than its source: rebuild it"
    ext = accelerator.compiled() if CURRENT else None
    attempts = started_producer(1, HeldConnection())._attempts
    assert attempts is not None
    if ext is None:
        assert rpc.response_decoder is rpc.decode_response_py
        assert isinstance(attempts.parse_answer.__self__, SendResultParser)  # type: ignore[attr-defined]
    else:
        assert isinstance(rpc.response_decoder, ext.ResponseDecoder)
        assert isinstance(attempts.parse_answer.__self__, ext.SendResultParser)  # type: ignore[attr-defined]
        with pytest.raises(TypeError):  # a changed SendResult is refused, not misread
            ext.SendResultParser(SendResult, ("topic",), SendResultParser().parse)

        def unused(*args: object) -> Any:
            raise AssertionError("the common answer must not reach the pure code")

        # The answer of every successful send is taken without the pure code.
        data = broker_pb.SendMessageResponseB2P(
            success=True, errCode=200, errMsg="", messageId=5, appendTime=1, appendOffset=28
        ).SerializeToString()
        parse = ext.SendResultParser(SendResult, producer_send._RESULT_FIELDS, unused)
        assert parse(data, PARTITION) == SendResult("demo", "7:demo:3", 3, 7, 5, 1, 28)
        decode = ext.ResponseDecoder(unused)
        assert decode(encode_success(Method.BROKER_PRODUCER_SEND_MESSAGE, data)) == data


# ---- SendMessageResponseB2P --------------------------------------------------------------------

_int64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def send_answers(draw: st.DrawFn) -> bytes:
    """A serialized ``SendMessageResponseB2P`` with random fields (protobuf's own encoder)."""
    rsp = broker_pb.SendMessageResponseB2P(
        success=draw(st.booleans()),
        errCode=draw(st.sampled_from([200, 200, 200, 503, 419, 400, -1, 2**31 - 1])),
        errMsg=draw(st.sampled_from(["OK", "", "123", " -5 ", "é", "x" * 200])),
    )
    for name, values in (
        ("requireAuth", st.booleans()),
        ("messageId", _int64),
        ("appendTime", _int64),
        ("appendOffset", _int64),
    ):
        if draw(st.booleans()):
            setattr(rsp, name, draw(values))
    return rsp.SerializeToString()


ODD_ANSWERS = [
    b"",  # required fields missing
    b"\x08\x01\x10\xc8\x01\x1a\x00",  # no messageId: errMsg decides (-1)
    b"\x08\x01\x10\xc8\x01\x1a\x0242\x28\x05",  # the canonical success
    b"\x10\xc8\x01\x08\x01\x1a\x00\x28\x05",  # fields out of order
    b"\x08\x01\x10\xc8\x01\x1a\x00\x28\x05\x28\x06",  # messageId twice (last wins)
    b"\x08\x02\x10\xc8\x01\x1a\x00\x28\x05",  # a bool of 2
    b"\x08\x01\x10\xc8\x01\x1a\x00\x20\x03\x28\x05",  # requireAuth of 3
    b"\x08\x01\x10" + encode_varint(2**40) + b"\x1a\x00\x28\x05",  # errCode out of int32
    b"\x08\x01\x10\xc8\x01\x1a\x02\xff\xfe\x28\x05",  # errMsg not UTF-8
    b"\x08\x01\x10\xc8\x01\x1a\x02\xc3\xa9\x28\x05",  # errMsg UTF-8, not ASCII
    b"\x08\x01\x10\xc8\x01\x1a\x05ab",  # errMsg truncated
    b"\x08\x01\x10\xc8\x01\x1a\x00\x28\x05\x40\x01",  # unknown field 8
    b"\x08\x01\x10\xc8\x01\x1a\x00\x28" + b"\xff" * 10 + b"\x01",  # an 11-byte varint
    b"\x08\x01\x10\xc8\x01\x1a\x00\x28" + b"\xff" * 9 + b"\x01",  # -1 as an int64
    b"\x08\x01\x10\xc8\x01\x1a\x00\x2d\x00\x00\x00\x00",  # messageId with a fixed32 wire type
    b"\x08\x01\x10\xf7\x03\x1a\x04down\x28\x05",  # 503 refusal
    b"\x08\x81\x00\x10\xc8\x01\x1a\x00\x28\x05",  # an over-long varint
    b"\x00\x08\x01",  # field 0
    b"\xff\xff\xff",
]


@pytest.mark.parametrize("parse", send_parsers())
@pytest.mark.parametrize("data", ODD_ANSWERS)
def test_send_parser_agrees_on_odd_encodings(parse: SendParse, data: bytes) -> None:
    assert outcome(parse, data, PARTITION) == outcome(SendResultParser().parse, data, PARTITION)


@pytest.mark.parametrize("parse", send_parsers())
@settings(max_examples=examples(300), deadline=None)
@given(data=send_answers())
def test_send_parser_agrees_on_random_answers(parse: SendParse, data: bytes) -> None:
    assert outcome(parse, data, PARTITION) == outcome(SendResultParser().parse, data, PARTITION)


@pytest.mark.parametrize("parse", send_parsers())
@settings(max_examples=examples(300), deadline=None)
@given(data=st.binary(max_size=40))
def test_send_parser_agrees_on_random_bytes(parse: SendParse, data: bytes) -> None:
    assert outcome(parse, data, PARTITION) == outcome(SendResultParser().parse, data, PARTITION)


@pytest.mark.parametrize("parse", send_parsers())
def test_send_parser_fills_every_field(parse: SendParse) -> None:
    data = broker_pb.SendMessageResponseB2P(
        success=True, errCode=200, errMsg="OK", messageId=-3, appendTime=2**62, appendOffset=0
    ).SerializeToString()
    assert parse(data, PARTITION) == SendResult("demo", "7:demo:3", 3, 7, -3, 2**62, 0)
    # Absent optional times read as -1.
    data = broker_pb.SendMessageResponseB2P(
        success=True, errCode=200, errMsg="OK", messageId=9
    ).SerializeToString()
    assert parse(data, PARTITION) == SendResult("demo", "7:demo:3", 3, 7, 9, -1, -1)


# ---- response envelope -------------------------------------------------------------------------


@st.composite
def envelopes(draw: st.DrawFn) -> bytes:
    if draw(st.booleans()):
        return encode_success(draw(st.sampled_from(list(Method))), draw(st.binary(max_size=300)))
    return encode_exception(
        draw(st.sampled_from(["java.io.IOException", "x.Y"])),
        draw(st.text(max_size=30)),
        fatal=draw(st.booleans()),
    )


@pytest.mark.parametrize("decode", response_decoders())
@settings(max_examples=examples(300), deadline=None)
@given(data=envelopes())
def test_response_decoder_agrees_on_envelopes(decode: Decode, data: bytes) -> None:
    assert outcome(decode, data) == outcome(rpc.decode_response_py, data)
    for cut in (len(data) - 1, 13, 9):
        assert outcome(decode, data[:cut]) == outcome(rpc.decode_response_py, data[:cut])


@pytest.mark.parametrize("decode", response_decoders())
@settings(max_examples=examples(300), deadline=None)
@given(data=st.binary(max_size=40))
def test_response_decoder_agrees_on_random_bytes(decode: Decode, data: bytes) -> None:
    prefixed = b"\x02\x08\x01\x04\x08\x00\x18\x03" + data
    for payload in (data, prefixed):
        assert outcome(decode, payload) == outcome(rpc.decode_response_py, payload)
