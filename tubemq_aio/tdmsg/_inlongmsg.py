"""Decoders for InLongMsg v0-v3 (everything between the leading and trailing magic).

v0-v2 ("default" layout) and v3 ("mixed attributes") share one header; see docs/tdmsg.md
for the byte tables.
"""

from __future__ import annotations

from tubemq_aio.errors import TDMsgError
from tubemq_aio.tdmsg._common import Budget, Reader, decode_java_utf, decode_text, snappy_uncompress
from tubemq_aio.tdmsg._records import TDFormat, TDPacket, TDRecord, make_record, record_maker

__all__ = ["decode_inlongmsg"]

_COMPRESS_NONE = 0
_COMPRESS_SNAPPY = 1


def _group_data(reader: Reader, budget: Budget, what: str) -> bytes:
    """Read ``dataLen`` + compress flag + data of one attribute group and inflate it."""
    data_len = reader.length("dataLen")
    if data_len < 1:
        raise TDMsgError(f"{what}: dataLen {data_len} leaves no room for the compress flag")
    compress = reader.u8("compress flag")
    data = reader.take(data_len - 1, "group data")
    if compress == _COMPRESS_SNAPPY:
        return snappy_uncompress(data, budget, what)
    if compress != _COMPRESS_NONE:
        raise TDMsgError(f"{what}: unknown compress flag {compress}")
    return data


def _length_prefixed(data: bytes, what: str) -> list[bytes]:
    """Split ``data`` made of repeated ``[int32 len][len bytes]`` items."""
    reader = Reader(data, what)
    items: list[bytes] = []
    while reader.remaining:
        size = reader.length("record length")
        items.append(reader.take(size, "record"))
    return items


def _mixed_records(data: bytes, common_attr: str, time_ms: int | None, what: str) -> list[TDRecord]:
    """Split v3 group data: blocks of ``[msgLen][msg][attrLen][attr]`` items."""
    outer = Reader(data, what)
    records: list[TDRecord] = []
    while outer.remaining:
        block_len = outer.length("block length")
        block = Reader(outer.take(block_len, "block"), what)
        while block.remaining:
            msg_len = block.length("item length")
            if msg_len == 0:
                raise TDMsgError(f"{what}: empty item")
            msg = block.take(msg_len, "item")
            attr_len = block.length("item attribute length")
            if attr_len == 0:
                raise TDMsgError(f"{what}: empty item attribute")
            item_attr = decode_text(block.take(attr_len, "item attribute"))
            records.append(make_record(msg, f"{common_attr}&{item_attr}", TDFormat.V3, time_ms))
    return records


def decode_inlongmsg(inner: bytes, version: int, budget: Budget) -> TDPacket:
    """Decode the bytes between the two magics of an InLongMsg v0-v3 payload.

    Args:
        inner: The payload without its 2-byte leading and trailing magic.
        version: 0, 1, 2 or 3 (taken from the magic).
        budget: The decompression budget of this decode call.

    Returns:
        The decoded packet.

    Raises:
        TDMsgError: The payload is malformed.
    """
    fmt = TDFormat(version)
    what = f"InLongMsg v{version}"
    reader = Reader(inner, what)
    create_time = reader.i64("createTime") if version >= 1 else None
    msg_count = reader.i32("msgCount") if version >= 2 else None
    attr_count = reader.i32("attrCount")
    # Each group needs at least a u16 attr length, an int32 dataLen and the compress flag.
    min_group = 7 + (4 if version == 2 else 0)
    if attr_count < 0 or attr_count * min_group > reader.remaining:
        raise TDMsgError(f"{what}: attrCount {attr_count} does not fit in the payload")

    records: list[TDRecord] = []
    for _ in range(attr_count):
        attr_len = reader.u16("attribute length")
        attr = decode_java_utf(reader.take(attr_len, "attribute"), what)
        if version == 2:
            reader.i32("itemCount")  # informational only
        data = _group_data(reader, budget, what)
        if version == 3:
            records.extend(_mixed_records(data, attr, create_time, what))
        else:
            build = record_maker(attr, fmt, create_time)
            records.extend(build(item) for item in _length_prefixed(data, what))
    if reader.remaining:
        raise TDMsgError(f"{what}: {reader.remaining} unexpected bytes after the last group")
    return TDPacket(
        format=fmt,
        records=tuple(records),
        create_time_ms=create_time,
        msg_count=msg_count,
    )
