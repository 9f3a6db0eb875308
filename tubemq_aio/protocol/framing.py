"""TubeMQ frame encoding and incremental decoding (sans-I/O).

A frame on the wire, in both directions (docs/protocol/wire.md §1.1)::

    begin token (4, 0xFF7FF4FE) | serialNo (4) | listSize (4) | listSize x (len (4) | bytes)

All integers are big-endian. The payload is the concatenation of the blocks; the sender splits it
into 8192-byte blocks with a shorter last one, never an empty block (§1.2).
"""

from __future__ import annotations

import struct
from typing import NamedTuple, Protocol

from tubemq_aio.accelerator import compiled as _compiled_speedups
from tubemq_aio.errors import FrameError, LocalProtocolError

__all__ = [
    "BEGIN_TOKEN",
    "BLOCK_SIZE",
    "DEFAULT_MAX_FRAME_BYTES",
    "MAX_LIST_SIZE",
    "ONE_BLOCK_HEADER",
    "Frame",
    "FrameDecoder",
    "FrameSplitter",
    "encode_frame",
    "new_frame_decoder",
]

#: Marks the start of every frame (``RpcConstants.RPC_PROTOCOL_BEGIN_TOKEN``).
BEGIN_TOKEN = 0xFF7FF4FE
#: Payload block size used by every TubeMQ implementation.
BLOCK_SIZE = 8192
#: Largest ``listSize`` the Java decoder accepts: (20 MiB + 8 MiB) / 8192.
MAX_LIST_SIZE = 3584
#: Default cap on one frame's payload; the Java limit (3584 full blocks).
DEFAULT_MAX_FRAME_BYTES = MAX_LIST_SIZE * BLOCK_SIZE

_SERIAL_MASK = 0xFFFFFFFF
_HEADER = struct.Struct(">III")
_HEADER_ONE_BLOCK = struct.Struct(">IIII")
#: The header of a one-block frame, ``pack(BEGIN_TOKEN, serial_no, 1, size)`` for a payload of
#: ``1..BLOCK_SIZE`` bytes (the caller checks the size).
ONE_BLOCK_HEADER = _HEADER_ONE_BLOCK
_BLOCK_LEN = struct.Struct(">I")
_HEADER_SIZE = _HEADER.size
_ONE_BLOCK_SIZE = _HEADER_ONE_BLOCK.size
_new_frame = tuple.__new__  # Frame(...) runs a Python-level __new__; this is a third of it
_BLOCK_LEN_SIZE = _BLOCK_LEN.size


class Frame(NamedTuple):
    """One decoded frame: the serial number and the reassembled payload."""

    serial_no: int
    payload: bytes


def encode_frame(serial_no: int, payload: bytes) -> bytes:
    """Encode one frame around ``payload``.

    Args:
        serial_no: request id, 0..2**32-1; the server echoes it in the response.
        payload: the RPC envelope bytes (never empty).

    Returns:
        The complete frame, ready for ``transport.write``.

    Raises:
        LocalProtocolError: the payload is empty, or needs more than :data:`MAX_LIST_SIZE` blocks.
    """
    size = len(payload)
    if size <= BLOCK_SIZE:
        if size == 0:
            raise LocalProtocolError("a frame payload cannot be empty")
        return _HEADER_ONE_BLOCK.pack(BEGIN_TOKEN, serial_no & _SERIAL_MASK, 1, size) + payload
    blocks = -(-size // BLOCK_SIZE)
    if blocks > MAX_LIST_SIZE:
        raise LocalProtocolError(
            f"payload of {size} bytes needs {blocks} blocks; the server accepts {MAX_LIST_SIZE}"
        )
    parts = [_HEADER.pack(BEGIN_TOKEN, serial_no & _SERIAL_MASK, blocks)]
    view = memoryview(payload)
    for start in range(0, size, BLOCK_SIZE):
        chunk = view[start : start + BLOCK_SIZE]
        parts.append(_BLOCK_LEN.pack(len(chunk)))
        parts.append(chunk.tobytes())
    return b"".join(parts)


class FrameDecoder:
    """Turns a byte stream, fed in chunks of any size, into complete frames.

    Memory stays bounded: bytes are held only until the block they belong to is complete, and a
    frame whose declared size passes ``max_frame_bytes`` is refused as soon as its header says so.
    Every TubeMQ sender splits a payload into blocks of at most :data:`BLOCK_SIZE` bytes, so a
    block longer than ``BLOCK_SIZE`` is refused too: a corrupted length is caught at
    once instead of leaving the decoder waiting for megabytes that later answers would fill.
    After a :class:`~tubemq_aio.errors.FrameError` the stream is out of sync for good: the decoder
    refuses every later call and the connection must be closed.

    Args:
        max_frame_bytes: largest payload accepted for one frame.
        max_list_size: largest block count accepted for one frame.
    """

    __slots__ = (
        "_blocks_left",
        "_broken",
        "_buf",
        "_max_block",
        "_max_blocks",
        "_max_bytes",
        "_parts",
        "_serial",
        "_size",
    )

    def __init__(
        self,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_list_size: int = MAX_LIST_SIZE,
    ) -> None:
        if max_frame_bytes <= 0 or max_list_size <= 0:
            raise ValueError("frame limits must be positive")
        self._max_bytes = max_frame_bytes
        self._max_blocks = max_list_size
        self._max_block = min(BLOCK_SIZE, max_frame_bytes)
        self._buf = bytearray()
        self._broken: FrameError | None = None
        self._serial = 0
        self._blocks_left = 0
        self._parts: list[bytes] = []
        self._size = 0

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame."""
        return len(self._buf) + self._size

    def feed(self, data: bytes | bytearray | memoryview) -> list[Frame]:
        """Add received bytes and return every frame they complete, in order.

        Raises:
            FrameError: the stream is malformed; this decoder is unusable from now on.
        """
        if self._broken is not None:
            raise self._broken
        buf = self._buf
        # Usually nothing is held back: parse the chunk itself and keep only its incomplete tail,
        # which spares a copy of every complete frame into the buffer.
        src: bytes | bytearray
        if buf:
            buf += data
            src = buf
        else:
            src = data if isinstance(data, bytes) else bytes(data)
        try:
            frames, consumed = self._parse(src)
        except FrameError as exc:
            self._broken = exc
            buf.clear()
            self._parts = []
            raise
        if src is buf:
            del buf[:consumed]
        elif consumed < len(src):
            buf += memoryview(src)[consumed:]
        return frames

    def _parse(self, buf: bytes | bytearray) -> tuple[list[Frame], int]:
        frames: list[Frame] = []
        pos = 0
        end = len(buf)
        while True:
            if not self._blocks_left:
                if end - pos >= _ONE_BLOCK_SIZE:
                    # Fast path: a complete one-block frame (every answer but a large fetch).
                    token, serial, count, length = _HEADER_ONE_BLOCK.unpack_from(buf, pos)
                    start = pos + _ONE_BLOCK_SIZE
                    if (
                        count == 1
                        and token == BEGIN_TOKEN
                        and length <= self._max_block
                        and end - start >= length
                    ):
                        pos = start + length
                        frames.append(_new_frame(Frame, (serial, bytes(buf[start:pos]))))
                        continue
                if end - pos < _HEADER_SIZE:
                    return frames, pos
                token, serial, count = _HEADER.unpack_from(buf, pos)
                if token != BEGIN_TOKEN:
                    raise FrameError(f"bad frame begin token 0x{token:08X}")
                if not 0 < count <= self._max_blocks:
                    raise FrameError(
                        f"frame declares {count} blocks (allowed 1..{self._max_blocks})"
                    )
                pos += _HEADER_SIZE
                self._serial = serial
                self._blocks_left = count
                self._size = 0
            while self._blocks_left:
                if end - pos < _BLOCK_LEN_SIZE:
                    return frames, pos
                (length,) = _BLOCK_LEN.unpack_from(buf, pos)
                if self._size + length > self._max_bytes:
                    raise FrameError(
                        f"frame payload exceeds the {self._max_bytes}-byte cap (max_frame_bytes)"
                    )
                if length > BLOCK_SIZE:
                    raise FrameError(f"frame block of {length} bytes (at most {BLOCK_SIZE})")
                start = pos + _BLOCK_LEN_SIZE
                if end - start < length:
                    return frames, pos
                self._parts.append(bytes(buf[start : start + length]))
                self._size += length
                self._blocks_left -= 1
                pos = start + length
            parts = self._parts
            payload = parts[0] if len(parts) == 1 else b"".join(parts)
            self._parts = []
            self._size = 0
            frames.append(_new_frame(Frame, (self._serial, payload)))


class FrameSplitter(Protocol):
    """What a connection needs of a frame decoder (:class:`FrameDecoder` or its compiled twin)."""

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame."""
        ...

    def feed(self, data: bytes | bytearray | memoryview) -> list[Frame]:
        """Add received bytes and return every frame they complete, in order."""
        ...


def new_frame_decoder(
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, max_list_size: int = MAX_LIST_SIZE
) -> FrameSplitter:
    """A frame decoder: the compiled one of :mod:`tubemq_aio.accelerator` when it is built
    (same frames, errors and limits; each block byte is copied once), else :class:`FrameDecoder`.

    Args:
        max_frame_bytes: largest payload accepted for one frame.
        max_list_size: largest block count accepted for one frame.

    Raises:
        ValueError: a limit is not positive.
    """
    ext = _compiled_speedups()
    if ext is None:
        return FrameDecoder(max_frame_bytes, max_list_size)
    decoder: FrameSplitter = ext.FrameDecoder(max_frame_bytes, max_list_size)
    return decoder
