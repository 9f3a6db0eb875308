"""Frames built by hand from docs/protocol/wire.md, and a decoder fed in chunks (the framing
tests' helpers)."""

from __future__ import annotations

import struct

from tubemq_aio.protocol.framing import Frame, FrameSplitter

__all__ = ["feed_in_chunks", "hand_frame"]


def hand_frame(serial: int, blocks: list[bytes]) -> bytes:
    """A frame laid out per docs/protocol/wire.md §1.1 table, independent of our encoder."""
    out = bytes.fromhex("FF7FF4FE") + struct.pack(">I", serial) + struct.pack(">I", len(blocks))
    for block in blocks:
        out += struct.pack(">I", len(block)) + block
    return out


def feed_in_chunks(decoder: FrameSplitter, data: bytes, sizes: list[int]) -> list[Frame]:
    """Feed ``data`` in pieces of ``sizes`` bytes (then the rest); every frame decoded."""
    frames: list[Frame] = []
    pos = 0
    for size in sizes:
        frames += decoder.feed(data[pos : pos + size])
        pos += size
    frames += decoder.feed(data[pos:])
    return frames
