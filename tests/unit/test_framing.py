"""Frame encoder and decoder: golden bytes built by hand from docs/protocol/wire.md, plus
fuzzing."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from tests.support.frames import feed_in_chunks, hand_frame
from tests.support.speedup_impls import FRAME_DECODERS, DecoderFactory
from tubemq_aio.errors import FrameError, LocalProtocolError
from tubemq_aio.protocol.framing import (
    BEGIN_TOKEN,
    BLOCK_SIZE,
    MAX_LIST_SIZE,
    ONE_BLOCK_HEADER,
    Frame,
    encode_frame,
)

# Every decoder test runs against the pure decoder and, when built, the compiled one.
each_decoder = pytest.mark.parametrize("decoder_cls", FRAME_DECODERS)


def test_begin_token_value() -> None:
    assert struct.pack(">I", BEGIN_TOKEN) == b"\xff\x7f\xf4\xfe"


@each_decoder
def test_small_payload_is_one_block_golden(decoder_cls: DecoderFactory) -> None:
    payload = b"\x02\x08\x00\x04\x08\x01\x10\x03"
    expected = (
        b"\xff\x7f\xf4\xfe" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x08"
    ) + payload
    assert encode_frame(1, payload) == expected
    assert decoder_cls().feed(expected) == [Frame(1, payload)]


@each_decoder
@pytest.mark.parametrize(
    ("size", "block_sizes"),
    [
        (1, [1]),
        (8191, [8191]),
        (8192, [8192]),
        (8193, [8192, 1]),
        (16384, [8192, 8192]),
        (20000, [8192, 8192, 3616]),
    ],
)
def test_block_split_matches_hand_layout(
    decoder_cls: DecoderFactory, size: int, block_sizes: list[int]
) -> None:
    payload = bytes(i % 251 for i in range(size))
    blocks = []
    pos = 0
    for block_size in block_sizes:
        blocks.append(payload[pos : pos + block_size])
        pos += block_size
    golden = hand_frame(0x7FFFFFFF, blocks)
    assert encode_frame(0x7FFFFFFF, payload) == golden
    assert decoder_cls().feed(golden) == [Frame(0x7FFFFFFF, payload)]


@each_decoder
def test_decoder_accepts_uneven_blocks_from_other_senders(decoder_cls: DecoderFactory) -> None:
    # Block boundaries carry no meaning (§1.1): a sender may split anywhere.
    golden = hand_frame(9, [b"ab", b"", b"cde", b"f"])
    assert decoder_cls().feed(golden) == [Frame(9, b"abcdef")]


@each_decoder
def test_serial_wraps_to_32_bits(decoder_cls: DecoderFactory) -> None:
    frame = encode_frame(2**32 + 5, b"x")
    assert decoder_cls().feed(frame) == [Frame(5, b"x")]


def test_empty_payload_refused() -> None:
    with pytest.raises(LocalProtocolError):
        encode_frame(1, b"")


def test_payload_over_list_size_refused() -> None:
    with pytest.raises(LocalProtocolError):
        encode_frame(1, bytes(MAX_LIST_SIZE * BLOCK_SIZE + 1))


@each_decoder
def test_several_frames_in_one_chunk_and_byte_by_byte(decoder_cls: DecoderFactory) -> None:
    data = hand_frame(1, [b"one"]) + hand_frame(2, [b"two", b"!"]) + hand_frame(3, [b"3"])
    expected = [Frame(1, b"one"), Frame(2, b"two!"), Frame(3, b"3")]
    assert decoder_cls().feed(data) == expected
    decoder = decoder_cls()
    frames = feed_in_chunks(decoder, data, [1] * len(data))
    assert frames == expected
    assert decoder.buffered == 0


@each_decoder
def test_bad_token_breaks_the_decoder_for_good(decoder_cls: DecoderFactory) -> None:
    decoder = decoder_cls()
    with pytest.raises(FrameError, match="begin token"):
        decoder.feed(b"\x00\x00\x00\x00" + bytes(20))
    with pytest.raises(FrameError):
        decoder.feed(hand_frame(1, [b"fine"]))


@each_decoder
@pytest.mark.parametrize("count", [0, MAX_LIST_SIZE + 1, 0xFFFFFFFF])
def test_list_size_out_of_range(decoder_cls: DecoderFactory, count: int) -> None:
    header = bytes.fromhex("FF7FF4FE") + struct.pack(">II", 1, count)
    with pytest.raises(FrameError, match="blocks"):
        decoder_cls().feed(header)


@each_decoder
def test_frame_byte_cap_refuses_before_buffering(decoder_cls: DecoderFactory) -> None:
    decoder = decoder_cls(max_frame_bytes=100)
    header = bytes.fromhex("FF7FF4FE") + struct.pack(">III", 1, 1, 101)
    with pytest.raises(FrameError, match="cap"):
        decoder.feed(header)


@each_decoder
@pytest.mark.parametrize("length", [BLOCK_SIZE + 1, 0x01000000])
def test_block_longer_than_the_block_size_is_refused(
    decoder_cls: DecoderFactory, length: int
) -> None:
    header = bytes.fromhex("FF7FF4FE") + struct.pack(">III", 1, 2, BLOCK_SIZE)
    data = header + bytes(BLOCK_SIZE) + struct.pack(">I", length) + bytes(length)
    with pytest.raises(FrameError, match="block of"):
        decoder_cls().feed(data)


@each_decoder
def test_a_corrupted_length_is_caught_at_once_not_after_later_answers(
    decoder_cls: DecoderFactory,
) -> None:
    # One flipped high byte of an answer's length: the decoder must not sit waiting for the
    # 16 MB it now declares while the next answers stream in (they would be swallowed).
    answer = bytearray(encode_frame(7, b"ok" * 20))
    answer[12] ^= 0x01
    decoder = decoder_cls()
    with pytest.raises(FrameError, match="block of"):
        decoder.feed(bytes(answer) + encode_frame(8, b"next"))
    assert decoder.buffered == 0


@each_decoder
def test_frame_byte_cap_counts_all_blocks(decoder_cls: DecoderFactory) -> None:
    decoder = decoder_cls(max_frame_bytes=100)
    with pytest.raises(FrameError):
        decoder.feed(hand_frame(1, [bytes(60), bytes(60)]))


@each_decoder
@given(
    payload=st.binary(min_size=1, max_size=40_000),
    serial=st.integers(min_value=0, max_value=2**32 - 1),
    chunks=st.lists(st.integers(min_value=1, max_value=9000), max_size=20),
)
@settings(max_examples=examples(150), deadline=None)
def test_round_trip_any_payload_any_chunking(
    decoder_cls: DecoderFactory, payload: bytes, serial: int, chunks: list[int]
) -> None:
    data = encode_frame(serial, payload) * 2
    decoder = decoder_cls()
    assert feed_in_chunks(decoder, data, chunks) == [Frame(serial, payload)] * 2
    assert decoder.buffered == 0


_CAP = 64 * 1024


def _fuzz_feed(decoder_cls: DecoderFactory, data: bytes, chunks: list[int]) -> None:
    decoder = decoder_cls(max_frame_bytes=_CAP)
    pos = 0
    try:
        for size in [*chunks, len(data)]:
            for frame in decoder.feed(data[pos : pos + size]):
                assert len(frame.payload) <= _CAP
            pos += size
            # Held bytes never exceed the cap plus one block header and the chunk just fed.
            assert decoder.buffered <= _CAP + 16 + size
    except FrameError:
        pass


@each_decoder
@given(data=st.binary(max_size=4096), chunks=st.lists(st.integers(1, 512), max_size=16))
@settings(max_examples=examples(300), deadline=None)
def test_fuzz_random_bytes_only_frames_or_frame_error(
    decoder_cls: DecoderFactory, data: bytes, chunks: list[int]
) -> None:
    _fuzz_feed(decoder_cls, data, chunks)


@each_decoder
@given(
    payloads=st.lists(st.binary(min_size=1, max_size=3000), min_size=1, max_size=4),
    mutations=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=8),
    chunks=st.lists(st.integers(1, 700), max_size=16),
)
@settings(max_examples=examples(300), deadline=None)
def test_fuzz_mutated_frames_only_frames_or_frame_error(
    decoder_cls: DecoderFactory,
    payloads: list[bytes],
    mutations: list[tuple[int, int]],
    chunks: list[int],
) -> None:
    data = bytearray(b"".join(encode_frame(i, p) for i, p in enumerate(payloads)))
    for where, value in mutations:
        data[where % len(data)] = value
    _fuzz_feed(decoder_cls, bytes(data), chunks)


def test_one_block_header_is_the_frame_prefix() -> None:
    payload = b"p" * BLOCK_SIZE
    header = ONE_BLOCK_HEADER.pack(BEGIN_TOKEN, 77, 1, len(payload))
    assert header + payload == encode_frame(77, payload)
