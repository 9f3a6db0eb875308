"""Decoder for InLongMsg v4, the binary message ("bin msg").

See docs/tdmsg.md for the byte table. Offsets below are relative to the first byte after the
leading ``0F 04`` magic.
"""

from __future__ import annotations

from tubemq_aio.errors import TDMsgError
from tubemq_aio.tdmsg._common import (
    Budget,
    Reader,
    decode_text,
    parse_attributes,
    snappy_uncompress,
)
from tubemq_aio.tdmsg._records import TDFormat, TDPacket, TDRecord, make_record, record_maker

__all__ = ["decode_binmsg"]

_WHAT = "InLongMsg v4"
_FIXED_SIZE = 29  # header (25) + attrLen (2) + inner magic (2)
_INNER_MAGIC = 0xEE01
_EXT_ITEM_ATTRS = 0x1
_EXT_STRING_IDS = 0x4
_COMPRESS_NONE = 0
_COMPRESS_SNAPPY = 1


def _item_records(body: bytes, common: dict[str, str], time_ms: int) -> list[TDRecord]:
    """Split a body of ``[int32 msgLen][msg][int32 attrLen][attr]`` items."""
    reader = Reader(body, _WHAT)
    records: list[TDRecord] = []
    while reader.remaining:
        msg_len = reader.length("item length")
        if msg_len == 0:
            raise TDMsgError(f"{_WHAT}: empty item")
        msg = reader.take(msg_len, "item")
        attr_len = reader.length("item attribute length")
        if attr_len == 0:
            raise TDMsgError(f"{_WHAT}: empty item attribute")
        attrs = parse_attributes(decode_text(reader.take(attr_len, "item attribute")))
        attrs.update(common)  # the common attributes win
        records.append(make_record(msg, attrs, TDFormat.V4, time_ms))
    return records


def decode_binmsg(inner: bytes, budget: Budget) -> TDPacket:
    """Decode the bytes between the two ``0F 04`` magics of an InLongMsg v4 payload.

    Args:
        inner: The bin msg (from ``totalLen`` up to and including the ``EE 01`` magic).
        budget: The decompression budget of this decode call.

    Returns:
        The decoded packet.

    Raises:
        TDMsgError: The payload is malformed.
    """
    reader = Reader(inner, _WHAT)
    total_len = reader.u32("totalLen")
    msg_type = reader.u8("msgType")
    group_num = reader.u16("groupId")
    stream_num = reader.u16("streamId")
    ext_field = reader.u16("extField")
    data_time = reader.u32("dataTime")
    msg_count = reader.u16("msgCount")
    unique_id = reader.u32("uniqueId")
    body_len = reader.u32("bodyLen")
    if body_len > reader.remaining:
        raise TDMsgError(f"{_WHAT}: bodyLen {body_len} exceeds the {reader.remaining} bytes left")
    body = reader.take(body_len, "body")
    attr_len = reader.u16("attrLen")
    attr_text = decode_text(reader.take(attr_len, "attributes"))
    magic = reader.u16("inner magic")
    if magic != _INNER_MAGIC:
        raise TDMsgError(f"{_WHAT}: inner magic 0x{magic:04X}, expected 0x{_INNER_MAGIC:04X}")
    if reader.remaining:
        raise TDMsgError(f"{_WHAT}: {reader.remaining} unexpected bytes after the inner magic")
    if total_len + 4 != body_len + attr_len + _FIXED_SIZE:
        raise TDMsgError(
            f"{_WHAT}: totalLen {total_len} disagrees with bodyLen {body_len} + attrLen {attr_len}"
        )

    compress = (msg_type & 0xE0) >> 5
    if compress == _COMPRESS_SNAPPY:
        body = snappy_uncompress(body, budget, _WHAT)
    elif compress != _COMPRESS_NONE:
        raise TDMsgError(f"{_WHAT}: unknown body compression type {compress}")

    time_ms = data_time * 1000
    common = parse_attributes(attr_text)
    common["dt"] = str(time_ms)
    if not ext_field & _EXT_STRING_IDS:
        common["groupId"] = str(group_num)
        common["streamId"] = str(stream_num)
    common["cnt"] = str(msg_count)

    if ext_field & _EXT_ITEM_ATTRS:
        records = _item_records(body, common, time_ms)
    else:
        build = record_maker(common, TDFormat.V4, time_ms)
        records = []
        items = Reader(body, _WHAT)
        while items.remaining:
            size = items.length("record length")
            records.append(build(items.take(size, "record")))
    return TDPacket(
        format=TDFormat.V4,
        records=tuple(records),
        create_time_ms=time_ms,
        msg_count=msg_count,
        unique_id=unique_id,
        ext_field=ext_field,
    )
