"""Length-prefixed framing of TubeMQ servers 1.1.0 and 1.2.0: golden bytes built by hand from
docs/protocol/wire.md §1.7 (the padded answers as a real 1.2.0 master sent them), refusals, and
round trips in random chunks."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from tests.support.frames import feed_in_chunks, hand_frame
from tubemq_aio.errors import FrameError, LocalProtocolError
from tubemq_aio.protocol.framing import BLOCK_SIZE, Frame, encode_frame
from tubemq_aio.protocol.legacy_framing import (
    LEGACY_MAX_FRAME_BYTES,
    LengthPrefixedDecoder,
    length_prefix,
)


def legacy(frame: bytes, padding: int = 0) -> bytes:
    """``frame`` and ``padding`` zero bytes behind their 4-byte big-endian length, by hand."""
    return struct.pack(">I", len(frame) + padding) + frame + bytes(padding)


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


def test_a_real_1_2_answer_is_padded_to_its_buffer() -> None:
    """The first bytes a 1.2.0-incubating master sent to a register request: the prefix counts
    the last block's whole 8 KiB buffer (0x2010 = 12 + 4 + 8192), the block's length only its
    152 bytes of answer."""
    answer = bytes(range(152))
    unit = legacy(hand_frame(1, [answer]), padding=BLOCK_SIZE - 152)
    assert unit[:20].hex() == "00002010ff7ff4fe000000010000000100000098"
    decoder = LengthPrefixedDecoder()
    assert decoder.feed(unit + legacy(hand_frame(2, [b"x"]), padding=BLOCK_SIZE - 1)) == [
        Frame(1, answer),
        Frame(2, b"x"),
    ]
    assert decoder.buffered == 0


def test_decodes_one_and_many_frames_fed_byte_by_byte() -> None:
    big = bytes(range(256)) * 80  # three blocks
    blocks = [big[:8192], big[8192:16384], big[16384:]]
    stream = legacy(hand_frame(1, [b"x"])) + legacy(hand_frame(2**32 - 1, blocks), padding=7)
    decoder = LengthPrefixedDecoder()
    got = feed_in_chunks(decoder, stream, [1] * len(stream))
    assert got == [Frame(1, b"x"), Frame(2**32 - 1, big)]
    assert decoder.buffered == 0


def test_many_units_in_one_chunk() -> None:
    stream = b"".join(legacy(hand_frame(i, [bytes([i]) * i]), padding=i % 3) for i in range(1, 50))
    assert LengthPrefixedDecoder().feed(stream) == [Frame(i, bytes([i]) * i) for i in range(1, 50)]


@pytest.mark.parametrize(
    ("stream", "match"),
    [
        (b"\x00\x00\x00\x00", "length 0"),
        (struct.pack(">I", LEGACY_MAX_FRAME_BYTES - 3), "legacy frame length"),
        # a standard frame read as legacy: its begin token is a 4 GiB length
        (hand_frame(1, [b"x"]), "other releases need framing='standard'"),
        # a unit shorter than the frame it starts
        (struct.pack(">I", 17) + hand_frame(1, [b"abcdef"]), "ends inside"),
        (struct.pack(">I", 14) + hand_frame(1, [b"abcdef"]), "ends inside"),
        (legacy(b"\x00" * 12 + b"rest"), "begin token 0x00000000"),
        (legacy(hand_frame(1, [])), "declares 0 blocks"),
        (legacy(hand_frame(1, [b"a" * (BLOCK_SIZE + 1)])), "at most 8192"),
    ],
)
def test_refuses_malformed_units_for_good(stream: bytes, match: str) -> None:
    decoder = LengthPrefixedDecoder()
    with pytest.raises(FrameError, match=match):
        decoder.feed(stream)
    with pytest.raises(FrameError):  # the stream is out of sync: every later feed fails
        decoder.feed(legacy(hand_frame(3, [b"ok"])))


def test_payload_cap_and_limits() -> None:
    with pytest.raises(FrameError, match="10-byte cap"):
        LengthPrefixedDecoder(max_frame_bytes=10).feed(legacy(hand_frame(1, [b"a" * 11])))
    assert LengthPrefixedDecoder(max_frame_bytes=10).feed(legacy(hand_frame(1, [b"a" * 10])))
    with pytest.raises(ValueError, match="header"):
        LengthPrefixedDecoder(max_unit_bytes=16)
    with pytest.raises(ValueError, match="positive"):
        LengthPrefixedDecoder(max_frame_bytes=0)


@settings(max_examples=examples(80), deadline=None)
@given(
    payloads=st.lists(st.binary(min_size=1, max_size=3 * BLOCK_SIZE), min_size=1, max_size=4),
    pads=st.lists(st.integers(min_value=0, max_value=BLOCK_SIZE), min_size=4, max_size=4),
    cuts=st.lists(st.integers(min_value=1, max_value=9000), max_size=40),
)
def test_round_trip_in_random_chunks(
    payloads: list[bytes], pads: list[int], cuts: list[int]
) -> None:
    stream = b""
    for serial, payload in enumerate(payloads, 1):
        stream += legacy(encode_frame(serial, payload), padding=pads[serial - 1])
    got = feed_in_chunks(LengthPrefixedDecoder(), stream, [*cuts, len(stream)])
    assert got == [Frame(i, p) for i, p in enumerate(payloads, 1)]
