"""The length-prefixed framing of TubeMQ servers 1.1.0 and 1.2.0 (sans-I/O).

Those two releases put a 4-byte big-endian length before every frame, in both directions, and
refuse a unit longer than 5 MiB (docs/protocol/wire.md §1.7); every other release sends the bare
frame of :mod:`tubemq_aio.protocol.framing`. What we send is the ordinary frame behind its
length; what they send may carry padding after the frame, which their decoder drops and so does
:class:`LengthPrefixedDecoder`.
"""

from __future__ import annotations

import struct
from typing import Final, Literal

from tubemq_aio.errors import FrameError, LocalProtocolError
from tubemq_aio.protocol.framing import (
    BEGIN_TOKEN,
    BLOCK_SIZE,
    DEFAULT_MAX_FRAME_BYTES,
    MAX_LIST_SIZE,
    Frame,
)

__all__ = [
    "FRAMINGS",
    "LEGACY_MAX_FRAME_BYTES",
    "LENGTH_PREFIX",
    "Framing",
    "LengthPrefixedDecoder",
    "length_prefix",
]

#: How frames are delimited on a connection: ``"standard"`` (every server release but two) or
#: ``"legacy-length"`` (servers 1.1.0 and 1.2.0).
Framing = Literal["standard", "legacy-length"]
#: Every accepted :data:`Framing` value, the default first.
FRAMINGS: Final[tuple[Framing, ...]] = ("standard", "legacy-length")
#: The prefix: the length of the frame that follows, big-endian, the prefix itself not counted.
LENGTH_PREFIX: Final = struct.Struct(">I")
#: Largest prefixed unit, prefix included, that a 1.1.0/1.2.0 peer accepts by default
#: (``rpc.netty.max.message.size``).
LEGACY_MAX_FRAME_BYTES: Final = 5 * 1024 * 1024

_PREFIX_SIZE = LENGTH_PREFIX.size
_HEADER = struct.Struct(">III")  # begin token, serialNo, listSize (§1.1)


def length_prefix(frame_size: int, *, max_frame_bytes: int = LEGACY_MAX_FRAME_BYTES) -> bytes:
    """The prefix to write before a frame of ``frame_size`` bytes.

    Args:
        frame_size: length of the complete frame (header and blocks), in bytes.
        max_frame_bytes: the peer's limit on prefix plus frame.

    Raises:
        LocalProtocolError: the prefixed frame would pass ``max_frame_bytes``; a legacy server
            would drop the connection on it.
    """
    if frame_size + _PREFIX_SIZE > max_frame_bytes:
        raise LocalProtocolError(
            f"a frame of {frame_size} bytes passes the {max_frame_bytes}-byte limit of "
            "legacy-length framing (TubeMQ servers 1.1.0 and 1.2.0)"
        )
    return LENGTH_PREFIX.pack(frame_size)


class LengthPrefixedDecoder:
    """Turns the byte stream of a 1.1.0/1.2.0 peer into frames, as that release's Java decoder
    reads it.

    Each prefixed unit holds one frame, possibly followed by padding: those servers write every
    block's whole backing array (8 KiB for an answer's last block) after the block's true length,
    and their own decoder reads the frame's blocks by their lengths and drops the rest of the unit
    (docs/protocol/wire.md §1.7). A unit is buffered whole (at most ``max_unit_bytes``); a unit
    too short for the frame it starts, a bad begin token, a block count outside
    ``1..MAX_LIST_SIZE`` or a block over :data:`~tubemq_aio.protocol.framing.BLOCK_SIZE` is a
    :class:`~tubemq_aio.errors.FrameError`, after which every later call fails too (the
    connection must be closed).

    Args:
        max_frame_bytes: largest frame payload accepted (the blocks' total).
        max_unit_bytes: largest unit accepted, prefix included.
    """

    __slots__ = ("_broken", "_buf", "_max_payload", "_max_unit")

    def __init__(
        self,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_unit_bytes: int = LEGACY_MAX_FRAME_BYTES,
    ) -> None:
        if max_frame_bytes <= 0:
            raise ValueError("the frame limit must be positive")
        if max_unit_bytes <= _PREFIX_SIZE + _HEADER.size:
            raise ValueError("the legacy unit limit must leave room for a frame header")
        self._max_payload = max_frame_bytes
        self._max_unit = max_unit_bytes
        self._buf = bytearray()
        self._broken: FrameError | None = None

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete unit."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[Frame]:
        """Add received bytes and return every frame they complete, in order.

        Raises:
            FrameError: the stream is malformed; this decoder is unusable from now on.
        """
        if self._broken is not None:
            raise self._broken
        buf = self._buf
        buf += data
        frames: list[Frame] = []
        pos = 0
        try:
            while len(buf) - pos >= _PREFIX_SIZE:
                (size,) = LENGTH_PREFIX.unpack_from(buf, pos)
                if not _HEADER.size <= size <= self._max_unit - _PREFIX_SIZE:
                    raise FrameError(
                        f"legacy frame length {size} (allowed {_HEADER.size}.."
                        f"{self._max_unit - _PREFIX_SIZE}): is this a TubeMQ 1.1.0/1.2.0 "
                        "server? other releases need framing='standard'"
                    )
                end = pos + _PREFIX_SIZE + size
                if len(buf) < end:
                    break
                frames.append(self._frame(bytes(buf[pos + _PREFIX_SIZE : end])))
                pos = end
        except FrameError as exc:
            self._broken = exc
            buf.clear()
            raise
        del buf[:pos]
        return frames

    def _frame(self, unit: bytes) -> Frame:
        token, serial, count = _HEADER.unpack_from(unit)
        if token != BEGIN_TOKEN:
            raise FrameError(f"bad frame begin token 0x{token:08X} in a legacy frame")
        if not 0 < count <= MAX_LIST_SIZE:
            raise FrameError(f"frame declares {count} blocks (allowed 1..{MAX_LIST_SIZE})")
        pos, end = _HEADER.size, len(unit)
        parts: list[bytes] = []
        total = 0
        for _ in range(count):
            if end - pos < _PREFIX_SIZE:
                raise FrameError("a legacy frame's length ends inside the frame it announces")
            (length,) = LENGTH_PREFIX.unpack_from(unit, pos)
            if length > BLOCK_SIZE:
                raise FrameError(f"frame block of {length} bytes (at most {BLOCK_SIZE})")
            total += length
            if total > self._max_payload:
                raise FrameError(
                    f"frame payload exceeds the {self._max_payload}-byte cap (max_frame_bytes)"
                )
            pos += _PREFIX_SIZE
            if end - pos < length:
                raise FrameError("a legacy frame's length ends inside the frame it announces")
            parts.append(unit[pos : pos + length])
            pos += length
        # Whatever follows the last block in the unit is the sender's padding (see above).
        return Frame(serial, parts[0] if count == 1 else b"".join(parts))
