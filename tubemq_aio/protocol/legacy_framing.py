"""The length-prefixed framing of TubeMQ servers 1.1.0 and 1.2.0 (sans-I/O).

Those two releases put a 4-byte big-endian length before every frame, in both directions, and
refuse a frame longer than 5 MiB (docs/protocol/wire.md §1.7); every other release sends the bare
frame of :mod:`tubemq_aio.protocol.framing`. The frame itself is the same, so this module only
adds and strips the prefix around the ordinary codec.
"""

from __future__ import annotations

import struct
from typing import Final, Literal

from tubemq_aio.errors import FrameError, LocalProtocolError
from tubemq_aio.protocol.framing import Frame, FrameSplitter

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
    """Strips the length prefixes from a byte stream and feeds the frames to ``inner``.

    Each prefixed unit must hold exactly one whole frame: a unit that ends inside a frame, or a
    frame that runs past its unit, is a :class:`~tubemq_aio.errors.FrameError`, as is a prefix
    over ``max_frame_bytes``. After an error the stream is out of sync for good, as with the
    inner decoder.

    Args:
        inner: the ordinary frame decoder
            (:func:`~tubemq_aio.protocol.framing.new_frame_decoder`).
        max_frame_bytes: largest unit accepted, prefix included.
    """

    __slots__ = ("_broken", "_head", "_inner", "_left", "_max")

    def __init__(self, inner: FrameSplitter, max_frame_bytes: int = LEGACY_MAX_FRAME_BYTES) -> None:
        if max_frame_bytes <= _PREFIX_SIZE:
            raise ValueError("the legacy frame limit must exceed the 4-byte prefix")
        self._inner = inner
        self._max = max_frame_bytes
        self._head = bytearray()  # an incomplete prefix
        self._left = 0  # bytes of the current unit not yet passed on
        self._broken: FrameError | None = None

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete prefix or frame."""
        return len(self._head) + self._inner.buffered

    def feed(self, data: bytes | bytearray | memoryview) -> list[Frame]:
        """Add received bytes and return every frame they complete, in order.

        Raises:
            FrameError: the stream is malformed; this decoder is unusable from now on.
        """
        if self._broken is not None:
            raise self._broken
        try:
            return self._feed(memoryview(data))
        except FrameError as exc:
            self._broken = exc
            raise

    def _feed(self, view: memoryview) -> list[Frame]:
        frames: list[Frame] = []
        pos, end = 0, len(view)
        while pos < end:
            if self._left == 0:
                take = min(_PREFIX_SIZE - len(self._head), end - pos)
                self._head += view[pos : pos + take]
                pos += take
                if len(self._head) < _PREFIX_SIZE:
                    break
                (size,) = LENGTH_PREFIX.unpack(self._head)
                self._head.clear()
                if size == 0 or size + _PREFIX_SIZE > self._max:
                    raise FrameError(
                        f"legacy frame length {size} (allowed 1..{self._max - _PREFIX_SIZE}): "
                        "is this a TubeMQ 1.1.0/1.2.0 server? other releases need "
                        "framing='standard'"
                    )
                self._left = size
                continue
            take = min(self._left, end - pos)
            got = self._inner.feed(view[pos : pos + take])
            pos += take
            self._left -= take
            if got:  # a unit's one frame must end exactly where the unit does
                if self._left or len(got) > 1 or self._inner.buffered:
                    raise FrameError("a legacy frame's unit holds more than one frame")
                frames.extend(got)
            elif self._left == 0:
                raise FrameError("a legacy frame's length ends inside the frame it announces")
        return frames
