"""Shared pieces of the TDMsg decoders: the error type, a bounds-checked reader, the
decompression budget, snappy/gzip inflation and attribute-string parsing.

Everything here is pure (no I/O) and raises only :class:`TDMsgError` on bad input.
"""

from __future__ import annotations

import struct
import zlib
from types import ModuleType

from tubemq_aio.checks import Checks
from tubemq_aio.errors import TDMsgError

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "Budget",
    "Reader",
    "decode_java_utf",
    "decode_text",
    "gunzip",
    "parse_attributes",
    "snappy_uncompress",
]

#: Default cap on the bytes that decompression may produce for one decode call (64 MiB).
DEFAULT_MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024

_INSTALL_HINT = "the tdmsg extra: pip install '.[tdmsg]' in a clone"


class Budget:
    """How many more decompressed bytes one decode call may produce.

    Args:
        limit: The total number of bytes all decompressions together may yield.
    """

    __slots__ = ("remaining",)

    def __init__(self, limit: int) -> None:
        if limit < 0:
            raise TDMsgError(f"max_decompressed_size must be >= 0, got {limit}")
        self.remaining = limit

    def take(self, size: int) -> None:
        """Account for ``size`` more decompressed bytes.

        Raises:
            TDMsgError: The cap would be exceeded.
        """
        if size > self.remaining:
            raise TDMsgError(
                f"decompressed data would exceed max_decompressed_size "
                f"({size} bytes wanted, {self.remaining} left)"
            )
        self.remaining -= size


_I16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")


class Reader:
    """A big-endian cursor over a byte string that never reads past its end.

    Args:
        data: The bytes to read.
        what: A short name of the structure being read, used in error messages.
    """

    __slots__ = ("_data", "_pos", "_what")

    def __init__(self, data: bytes, what: str) -> None:
        self._data = data
        self._pos = 0
        self._what = what

    @property
    def remaining(self) -> int:
        """Bytes not read yet."""
        return len(self._data) - self._pos

    def _need(self, size: int, field: str) -> int:
        pos = self._pos
        if size > len(self._data) - pos:
            raise TDMsgError(
                f"{self._what}: truncated {field} (need {size} bytes at offset {pos}, "
                f"{len(self._data) - pos} left)"
            )
        self._pos = pos + size
        return pos

    def u8(self, field: str) -> int:
        """Read one unsigned byte."""
        return self._data[self._need(1, field)]

    def u16(self, field: str) -> int:
        """Read an unsigned 16-bit integer."""
        return int(_I16.unpack_from(self._data, self._need(2, field))[0])

    def u32(self, field: str) -> int:
        """Read an unsigned 32-bit integer."""
        return int(_U32.unpack_from(self._data, self._need(4, field))[0])

    def i32(self, field: str) -> int:
        """Read a signed 32-bit integer."""
        return int(_I32.unpack_from(self._data, self._need(4, field))[0])

    def i64(self, field: str) -> int:
        """Read a signed 64-bit integer."""
        return int(_I64.unpack_from(self._data, self._need(8, field))[0])

    def length(self, field: str) -> int:
        """Read a signed 32-bit length and check it against the remaining bytes.

        Raises:
            TDMsgError: The length is negative or longer than what is left.
        """
        value = int(_I32.unpack_from(self._data, self._need(4, field))[0])
        if value < 0 or value > self.remaining:
            raise TDMsgError(
                f"{self._what}: {field} {value} out of range ({self.remaining} bytes left)"
            )
        return value

    def take(self, size: int, field: str) -> bytes:
        """Read ``size`` raw bytes."""
        pos = self._need(size, field)
        return self._data[pos : pos + size]

    def rest(self) -> bytes:
        """Read everything that is left."""
        pos = self._pos
        self._pos = len(self._data)
        return self._data[pos:]


def decode_text(raw: bytes) -> str:
    """Decode attribute bytes as UTF-8, replacing invalid sequences (as Java's ``new String``)."""
    return raw.decode("utf-8", errors="replace")


def decode_java_utf(raw: bytes, what: str) -> str:
    """Decode Java "modified UTF-8" (``DataOutput.writeUTF`` payload without its length).

    Modified UTF-8 differs from UTF-8 in two places: NUL is written as ``C0 80`` and
    characters outside the BMP are written as two 3-byte surrogates.

    Raises:
        TDMsgError: The bytes are not valid modified UTF-8.
    """
    if raw.isascii():
        return raw.decode("ascii")
    try:
        text = raw.replace(b"\xc0\x80", b"\x00").decode("utf-8", errors="surrogatepass")
        # Re-pair surrogates written one by one into real code points.
        return text.encode("utf-16-le", errors="surrogatepass").decode("utf-16-le")
    except UnicodeError as exc:
        raise TDMsgError(f"{what}: invalid modified UTF-8 string") from exc


def parse_attributes(text: str) -> dict[str, str]:
    """Parse an InLong attribute string ``k1=v1&k2=v2`` into a dict.

    Items are separated by ``&`` and trimmed; empty items are skipped; the key is the text
    before the first ``=`` (an item without ``=`` maps to ``""``); a repeated key keeps its
    last value. Unlike Java's strict splitter this never fails.

    Args:
        text: The attribute string.

    Returns:
        The keys and values in order of first appearance.
    """
    checks = Checks("tdmsg")
    checks.instance("attributes", text, str)
    checks.done()
    result: dict[str, str] = {}
    for item in text.split("&"):
        item = item.strip()
        if not item:
            continue
        key, _, value = item.partition("=")
        result[key] = value
    return result


def _load_snappy() -> ModuleType:
    try:
        import cramjam
    except ImportError as exc:
        raise TDMsgError(
            "this payload is snappy-compressed and the optional 'cramjam' package is not "
            f"installed: {_INSTALL_HINT}"
        ) from exc
    return cramjam.snappy


def snappy_uncompress(data: bytes, budget: Budget, what: str) -> bytes:
    """Inflate a snappy *raw block* (no framing), charging its size to ``budget``.

    The declared uncompressed size (the block's leading varint) is checked against the
    budget before any output is allocated.

    Raises:
        TDMsgError: ``cramjam`` is missing, the block is corrupt, or it is too large.
    """
    snappy = _load_snappy()
    try:
        declared = int(snappy.decompress_raw_len(data))
    except Exception as exc:  # cramjam raises its own DecompressionError
        raise TDMsgError(f"{what}: corrupt snappy block header") from exc
    budget.take(declared)
    try:
        out = bytes(snappy.decompress_raw(data))
    except Exception as exc:
        raise TDMsgError(f"{what}: corrupt snappy block") from exc
    if len(out) != declared:
        raise TDMsgError(f"{what}: snappy block inflated to {len(out)} bytes, declared {declared}")
    return out


def gunzip(data: bytes, budget: Budget, what: str) -> bytes:
    """Inflate one gzip (or zlib) stream, charging its size to ``budget``.

    Raises:
        TDMsgError: The stream is corrupt, truncated, followed by garbage, or too large.
    """
    inflater = zlib.decompressobj(wbits=32 + zlib.MAX_WBITS)  # auto-detect gzip/zlib header
    try:
        out = inflater.decompress(data, budget.remaining + 1)
    except zlib.error as exc:
        raise TDMsgError(f"{what}: corrupt gzip stream") from exc
    budget.take(len(out))
    if not inflater.eof:
        raise TDMsgError(f"{what}: truncated gzip stream")
    if inflater.unused_data:
        raise TDMsgError(f"{what}: {len(inflater.unused_data)} bytes after the gzip stream")
    return out
