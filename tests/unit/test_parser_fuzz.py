"""Every response parser of ``tubemq_aio.protocol`` turns hostile input into its typed error.

Hypothesis feeds random bytes, and random protobuf fields of the right message (any wire type,
garbage in length-delimited fields, non-UTF-8 strings, nested garbage), into each parser; only
the documented errors may come out: :class:`ProtocolError` (the peer broke the protocol) and,
for a send result, :class:`ServerError`. A ``TypeError``, ``ValueError``, ``KeyError`` or
``UnicodeDecodeError`` escaping a parser is a bug (the hardening issue's defect 13 was a
``TypeError`` from a non-UTF-8 ``failureInfo``). The long runs live in the fuzz suite; these are
the per-commit runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from tubemq_aio.errors import ConfigError, ProtocolError, ServerError
from tubemq_aio.protocol import (
    client_balance,
    consumer_replies,
    message,
    producer_meta,
    producer_send,
    rpc,
)
from tubemq_aio.protocol.framing import FrameDecoder
from tubemq_aio.protocol.partitions import parse_confirm_context
from tubemq_aio.protocol.pb import BrokerService_pb2 as broker_pb
from tubemq_aio.protocol.producer_meta import Partition
from tubemq_aio.protocol.wire import encode_varint
from tubemq_aio.testing import fuzz

FUZZ = settings(
    max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

# Text that looks like TubeMQ metadata: its separators, digits, and some odd characters.
META_TEXT = st.text(alphabet="0123456789:#,@=-_.$ abcT\x00\u00e9\ud7ff", max_size=40)

BROKER = producer_meta.parse_broker_info("1:127.0.0.1:8123")
CB_BROKERS = client_balance.parse_broker_config_list(["1:127.0.0.1:8123"])
PARTITION = Partition(BROKER, "t", 0)


_varint = encode_varint  # negatives become their 64-bit two's complement


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "replace")


@st.composite
def pb_fields(draw: st.DrawFn, descriptor: Any, depth: int = 0) -> bytes:
    """Raw protobuf wire bytes: fields of ``descriptor`` (and unknown ones), any values."""
    fields = list(descriptor.fields)
    out = bytearray()
    for _ in range(draw(st.integers(0, 8))):
        known: bool = bool(fields) and draw(st.booleans())
        field = draw(st.sampled_from(fields)) if known else None
        number = field.number if field is not None else draw(st.integers(1, 40))
        if field is not None and field.message_type is not None and depth < 2:
            wire, payload = 2, draw(pb_fields(field.message_type, depth + 1))
        elif field is not None and field.type == field.TYPE_STRING:
            wire = 2
            payload = draw(
                st.one_of(
                    st.binary(max_size=24), META_TEXT.map(lambda t: t.encode("utf-8", "replace"))
                )
            )
        else:
            wire = draw(st.sampled_from([0, 1, 2, 5]))
            payload = b""
            if wire == 0:
                payload = _varint(draw(st.integers(-(2**63), 2**64 - 1)))
            elif wire == 1:
                payload = draw(st.binary(min_size=8, max_size=8))
            elif wire == 5:
                payload = draw(st.binary(min_size=4, max_size=4))
            else:
                payload = draw(st.binary(max_size=24))
        out += _varint(number << 3 | wire)
        out += _varint(len(payload)) + payload if wire == 2 else payload
    if draw(st.booleans()):
        out += draw(st.binary(max_size=4))  # a torn tail
    return bytes(out)


# One table of parsers for these per-commit runs and for the long seeded runs of `make fuzz`.
PB_PARSERS = fuzz.PROTOBUF_PARSERS
TEXT_PARSERS = fuzz.TEXT_PARSERS


def expect_typed(parse: Callable[[Any], object], data: Any) -> None:
    with contextlib.suppress(ProtocolError, ServerError):
        parse(data)


@pytest.mark.parametrize("name", sorted(PB_PARSERS))
def test_protobuf_parsers_on_random_fields(name: str) -> None:
    descriptor, parse = PB_PARSERS[name]

    @FUZZ
    @given(pb_fields(descriptor.DESCRIPTOR))
    def run(data: bytes) -> None:
        expect_typed(parse, data)

    run()


@pytest.mark.parametrize("name", sorted(PB_PARSERS))
def test_protobuf_parsers_on_random_bytes(name: str) -> None:
    _, parse = PB_PARSERS[name]

    @FUZZ
    @given(st.binary(max_size=200))
    def run(data: bytes) -> None:
        expect_typed(parse, data)

    run()


def test_non_utf8_strings_are_protocol_errors() -> None:
    """Defect 13: a non-UTF-8 string field used to escape as TypeError (or as bytes)."""
    base = broker_pb.HeartBeatResponseB2C(success=True, errCode=200, errMsg="").SerializeToString()
    bad_failure = base + b"\x2a\x02\xff\xfe"  # field 5 failureInfo
    bad_message = base + b"\x1a\x02\xff\xfe"  # field 3 errMsg
    for data in (bad_failure, bad_message):
        with pytest.raises(ProtocolError):
            consumer_replies.parse_broker_heartbeat_response(data)
    send = broker_pb.SendMessageResponseB2P(success=True, errCode=200, errMsg="")
    with pytest.raises(ProtocolError):
        producer_send.parse_send_result(send.SerializeToString() + b"\x1a\x02\xff\xfe", PARTITION)


@pytest.mark.parametrize("name", sorted(TEXT_PARSERS))
def test_metadata_text_parsers(name: str) -> None:
    parse = TEXT_PARSERS[name]

    @FUZZ
    @given(st.one_of(META_TEXT, st.text(max_size=40)))
    def run(text: str) -> None:
        expect_typed(parse, text)

    run()


@FUZZ
@given(st.text(alphabet="0123456789:-abt ", max_size=30))
def test_confirm_context_is_a_config_error(text: str) -> None:
    # The confirm context comes back from the application, so a bad one is the caller's error.
    with contextlib.suppress(ConfigError):
        parse_confirm_context(text)


@FUZZ
@given(st.binary(max_size=64), st.integers(-(2**31), 2**31), st.integers(-(2**31), 2**31))
def test_payload_decoding(payload: bytes, flag: int, checksum: int) -> None:
    expect_typed(lambda p: message.decode_payload(p, flag, checksum), payload)


@FUZZ
@given(st.binary(max_size=200))
def test_envelopes_and_frames(data: bytes) -> None:
    expect_typed(rpc.decode_response, data)
    expect_typed(rpc.decode_request, data)
    expect_typed(FrameDecoder().feed, data)
