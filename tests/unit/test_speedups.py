"""The optional compiled accelerator: present when expected, used when present, and equal to the
pure-Python code on valid, random and malformed input (each test also runs the pure code alone,
which must give only typed errors)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from tests.support.speedup_impls import (
    EXT,
    FRAME_DECODERS,
    PARSERS,
    RAW_DECODERS,
    DecoderFactory,
    Parser,
)
from tubemq_aio import accelerator
from tubemq_aio.consumer import _decode
from tubemq_aio.errors import FrameError, RemoteProtocolError
from tubemq_aio.protocol import consumer_replies, framing
from tubemq_aio.protocol.consumer_replies import RawMessage
from tubemq_aio.protocol.framing import FrameDecoder, encode_frame
from tubemq_aio.protocol.message import checksum, encode_message
from tubemq_aio.protocol.pb import BrokerService_pb2 as broker_pb
from tubemq_aio.protocol.wire import encode_varint

Outcome = tuple[Any, ...]


def outcome(func: Callable[[bytes], object], data: bytes) -> Outcome:
    """What ``func(data)`` gives: ``("ok", result)`` or ``("error", type, text)``."""
    try:
        return ("ok", func(data))
    except Exception as exc:
        return ("error", type(exc), str(exc))


# ---- presence and selection --------------------------------------------------------------------


def test_extension_is_built_when_expected_and_used_when_present() -> None:
    expected = os.environ.get(accelerator.ENV_EXPECT, "") not in ("", "0")
    if expected:
        assert EXT is not None, (
            f"{accelerator.ENV_EXPECT} is set but tubemq_aio._speedups._cdecode does not import: "
            "build it with `python -m tubemq_aio._speedups.build`"
        )
    ext = accelerator.compiled()
    assert ext is (None if accelerator.pure_forced() else EXT)
    if ext is None:
        assert consumer_replies._parse_get_message is consumer_replies.parse_get_message_response_py
        assert _decode._decode is _decode.decode_raw_messages_py
        assert type(framing.new_frame_decoder()) is FrameDecoder
    else:
        assert isinstance(consumer_replies._parse_get_message, ext.GetMessageParser)
        assert isinstance(_decode._decode, ext.RawDecoder)
        assert isinstance(framing.new_frame_decoder(), ext.FrameDecoder)


def test_pure_code_is_forced_by_the_environment() -> None:
    probe = (
        "from tubemq_aio.protocol import consumer_replies, framing\n"
        "from tubemq_aio.consumer import _decode\n"
        "assert consumer_replies._parse_get_message is "
        "consumer_replies.parse_get_message_response_py\n"
        "assert _decode._decode is _decode.decode_raw_messages_py\n"
        "assert type(framing.new_frame_decoder()) is framing.FrameDecoder\n"
        "from tubemq_aio.protocol import producer_send, rpc\n"
        "assert rpc.response_decoder is rpc.decode_response_py\n"
        "parse = producer_send.send_result_parser()\n"
        "assert isinstance(parse.__self__, producer_send.SendResultParser)\n"
        "print('pure')\n"
    )
    env = {**os.environ, accelerator.ENV_PURE: "1"}
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == b"pure\n"


# ---- GetMessage parser -------------------------------------------------------------------------

_int32 = st.integers(-(2**31), 2**31 - 1)
_int64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def get_message_responses(draw: st.DrawFn) -> bytes:
    """A serialized ``GetMessageResponseB2C`` with random fields (protobuf's own encoder)."""
    rsp = broker_pb.GetMessageResponseB2C(success=draw(st.booleans()), errCode=draw(_int32))
    if draw(st.booleans()):
        rsp.errMsg = draw(st.text(max_size=20))
    for _ in range(draw(st.integers(0, 5))):
        body = draw(st.binary(max_size=64))
        enc = encode_message(body or b"x", msg_type=draw(st.sampled_from([None, "a"])))
        data = draw(st.sampled_from([enc.data, body]))
        crc = checksum(data) if draw(st.booleans()) else draw(_int32)
        rsp.messages.add(
            messageId=draw(_int64),
            checkSum=crc,
            payLoadData=data,
            flag=draw(st.sampled_from([0, 1, enc.flag, -1])),
        )
    for name, values in (
        ("currOffset", _int64),
        ("minLimitTime", _int32),
        ("escFlowCtrl", st.booleans()),
        ("currDataDlt", _int64),
        ("requireSlow", st.booleans()),
        ("maxOffset", _int64),
    ):
        if draw(st.booleans()):
            setattr(rsp, name, draw(values))
    return rsp.SerializeToString()


# Hand-built shapes the walker must hand to protobuf's parser (or agree with it on).
ODD_RESPONSES = [
    b"",  # required fields missing
    b"\x08\x01",  # errCode missing
    b"\x08\x01\x10\xc8\x01",  # the minimal success
    b"\x08\x01\x10\xc8\x01\x08\x00",  # success twice (last wins in protobuf)
    b"\x08\x02\x10\xc8\x01",  # a bool of 2
    b"\x08\x81\x00\x10\xc8\x01",  # an over-long varint
    b"\x08\x01\x10" + encode_varint(2**40) + b"",  # an int32 out of range
    b"\x08\x01\x10\xc8\x01\x1a\x02\xff\xfe",  # errMsg not UTF-8
    b"\x08\x01\x10\xc8\x01\x1a\x05ab",  # errMsg truncated
    b"\x08\x01\x10\xc8\x01\x58\x01",  # unknown field 11
    b"\x08\x01\x10\xc8\x01\x22\x02\x08\x01",  # a TransferedMessage without required fields
    b"\x08\x01\x10\xc8\x01\x22\x0c\x20\x00\x18\x01x\x10\x05\x08\x07\x08\x07",  # duplicate id
    b"\x08\x01\x10\xc8\x01\x22\x09\x20\x00\x18\x01x\x10\x05\x08\x07",  # fields in reverse order
    b"\x08\x01\x10\xc8\x01\x22\x7f",  # a message longer than the data
    b"\x08\x01\x10\xc8\x01\x28" + b"\xff" * 10 + b"\x01",  # an 11-byte varint
    b"\x08\x01\x10\xc8\x01\x28" + b"\xff" * 9 + b"\x01",  # -1 as an int64
    b"\x08\x01\x10\xc8\x01\x2d\x00\x00\x00\x00",  # currOffset with a fixed32 wire type
    b"\x0b\x0c",  # a group
]


@pytest.mark.parametrize("parse", PARSERS)
@pytest.mark.parametrize("data", ODD_RESPONSES)
def test_parser_agrees_on_odd_encodings(parse: Parser, data: bytes) -> None:
    got = outcome(parse, data)
    assert got == outcome(consumer_replies.parse_get_message_response_py, data)
    assert got[0] == "ok" or got[1] is RemoteProtocolError


# The raw varint values around the edges of an int32 field: the canonical ones (up to 2**31 - 1,
# and negatives sign-extended to 64 bits) and their neighbours just outside, which the walker
# hands to protobuf's parser (the walker compares them as C integers).
_INT32_EDGES = [
    0,
    2**31 - 1,
    2**31,
    2**32 - 1,  # -1 written in 32 bits only
    2**64 - 2**31 - 1,
    2**64 - 2**31,  # -(2**31)
    2**64 - 1,  # -1
    2**63,
]


def _int32_field_answers(raw: int) -> list[bytes]:
    """GetMessage answers with the varint ``raw`` in each int32 field in turn."""
    value = encode_varint(raw)
    head = b"\x08\x01\x10\xc8\x01"

    def message(checksum: bytes, flag: bytes) -> bytes:
        body = b"\x08\x07\x10" + checksum + b"\x1a\x01x\x20" + flag
        return b"\x22" + encode_varint(len(body)) + body

    return [
        b"\x08\x01\x10" + value,  # errCode
        head + b"\x30" + value,  # minLimitTime
        head + message(value, b"\x00"),  # checkSum
        head + message(b"\x05", value),  # flag
    ]


@pytest.mark.parametrize("parse", PARSERS)
@pytest.mark.parametrize("raw", _INT32_EDGES)
def test_parser_agrees_on_int32_fields_at_their_edges(parse: Parser, raw: int) -> None:
    for data in _int32_field_answers(raw):
        got = outcome(parse, data)
        assert got == outcome(consumer_replies.parse_get_message_response_py, data)
        assert got[0] == "ok" or got[1] is RemoteProtocolError


@pytest.mark.parametrize("parse", PARSERS)
@settings(max_examples=examples(300), deadline=None)
@given(data=get_message_responses())
def test_parser_equals_protobuf_on_valid_responses(parse: Parser, data: bytes) -> None:
    got = parse(data)
    assert got == consumer_replies.parse_get_message_response_py(data)
    assert all(type(m) is RawMessage for m in got.messages)


@pytest.mark.parametrize("parse", PARSERS)
@settings(max_examples=examples(400), deadline=None)
@given(
    data=get_message_responses(),
    cuts=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4),
    truncate=st.integers(0, 10**6),
)
def test_parser_agrees_on_mutated_responses(
    parse: Parser, data: bytes, cuts: list[tuple[int, int]], truncate: int
) -> None:
    mutated = bytearray(data or b"\x00")
    for where, value in cuts:
        mutated[where % len(mutated)] = value
    for candidate in (bytes(mutated), data[: truncate % (len(data) + 1)]):
        got = outcome(parse, candidate)
        assert got == outcome(consumer_replies.parse_get_message_response_py, candidate)
        assert got[0] == "ok" or got[1] is RemoteProtocolError


@pytest.mark.parametrize("parse", PARSERS)
@settings(max_examples=examples(300), deadline=None)
@given(data=st.binary(max_size=200))
def test_parser_agrees_on_random_bytes(parse: Parser, data: bytes) -> None:
    got = outcome(parse, data)
    assert got == outcome(consumer_replies.parse_get_message_response_py, data)
    assert got[0] == "ok" or got[1] is RemoteProtocolError


# ---- frame decoder -----------------------------------------------------------------------------


def feed_all(decoder_cls: DecoderFactory, data: bytes, chunks: list[int], cap: int) -> list[Any]:
    """Per chunk: the frames and ``buffered`` after it, or the error that ended the stream."""
    decoder = decoder_cls(max_frame_bytes=cap)
    steps: list[Any] = []
    pos = 0
    for size in [*chunks, len(data)]:
        try:
            frames = decoder.feed(data[pos : pos + size])
        except FrameError as exc:
            steps.append(("error", str(exc)))
            steps.append(outcome(decoder.feed, b""))  # broken for good: the same error again
            return steps
        steps.append((frames, decoder.buffered))
        pos += size
    return steps


@pytest.mark.parametrize("decoder_cls", FRAME_DECODERS)
@settings(max_examples=examples(300), deadline=None)
@given(
    payloads=st.lists(st.binary(min_size=1, max_size=20_000), min_size=1, max_size=4),
    mutations=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=3),
    chunks=st.lists(st.integers(0, 9000), max_size=12),
    cap=st.sampled_from([1, 100, 8192, 30_000, 1 << 20]),
)
def test_frame_decoder_agrees_on_valid_and_mutated_streams(
    decoder_cls: DecoderFactory,
    payloads: list[bytes],
    mutations: list[tuple[int, int]],
    chunks: list[int],
    cap: int,
) -> None:
    data = bytearray(b"".join(encode_frame(i, p) for i, p in enumerate(payloads)))
    for where, value in mutations:
        data[where % len(data)] = value
    got = feed_all(decoder_cls, bytes(data), chunks, cap)
    assert got == feed_all(FrameDecoder, bytes(data), chunks, cap)


@pytest.mark.parametrize("decoder_cls", FRAME_DECODERS)
@settings(max_examples=examples(300), deadline=None)
@given(data=st.binary(max_size=600), chunks=st.lists(st.integers(0, 64), max_size=12))
def test_frame_decoder_agrees_on_random_bytes(
    decoder_cls: DecoderFactory, data: bytes, chunks: list[int]
) -> None:
    # Half the inputs start with a valid header, so that the block parsing gets exercised.
    for stream in (data, bytes.fromhex("FF7FF4FE00000001") + data):
        assert feed_all(decoder_cls, stream, chunks, 256) == feed_all(
            FrameDecoder, stream, chunks, 256
        )


@pytest.mark.parametrize("decoder_cls", FRAME_DECODERS)
def test_frame_decoder_takes_any_bytes_like(decoder_cls: DecoderFactory) -> None:
    frame = encode_frame(3, b"payload" * 2000)
    for wrap in (bytes, bytearray, memoryview):
        decoder = decoder_cls()
        half = len(frame) // 2
        frames = decoder.feed(wrap(frame[:half])) + decoder.feed(wrap(frame[half:]))
        assert frames == [(3, b"payload" * 2000)]
        assert type(frames[0].payload) is bytes


@pytest.mark.parametrize("decoder_cls", FRAME_DECODERS)
def test_frame_decoder_keeps_nothing_of_a_reused_read_buffer(decoder_cls: DecoderFactory) -> None:
    # The connection reads into one buffer (BufferedProtocol) and overwrites it on every read.
    stream = b"".join(encode_frame(i, bytes([i]) * (i * 3000 + 1)) for i in range(1, 6))
    buffer = bytearray(4096)
    view = memoryview(buffer)
    decoder = decoder_cls()
    frames = []
    for start in range(0, len(stream), 4096):
        chunk = stream[start : start + 4096]
        buffer[: len(chunk)] = chunk
        frames += decoder.feed(view[: len(chunk)])
        buffer[:] = b"\xee" * len(buffer)
    assert frames == [(i, bytes([i]) * (i * 3000 + 1)) for i in range(1, 6)]
    assert decoder.buffered == 0


@pytest.mark.parametrize("decoder_cls", FRAME_DECODERS)
def test_frame_decoder_refuses_bad_limits(decoder_cls: DecoderFactory) -> None:
    for limits in ({"max_frame_bytes": 0}, {"max_list_size": -1}):
        with pytest.raises(ValueError, match="positive"):
            decoder_cls(**limits)


# ---- decode loop: what the shared tests do not cover -------------------------------------------


class Counters:
    crc_mismatches = 0
    decode_errors = 0
    filtered = 0


@pytest.mark.parametrize("decode", RAW_DECODERS)
def test_decode_takes_any_iterable_and_bytes_like_payloads(decode: Any) -> None:
    enc = encode_message(b"body", attributes={"k": "v"})
    raw = [RawMessage(1, checksum(enc.data), enc.data, enc.flag), RawMessage(2, 0, b"x", 0)]
    want = _decode.decode_raw_messages_py(
        raw, topic="t", partition_key="1:t:0", filters=frozenset(), counters=Counters()
    )
    for items in (iter(raw), tuple(raw), [RawMessage(*r) for r in raw]):
        got = decode(
            items, topic="t", partition_key="1:t:0", filters=frozenset(), counters=Counters()
        )
        assert got == want
    # Not a bytes payload: the compiled loop hands the call to the pure one (a TypeError).
    odd = [RawMessage(1, checksum(enc.data), bytearray(enc.data), enc.flag)]  # type: ignore[arg-type]

    def run(func: Any) -> Callable[[bytes], object]:
        return lambda _: func(
            odd, topic="t", partition_key="k", filters=frozenset(), counters=Counters()
        )

    assert outcome(run(decode), b"") == outcome(run(_decode.decode_raw_messages_py), b"")


@pytest.mark.parametrize("decode", RAW_DECODERS)
def test_decode_logs_dropped_messages_like_the_pure_loop(
    decode: Any, caplog: pytest.LogCaptureFixture
) -> None:
    raw = [RawMessage(1, 0, b"abc", 0), RawMessage(2, 0, b"\x00\x00", 1)]
    caplog.set_level("WARNING", logger="tubemq_aio.consumer")
    counters = Counters()
    got, nbytes = decode(
        raw,
        topic="t",
        partition_key="1:t:0",
        filters=frozenset(),
        counters=counters,
        deliver_corrupt=False,
    )
    assert (got, nbytes) == ([], 0)
    assert (counters.crc_mismatches, counters.decode_errors) == (1, 1)
    assert [r.getMessage() for r in caplog.records] == [
        "checksum mismatch of message 1 in 1:t:0",
        "undecodable message 2 in 1:t:0: attribute block does not fit the payload",
    ]
