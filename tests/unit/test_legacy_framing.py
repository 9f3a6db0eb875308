"""Length-prefixed framing of TubeMQ servers 1.1.0 and 1.2.0: golden bytes built by hand from
docs/protocol/wire.md §1.7, refusals, and round trips in random chunks."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.frames import feed_in_chunks, hand_frame
from tests.support.speedup_impls import FRAME_DECODERS, DecoderFactory
from tubemq_aio.errors import FrameError, LocalProtocolError
from tubemq_aio.protocol.framing import BLOCK_SIZE, Frame, FrameDecoder, encode_frame
from tubemq_aio.protocol.legacy_framing import (
    LEGACY_MAX_FRAME_BYTES,
    LengthPrefixedDecoder,
    length_prefix,
)

each_decoder = pytest.mark.parametrize("decoder_cls", FRAME_DECODERS)


def legacy(frame: bytes) -> bytes:
    """``frame`` behind its 4-byte big-endian length, laid out by hand."""
    return struct.pack(">I", len(frame)) + frame


def test_prefix_is_the_frame_length_big_endian() -> None:
    frame = hand_frame(7, [b"abc"])
    assert length_prefix(len(frame)) + frame == bytes.fromhex("00000013") + frame
    assert len(frame) == 0x13


def test_prefix_refuses_what_a_legacy_server_refuses() -> None:
    assert length_prefix(LEGACY_MAX_FRAME_BYTES - 4)  # the largest unit still accepted
    with pytest.raises(LocalProtocolError, match="legacy-length"):
        length_prefix(LEGACY_MAX_FRAME_BYTES - 3)
    with pytest.raises(LocalProtocolError):
        length_prefix(100, max_frame_bytes=103)


@each_decoder
def test_decodes_one_and_many_frames_fed_byte_by_byte(decoder_cls: DecoderFactory) -> None:
    big = bytes(range(256)) * 80  # three blocks
    frames = [hand_frame(1, [b"x"]), hand_frame(2**32 - 1, [big[:8192], big[8192:16384],
                                                              big[16384:]])]  # fmt: skip
    stream = b"".join(legacy(f) for f in frames)
    decoder = LengthPrefixedDecoder(decoder_cls())
    got = feed_in_chunks(decoder, stream, [1] * len(stream))
    assert got == [Frame(1, b"x"), Frame(2**32 - 1, big)]
    assert decoder.buffered == 0


@each_decoder
def test_many_units_in_one_chunk(decoder_cls: DecoderFactory) -> None:
    stream = b"".join(legacy(hand_frame(i, [bytes([i]) * i])) for i in range(1, 50))
    decoder = LengthPrefixedDecoder(decoder_cls())
    assert decoder.feed(stream) == [Frame(i, bytes([i]) * i) for i in range(1, 50)]


@pytest.mark.parametrize(
    ("stream", "match"),
    [
        (b"\x00\x00\x00\x00", "length 0"),
        (struct.pack(">I", LEGACY_MAX_FRAME_BYTES - 3), "legacy frame length"),
        # a standard frame read as legacy: its begin token is a 4 GiB length
        (hand_frame(1, [b"x"]), "other releases need framing='standard'"),
        # a unit shorter than its frame, then the next unit's prefix inside the frame
        (struct.pack(">I", 10) + hand_frame(1, [b"abcdef"]), "ends inside"),
        # a unit holding two frames, or one and a part of the next
        (struct.pack(">I", 36) + hand_frame(1, [b"ab"]) + hand_frame(2, [b"cd"]), "more than"),
        (struct.pack(">I", 34) + hand_frame(1, [b"ab"]) + hand_frame(2, [b"cd"]), "more than"),
    ],
)
@each_decoder
def test_refuses_malformed_units_for_good(
    decoder_cls: DecoderFactory, stream: bytes, match: str
) -> None:
    decoder = LengthPrefixedDecoder(decoder_cls())
    with pytest.raises(FrameError, match=match):
        decoder.feed(stream)
    with pytest.raises(FrameError):  # the stream is out of sync: every later feed fails
        decoder.feed(legacy(hand_frame(3, [b"ok"])))


def test_limit_must_leave_room_for_a_frame() -> None:
    with pytest.raises(ValueError, match="prefix"):
        LengthPrefixedDecoder(FrameDecoder(), max_frame_bytes=4)


@each_decoder
@settings(max_examples=60, deadline=None)
@given(
    payloads=st.lists(st.binary(min_size=1, max_size=3 * BLOCK_SIZE), min_size=1, max_size=4),
    cuts=st.lists(st.integers(min_value=1, max_value=9000), max_size=40),
)
def test_round_trip_in_random_chunks(
    decoder_cls: DecoderFactory, payloads: list[bytes], cuts: list[int]
) -> None:
    stream = b""
    for serial, payload in enumerate(payloads, 1):
        frame = encode_frame(serial, payload)
        stream += length_prefix(len(frame)) + frame
    sizes = [*cuts, len(stream)]
    decoder = LengthPrefixedDecoder(decoder_cls())
    got = feed_in_chunks(decoder, stream, sizes)
    assert got == [Frame(i, p) for i, p in enumerate(payloads, 1)]
