"""Decoder for INLONG_MSG_V1: a (possibly compressed) protobuf ``MessageObjs`` batch.

The protobuf wire format is read by hand: only four small messages are involved and a
hand-written reader bounds every length against the remaining bytes.

Schema (proto2)::

    MessageObjs   { repeated MessageObj msgs = 1; }
    MessageObj    { int64 msgTime = 1; string sourceIp = 2; bytes body = 3;
                    repeated MapFieldEntry params = 4; }
    MapFieldEntry { string key = 1; string value = 2; }
"""

from __future__ import annotations

from collections.abc import Iterator

from tubemq_aio.errors import TDMsgError
from tubemq_aio.tdmsg._common import Budget, decode_text, gunzip, snappy_uncompress
from tubemq_aio.tdmsg._records import TDFormat, TDPacket, TDRecord, make_record

__all__ = ["COMPRESS_TYPES", "decode_pb_batch"]

_WHAT = "INLONG_MSG_V1"

#: Accepted spellings of the ``compressType`` attribute, mapped to a canonical name.
COMPRESS_TYPES: dict[str, str] = {
    "": "NONE",
    "0": "NONE",
    "NONE": "NONE",
    "INLONG_NO_COMPRESS": "NONE",
    "1": "INLONG_GZ",
    "INLONG_GZ": "INLONG_GZ",
    "2": "INLONG_SNAPPY",
    "INLONG_SNAPPY": "INLONG_SNAPPY",
}

_VARINT = 0
_FIXED64 = 1
_LEN = 2
_FIXED32 = 5


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """Read a base-128 varint at ``pos``; return (value mod 2**64, next position)."""
    value = 0
    for shift in range(0, 70, 7):
        if pos >= len(data):
            raise TDMsgError(f"{_WHAT}: truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value & 0xFFFF_FFFF_FFFF_FFFF, pos
    raise TDMsgError(f"{_WHAT}: varint longer than 10 bytes")


def _fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """Yield (field number, wire type, value) for every field of one message.

    Varints come back as ints, length-delimited and fixed-size fields as bytes.
    """
    pos = 0
    end = len(data)
    while pos < end:
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise TDMsgError(f"{_WHAT}: field number 0")
        value: int | bytes
        if wire == _VARINT:
            value, pos = _varint(data, pos)
        elif wire in (_FIXED64, _FIXED32, _LEN):
            if wire == _LEN:
                size, pos = _varint(data, pos)
            else:
                size = 8 if wire == _FIXED64 else 4
            if size > end - pos:
                raise TDMsgError(f"{_WHAT}: field {number} length {size} exceeds the message")
            value = data[pos : pos + size]
            pos += size
        else:
            raise TDMsgError(f"{_WHAT}: unsupported wire type {wire} (field {number})")
        yield number, wire, value


def _expect(wire: int, want: int, name: str) -> None:
    if wire != want:
        raise TDMsgError(f"{_WHAT}: field {name} has wire type {wire}, expected {want}")


def _map_entry(data: bytes) -> tuple[str, str]:
    key = value = ""
    for number, wire, raw in _fields(data):
        if number in (1, 2):
            _expect(wire, _LEN, "MapFieldEntry.key/value")
            assert isinstance(raw, bytes)
            if number == 1:
                key = decode_text(raw)
            else:
                value = decode_text(raw)
    return key, value


def _message_obj(data: bytes, group_id: str | None, stream_id: str | None) -> TDRecord:
    msg_time = 0
    source_ip = ""
    body = b""
    params: dict[str, str] = {}
    for number, wire, raw in _fields(data):
        if number == 1:
            _expect(wire, _VARINT, "MessageObj.msgTime")
            assert isinstance(raw, int)
            msg_time = raw - (1 << 64) if raw >= 1 << 63 else raw
        elif number in (2, 3, 4):
            _expect(wire, _LEN, "MessageObj.sourceIp/body/params")
            assert isinstance(raw, bytes)
            if number == 2:
                source_ip = decode_text(raw)
            elif number == 3:
                body = raw
            else:
                key, value = _map_entry(raw)
                params[key] = value
    return make_record(body, params, TDFormat.PB_V1, msg_time, source_ip, group_id, stream_id)


def decode_pb_batch(
    body: bytes,
    compress_type: str,
    budget: Budget,
    group_id: str | None = None,
    stream_id: str | None = None,
) -> TDPacket:
    """Decode an INLONG_MSG_V1 body.

    Args:
        body: The TubeMQ message body.
        compress_type: The ``compressType`` attribute (a name or its number).
        budget: The decompression budget of this decode call.
        group_id: Group id for records whose params carry no ``groupId``.
        stream_id: Stream id for records whose params carry no ``streamId``.

    Returns:
        The decoded packet.

    Raises:
        TDMsgError: Unknown compression, corrupt compressed data or protobuf.
    """
    kind = COMPRESS_TYPES.get(compress_type.strip().upper())
    if kind is None:
        raise TDMsgError(f"{_WHAT}: unknown compressType {compress_type!r}")
    if kind == "INLONG_SNAPPY":
        body = snappy_uncompress(body, budget, _WHAT)
    elif kind == "INLONG_GZ":
        body = gunzip(body, budget, _WHAT)
    records = []
    for number, wire, raw in _fields(body):
        if number == 1:
            _expect(wire, _LEN, "MessageObjs.msgs")
            assert isinstance(raw, bytes)
            records.append(_message_obj(raw, group_id, stream_id))
    return TDPacket(format=TDFormat.PB_V1, records=tuple(records))
