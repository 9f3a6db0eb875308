"""Minimal protobuf wire-format helpers for the RPC envelope's hot path.

The envelope messages (``RpcConnHeader``, ``RequestHeader``, ``RequestBody`` and the response
counterparts) hold a handful of varint and bytes fields. Encoding them by hand, with the constant
parts cached, costs a fraction of building generated message objects for every call; the tests
cross-check every byte against the generated classes.
"""

from __future__ import annotations

from tubemq_aio.errors import RemoteProtocolError

__all__ = ["FieldValue", "decode_varint", "encode_varint", "read_delimited", "read_fields"]

#: A decoded field: an int for varint fields, bytes for length-delimited ones.
FieldValue = int | bytes

_WIRE_VARINT = 0
_WIRE_FIXED64 = 1
_WIRE_LEN = 2
_WIRE_FIXED32 = 5

# Single-byte varints are by far the most common; a table avoids a loop and an allocation.
_SMALL_VARINTS = [bytes((i,)) for i in range(128)]


def encode_varint(value: int) -> bytes:
    """Encode a non-negative int as an unsigned LEB128 varint.

    Negative values are encoded as their 64-bit two's complement, as protobuf does for int32/int64.
    """
    if 0 <= value < 128:
        return _SMALL_VARINTS[value]
    if 0 < value < 16384:  # two bytes: every frame and body length of a message up to 16 KB
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    if value < 0:
        value &= (1 << 64) - 1
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_varint(data: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Decode a varint starting at ``pos``.

    Returns:
        ``(value, next_pos)``.

    Raises:
        RemoteProtocolError: the varint is truncated or longer than 10 bytes.
    """
    result = 0
    shift = 0
    end = len(data)
    while True:
        if pos >= end:
            raise RemoteProtocolError("truncated varint in RPC envelope")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise RemoteProtocolError("varint longer than 10 bytes in RPC envelope")


def read_delimited(data: bytes, pos: int) -> tuple[bytes, int]:
    """Read one varint-length-prefixed message starting at ``pos``.

    Returns:
        ``(message_bytes, next_pos)``.

    Raises:
        RemoteProtocolError: the length prefix points past the end of ``data``.
    """
    length, pos = decode_varint(data, pos)
    end = pos + length
    if end > len(data):
        raise RemoteProtocolError("delimited message runs past the end of the frame payload")
    return data[pos:end], end


def read_fields(message: bytes) -> dict[int, FieldValue]:
    """Decode the top-level fields of a protobuf message into ``{field_number: value}``.

    Varint fields become ints, length-delimited fields bytes; fixed-width fields are skipped. A
    repeated field keeps its last value (the envelope has no repeated fields).

    Raises:
        RemoteProtocolError: the message is malformed.
    """
    fields: dict[int, FieldValue] = {}
    pos = 0
    end = len(message)
    while pos < end:
        key, pos = decode_varint(message, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == _WIRE_VARINT:
            fields[number], pos = decode_varint(message, pos)
        elif wire_type == _WIRE_LEN:
            fields[number], pos = read_delimited(message, pos)
        elif wire_type == _WIRE_FIXED64:
            pos += 8
        elif wire_type == _WIRE_FIXED32:
            pos += 4
        else:
            raise RemoteProtocolError(f"unsupported protobuf wire type {wire_type}")
        if pos > end:
            raise RemoteProtocolError("protobuf field runs past the end of its message")
    return fields
