"""Tests of tubemq_aio.tdmsg against byte vectors assembled field by field.

Every payload below is built with struct.pack from the byte tables in docs/tdmsg.md, never
with an encoder of ours. Snappy blocks are either written by hand (a single literal) or made
by cramjam's own compressor; gzip streams by the standard library.
"""

from __future__ import annotations

import dataclasses
import gzip
import os
import struct
import sys
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from tubemq_aio import tdmsg
from tubemq_aio.errors import ConfigError, TDMsgError, TubeMQError
from tubemq_aio.tdmsg import TDFormat, TDRecord

# --------------------------------------------------------------------------- helpers


def i32(value: int) -> bytes:
    return struct.pack(">i", value)


def u16(value: int) -> bytes:
    return struct.pack(">H", value)


def i64(value: int) -> bytes:
    return struct.pack(">q", value)


def java_utf(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return u16(len(raw)) + raw


def items(*records: bytes) -> bytes:
    """Repeated [int32 len][bytes]."""
    return b"".join(i32(len(r)) + r for r in records)


def snappy_literal(data: bytes) -> bytes:
    """A snappy raw block holding ``data`` as one literal (no copies), written by hand."""
    assert 0 < len(data) <= 0x10000
    out = bytearray()
    n = len(data)
    while True:  # preamble: uncompressed length as little-endian base-128 varint
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            break
    if len(data) <= 60:
        out.append((len(data) - 1) << 2)
    elif len(data) <= 256:
        out += bytes([60 << 2, len(data) - 1])
    else:
        out += bytes([61 << 2]) + struct.pack("<H", len(data) - 1)
    return bytes(out + data)


def wrap(version: int, inner: bytes) -> bytes:
    magic = bytes([0x0F, version])
    return magic + inner + magic


def group(attr: str, data: bytes, *, compress: int = 0, item_count: int | None = None) -> bytes:
    """One v0-v3 attribute group: attr, [itemCount], dataLen, compress flag, data."""
    out = java_utf(attr)
    if item_count is not None:
        out += i32(item_count)
    return out + i32(len(data) + 1) + bytes([compress]) + data


def bin_msg(
    body: bytes,
    attr: bytes = b"",
    *,
    msg_type: int = 0,
    group_num: int = 7,
    stream_num: int = 9,
    ext_field: int = 0,
    data_time: int = 1_700_000_000,
    count: int = 1,
    unique_id: int = 42,
    inner_magic: int = 0xEE01,
    total_len: int | None = None,
) -> bytes:
    """A whole v4 payload, outer magics included."""
    if total_len is None:
        total_len = len(body) + len(attr) + 25
    inner = (
        struct.pack(">I", total_len)
        + bytes([msg_type])
        + u16(group_num)
        + u16(stream_num)
        + u16(ext_field)
        + struct.pack(">I", data_time)
        + u16(count)
        + struct.pack(">I", unique_id)
        + struct.pack(">I", len(body))
        + body
        + u16(len(attr))
        + attr
        + u16(inner_magic)
    )
    return wrap(4, inner)


def varint(value: int) -> bytes:
    value &= 0xFFFF_FFFF_FFFF_FFFF
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def pb_len(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def pb_varint(number: int, value: int) -> bytes:
    return varint(number << 3) + varint(value)


def message_obj(time_ms: int, ip: str, body: bytes, params: dict[str, str]) -> bytes:
    out = pb_varint(1, time_ms) + pb_len(2, ip.encode()) + pb_len(3, body)
    for key, value in params.items():
        out += pb_len(4, pb_len(1, key.encode()) + pb_len(2, value.encode()))
    return out


def cramjam_compress(data: bytes) -> bytes:
    import cramjam  # a dev dependency: the snappy tests must run, never skip

    return bytes(cramjam.snappy.compress_raw(data))


@pytest.fixture
def snappy() -> None:
    import cramjam  # noqa: F401  (fails loudly when the dev extra is incomplete)


CREATE = 1_700_000_000_123

# --------------------------------------------------------------------------- v0-v2


def test_v0_has_no_create_time() -> None:
    body = wrap(0, i32(1) + group("groupId=g&streamId=s", items(b"a", b"bc")))
    packet = tdmsg.decode_packet(body)
    assert packet.format is TDFormat.V0
    assert packet.create_time_ms is None
    assert packet.msg_count is None
    assert [r.data for r in packet.records] == [b"a", b"bc"]
    assert all(r.time_ms is None and r.format is TDFormat.V0 for r in packet.records)


def test_v1_multiple_groups_and_attributes() -> None:
    body = wrap(
        1,
        i64(CREATE)
        + i32(2)
        + group("groupId=g1&streamId=s1&dt=1&cnt=2", items(b"first", b""))
        + group(" bid=b2 & tid=t2 &flag&&k=a=b", items(b"third")),
    )
    records = tdmsg.decode(body)
    assert [r.data for r in records] == [b"first", b"", b"third"]
    first, _, third = records
    assert first.group_id == "g1"
    assert first.stream_id == "s1"
    assert dict(first.attributes) == {"groupId": "g1", "streamId": "s1", "dt": "1", "cnt": "2"}
    assert first.raw_attributes == "groupId=g1&streamId=s1&dt=1&cnt=2"
    assert first.time_ms == CREATE
    # legacy bid/tid keys, trimming, key without value, value containing '='
    assert third.group_id == "b2"
    assert third.stream_id == "t2"
    assert dict(third.attributes) == {"bid": "b2", "tid": "t2", "flag": "", "k": "a=b"}


def test_v1_zero_groups() -> None:
    packet = tdmsg.decode_packet(wrap(1, i64(CREATE) + i32(0)))
    assert packet.records == ()
    assert packet.create_time_ms == CREATE


def test_v1_snappy_hand_literal(snappy: None) -> None:
    data = items(b"x" * 70, b"y")
    body = wrap(1, i64(CREATE) + i32(1) + group("streamId=s", snappy_literal(data), compress=1))
    assert [r.data for r in tdmsg.decode(body)] == [b"x" * 70, b"y"]


def test_v1_snappy_library_block(snappy: None) -> None:
    recs = [b"row-%d," % i * 20 for i in range(50)]
    block = cramjam_compress(items(*recs))
    body = wrap(1, i64(CREATE) + i32(1) + group("streamId=s", block, compress=1))
    assert [r.data for r in tdmsg.decode(body)] == recs


def test_v2_counts() -> None:
    body = wrap(
        2,
        i64(CREATE)
        + i32(3)
        + i32(2)
        + group("streamId=a", items(b"1", b"2"), item_count=2)
        + group("streamId=b", items(b"3"), item_count=1),
    )
    packet = tdmsg.decode_packet(body)
    assert packet.format is TDFormat.V2
    assert packet.msg_count == 3
    assert [(r.stream_id, r.data) for r in packet.records] == [
        ("a", b"1"),
        ("a", b"2"),
        ("b", b"3"),
    ]


def test_modified_utf8_attribute() -> None:
    # NUL as C0 80, U+1F600 as two 3-byte surrogates (CESU-8), U+00E9 as normal UTF-8.
    raw = b"k=a\xc0\x80b&e=\xc3\xa9&s=\xed\xa0\xbd\xed\xb8\x80"
    body = wrap(1, i64(CREATE) + i32(1) + java_utf(raw) + i32(1 + 5) + b"\x00" + items(b"z"))
    (record,) = tdmsg.decode(body)
    assert dict(record.attributes) == {"k": "a\x00b", "e": "é", "s": "\U0001f600"}


# --------------------------------------------------------------------------- v3


def v3_block(*pairs: tuple[bytes, bytes]) -> bytes:
    inner = b"".join(i32(len(m)) + m + i32(len(a)) + a for m, a in pairs)
    return i32(len(inner)) + inner


def test_v3_item_attributes() -> None:
    data = v3_block((b"m1", b"dt=5&k=1"), (b"m2", b"k=2")) + v3_block((b"m3", b"groupId=x"))
    body = wrap(3, i64(CREATE) + i32(3) + i32(1) + group("groupId=g&streamId=s&k=0", data))
    packet = tdmsg.decode_packet(body)
    assert packet.format is TDFormat.V3
    assert packet.msg_count == 3
    assert [r.data for r in packet.records] == [b"m1", b"m2", b"m3"]
    r1, r2, r3 = packet.records
    assert r1.raw_attributes == "groupId=g&streamId=s&k=0&dt=5&k=1"
    assert dict(r1.attributes) == {"groupId": "g", "streamId": "s", "k": "1", "dt": "5"}
    assert r2.attributes["k"] == "2"
    assert r3.group_id == "x"  # the item attribute comes last, so it wins
    assert r3.stream_id == "s"
    assert r1.time_ms == CREATE


def test_v3_snappy(snappy: None) -> None:
    data = v3_block((b"payload", b"a=1"))
    body = wrap(3, i64(CREATE) + i32(1) + i32(1) + group("s=1", snappy_literal(data), compress=1))
    (record,) = tdmsg.decode(body)
    assert record.data == b"payload"
    assert dict(record.attributes) == {"s": "1", "a": "1"}


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(i32(8) + i32(0) + i32(0), id="zero-length-item"),
        pytest.param(i32(9) + i32(1) + b"m" + i32(0), id="zero-length-attr"),
        pytest.param(i32(50) + i32(1) + b"m", id="block-longer-than-data"),
        pytest.param(i32(9) + i32(1) + b"m" + i32(5) + b"a", id="attr-overruns-block"),
    ],
)
def test_v3_malformed(data: bytes) -> None:
    body = wrap(3, i64(CREATE) + i32(1) + i32(1) + group("s=1", data))
    with pytest.raises(TDMsgError):
        tdmsg.decode(body)


# --------------------------------------------------------------------------- v4


def test_v4_numeric_ids_plain_records() -> None:
    body = bin_msg(items(b"r1", b"r22"), b"m=3&dt=1", count=2, group_num=0xFFFF, ext_field=0x20)
    packet = tdmsg.decode_packet(body)
    assert packet.format is TDFormat.V4
    assert packet.create_time_ms == 1_700_000_000_000
    assert packet.msg_count == 2
    assert packet.unique_id == 42
    assert packet.ext_field == 0x20
    assert [r.data for r in packet.records] == [b"r1", b"r22"]
    record = packet.records[0]
    assert dict(record.attributes) == {
        "m": "3",
        "dt": "1700000000000",  # the header's data time replaces the attribute's
        "groupId": "65535",  # numeric ids read unsigned
        "streamId": "9",
        "cnt": "2",
    }
    assert record.group_id == "65535"
    assert record.time_ms == 1_700_000_000_000


def test_v4_string_ids_and_item_attributes() -> None:
    body_items = i32(2) + b"m1" + i32(7) + b"k=1&x=2" + i32(2) + b"m2" + i32(9) + b"groupId=z"
    body = bin_msg(body_items, b"groupId=g&streamId=s&x=common", ext_field=0x4 | 0x1, count=2)
    r1, r2 = tdmsg.decode(body)
    assert (r1.data, r2.data) == (b"m1", b"m2")
    assert r1.attributes["x"] == "common"  # common attributes win over the item's
    assert r1.attributes["k"] == "1"
    assert r2.group_id == "g"
    assert r1.stream_id == "s"
    assert "cnt" in r1.attributes


def test_v4_snappy_body(snappy: None) -> None:
    recs = [b"abc" * 30, b"d"]
    body = bin_msg(snappy_literal(items(*recs)), b"", msg_type=0x20 | 0x03)
    assert [r.data for r in tdmsg.decode(body)] == recs


def test_v4_snappy_library_body(snappy: None) -> None:
    recs = [b"%05d" % i * 10 for i in range(100)]
    body = bin_msg(cramjam_compress(items(*recs)), b"", msg_type=0x20)
    assert [r.data for r in tdmsg.decode(body)] == recs


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(bin_msg(items(b"a"), inner_magic=0xEE02), id="inner-magic"),
        pytest.param(bin_msg(items(b"a"), total_len=3), id="total-len"),
        pytest.param(bin_msg(items(b"a"), msg_type=0x40), id="unknown-compression"),
        pytest.param(bin_msg(i32(5) + b"a"), id="record-overruns-body"),
        pytest.param(bin_msg(i32(1) + b"m" + i32(0), ext_field=1), id="empty-item-attr"),
        pytest.param(bin_msg(i32(0), ext_field=1), id="empty-item"),
        pytest.param(bin_msg(items(b"a"))[:-6] + b"\x0f\x04", id="truncated"),
        pytest.param(bin_msg(items(b"a"))[:-2] + b"\x00\x0f\x04", id="trailing-byte"),
    ],
)
def test_v4_malformed(body: bytes) -> None:
    with pytest.raises(TDMsgError):
        tdmsg.decode(body)


def test_v4_huge_body_len() -> None:
    good = bin_msg(items(b"a"))
    bad = good[:23] + struct.pack(">I", 0xFFFFFFF0) + good[27:]
    with pytest.raises(TDMsgError, match="bodyLen"):
        tdmsg.decode(bad)


# --------------------------------------------------------------------------- INLONG_MSG_V1


PB_BATCH = pb_len(1, message_obj(CREATE, "10.0.0.1", b"body-1", {"groupId": "g", "k": "v"}))
PB_BATCH += pb_len(1, message_obj(-5, "10.0.0.2", b"body-2", {}))
PB_BATCH += pb_varint(9, 1)  # an unknown field is skipped


def check_pb_records(records: list[TDRecord]) -> None:
    assert [r.data for r in records] == [b"body-1", b"body-2"]
    r1, r2 = records
    assert r1.format is TDFormat.PB_V1
    assert r1.time_ms == CREATE
    assert r2.time_ms == -5
    assert r1.source_ip == "10.0.0.1"
    assert dict(r1.attributes) == {"groupId": "g", "k": "v"}
    assert r1.raw_attributes == "groupId=g&k=v"
    assert r1.group_id == "g"
    assert r2.group_id == "G"  # falls back to the message-level id
    assert r1.stream_id == "S"


@pytest.mark.parametrize("kind", ["NONE", "0", "INLONG_NO_COMPRESS"])
def test_pb_uncompressed(kind: str) -> None:
    check_pb_records(tdmsg.decode_pb(PB_BATCH, compress_type=kind, group_id="G", stream_id="S"))


@pytest.mark.parametrize("kind", ["INLONG_GZ", "1"])
def test_pb_gzip(kind: str) -> None:
    body = gzip.compress(PB_BATCH)
    check_pb_records(tdmsg.decode_pb(body, compress_type=kind, group_id="G", stream_id="S"))


def test_pb_snappy(snappy: None) -> None:
    body = cramjam_compress(PB_BATCH)
    check_pb_records(
        tdmsg.decode_pb(body, compress_type="INLONG_SNAPPY", group_id="G", stream_id="S")
    )


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        pytest.param(PB_BATCH, "LZ4", id="unknown-compress-type"),
        pytest.param(b"\x0a\x05abc", "NONE", id="length-overrun"),
        pytest.param(b"\x08\xff\xff", "NONE", id="truncated-varint"),
        pytest.param(b"\x08" + b"\xff" * 11, "NONE", id="long-varint"),
        pytest.param(b"\x0b", "NONE", id="group-wire-type"),
        pytest.param(b"\x08\x01", "NONE", id="msgs-wrong-wire-type"),
        pytest.param(pb_len(1, b"\x0a\x01x"), "NONE", id="msgtime-wrong-wire-type"),
        pytest.param(b"\x00\x00", "NONE", id="field-zero"),
        pytest.param(gzip.compress(PB_BATCH)[:-3], "INLONG_GZ", id="truncated-gzip"),
        pytest.param(gzip.compress(PB_BATCH) + b"x", "INLONG_GZ", id="gzip-trailing"),
        pytest.param(b"not gzip", "INLONG_GZ", id="garbage-gzip"),
    ],
)
def test_pb_malformed(body: bytes, kind: str) -> None:
    with pytest.raises(TDMsgError):
        tdmsg.decode_pb(body, compress_type=kind)


# --------------------------------------------------------------------------- dispatch


def test_decode_message_dispatch() -> None:
    v1 = wrap(1, i64(CREATE) + i32(1) + group("streamId=s", items(b"td")))
    attrs = "msgEnType=1,compressType=INLONG_GZ,inlongGroupId=G,inlongStreamId=S"
    check_pb_records(tdmsg.decode_message(gzip.compress(PB_BATCH), attrs))
    assert tdmsg.decode_message(v1, {"msgEnType": "2"})[0].data == b"td"
    assert tdmsg.decode_message(v1, None)[0].data == b"td"
    (raw,) = tdmsg.decode_message(b"plain", "msgEnType=0,$msgType$=s")
    assert raw.format is TDFormat.RAW
    assert raw.data == b"plain"
    assert raw.attributes["$msgType$"] == "s"
    with pytest.raises(TDMsgError):
        tdmsg.decode_message(b"plain", {"msgEnType": "2"})


def test_detect_format() -> None:
    assert tdmsg.detect_format(b"\x0f\x04\x0f\x04") is TDFormat.V4
    assert tdmsg.detect_format(bytearray(b"\x0f\x00xx\x0f\x00")) is TDFormat.V0
    assert tdmsg.detect_format(b"\x0f\x01\x0f\x02") is None
    assert tdmsg.detect_format(b"\x0f\x05\x0f\x05") is None
    assert tdmsg.detect_format(b"\x0f\x01\x0f") is None


# --------------------------------------------------------------------------- errors and limits


V1_GOOD = wrap(1, i64(CREATE) + i32(1) + group("streamId=s", items(b"abc", b"de")))


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"\x0f\x01", id="magic-only"),
        pytest.param(b"hello world", id="no-magic"),
        pytest.param(V1_GOOD[:-2] + b"\x0f\x02", id="mismatched-magics"),
        pytest.param(wrap(1, i64(CREATE)), id="truncated-header"),
        pytest.param(wrap(1, i64(CREATE) + i32(-1)), id="negative-attr-count"),
        pytest.param(wrap(1, i64(CREATE) + i32(1_000_000)), id="attr-count-too-big"),
        pytest.param(wrap(1, i64(CREATE) + i32(1) + java_utf("a") + i32(0)), id="datalen-0"),
        pytest.param(wrap(1, i64(CREATE) + i32(1) + java_utf("a") + i32(-4)), id="datalen-neg"),
        pytest.param(wrap(1, i64(CREATE) + i32(1) + java_utf("a") + i32(99) + b"\x00"), id="dl"),
        pytest.param(wrap(1, i64(CREATE) + i32(1) + group("a", b"", compress=2)), id="compress"),
        pytest.param(wrap(1, i64(CREATE) + i32(1) + group("a", i32(4) + b"ab")), id="rec-overrun"),
        pytest.param(wrap(1, i64(CREATE) + i32(1) + group("a", b"\x00\x00")), id="rec-partial"),
        pytest.param(V1_GOOD[:-2] + b"!" + V1_GOOD[-2:], id="trailing-garbage"),
        pytest.param(wrap(1, i64(CREATE) + i32(1) + java_utf(b"\xff") + i32(1) + b"\0"), id="utf"),
    ],
)
def test_malformed_inlongmsg(body: bytes) -> None:
    with pytest.raises(TDMsgError):
        tdmsg.decode(body)


def test_error_hierarchy() -> None:
    assert issubclass(TDMsgError, TubeMQError)
    assert issubclass(TDMsgError, ValueError)


def test_snappy_size_cap(snappy: None) -> None:
    data = items(b"z" * 1000)
    body = wrap(1, i64(CREATE) + i32(1) + group("a", cramjam_compress(data), compress=1))
    assert len(tdmsg.decode(body, max_decompressed_size=len(data))) == 1
    with pytest.raises(TDMsgError, match="max_decompressed_size"):
        tdmsg.decode(body, max_decompressed_size=len(data) - 1)


def test_snappy_cap_is_per_call_total(snappy: None) -> None:
    data = items(b"q" * 100)
    grp = group("a", snappy_literal(data), compress=1)
    body = wrap(1, i64(CREATE) + i32(2) + grp + grp)
    assert len(tdmsg.decode(body, max_decompressed_size=2 * len(data))) == 2
    with pytest.raises(TDMsgError, match="max_decompressed_size"):
        tdmsg.decode(body, max_decompressed_size=2 * len(data) - 1)


def test_snappy_lying_header_rejected_before_allocation(snappy: None) -> None:
    # preamble claims 2**32-1 bytes; the cap refuses before inflating anything
    block = b"\xff\xff\xff\xff\x0f" + b"\x00a"
    body = wrap(1, i64(CREATE) + i32(1) + group("a", block, compress=1))
    with pytest.raises(TDMsgError, match="max_decompressed_size"):
        tdmsg.decode(body)


def test_corrupt_snappy(snappy: None) -> None:
    block = snappy_literal(b"abcdef")[:-2]
    body = wrap(1, i64(CREATE) + i32(1) + group("a", block, compress=1))
    with pytest.raises(TDMsgError, match="snappy"):
        tdmsg.decode(body)


def test_gzip_size_cap() -> None:
    body = gzip.compress(b"\x00" * 1_000_000)
    with pytest.raises(TDMsgError, match="max_decompressed_size"):
        tdmsg.decode_pb(body, compress_type="INLONG_GZ", max_decompressed_size=10_000)


def test_negative_cap_rejected() -> None:
    with pytest.raises(ConfigError):  # a bad argument, not a bad payload (both are ValueErrors)
        tdmsg.decode(V1_GOOD, max_decompressed_size=-1)


def test_missing_cramjam_gives_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cramjam", None)  # makes `import cramjam` fail
    body = wrap(1, i64(CREATE) + i32(1) + group("a", snappy_literal(items(b"x")), compress=1))
    with pytest.raises(TDMsgError, match=r"pip install '\.\[tdmsg\]'"):
        tdmsg.decode(body)
    # uncompressed payloads do not need it
    assert tdmsg.decode(V1_GOOD)[0].data == b"abc"


def test_record_is_frozen_and_hashable() -> None:
    record = tdmsg.decode(V1_GOOD)[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.data = b"x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        record.attributes["new"] = "x"  # type: ignore[index]
    assert hash(record) == hash(tdmsg.decode(V1_GOOD)[0])
    assert record == tdmsg.decode(V1_GOOD)[0]


def test_parse_attributes() -> None:
    assert tdmsg.parse_attributes("") == {}
    assert tdmsg.parse_attributes("a=1&b=&c&a=2& d = x ") == {
        "a": "2",
        "b": "",
        "c": "",
        "d ": " x",
    }


# --------------------------------------------------------------------------- fuzzing


VALID_SAMPLES = [
    V1_GOOD,
    wrap(0, i32(1) + group("a=1", items(b"x", b"yy"))),
    wrap(2, i64(1) + i32(1) + i32(1) + group("a=1", items(b"x"), item_count=1)),
    wrap(
        2,
        i64(1)
        + i32(1)
        + i32(1)
        + group("a=1", snappy_literal(items(b"xyz")), compress=1, item_count=1),
    ),
    wrap(3, i64(1) + i32(1) + i32(1) + group("a=1", v3_block((b"m", b"k=v")))),
    bin_msg(items(b"r1", b"r2"), b"a=b"),
    bin_msg(i32(2) + b"m1" + i32(3) + b"k=1", ext_field=5),
    bin_msg(snappy_literal(items(b"abc")), msg_type=0x20),
]


def accepts_or_rejects(decoder: Callable[[bytes], list[TDRecord]], data: bytes) -> None:
    try:
        records = decoder(data)
    except TDMsgError:
        return
    assert all(isinstance(r, TDRecord) for r in records)


# TDMSG_FUZZ_EXAMPLES raises the example count for a longer local run; else 400 (a share of
# them in `make unit`, tests/support/examples.py).
FUZZ = settings(
    max_examples=int(os.environ.get("TDMSG_FUZZ_EXAMPLES", "0")) or examples(400),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def small_cap(data: bytes) -> list[TDRecord]:
    return tdmsg.decode(data, max_decompressed_size=1 << 16)


@FUZZ
@given(st.binary(max_size=300))
def test_fuzz_random_bytes(data: bytes) -> None:
    accepts_or_rejects(small_cap, data)


@FUZZ
@given(st.integers(0, 4), st.binary(max_size=300))
def test_fuzz_random_bytes_inside_magic(version: int, inner: bytes) -> None:
    accepts_or_rejects(small_cap, wrap(version, inner))


@FUZZ
@given(
    st.sampled_from(VALID_SAMPLES),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=6),
    st.integers(0, 10_000),
)
def test_fuzz_mutated_valid_payloads(sample: bytes, edits: list[tuple[int, int]], cut: int) -> None:
    data = bytearray(sample)
    for pos, value in edits:
        data[2 + pos % max(1, len(data) - 4)] = value  # keep the magics so parsing goes deep
    accepts_or_rejects(small_cap, bytes(data))
    accepts_or_rejects(small_cap, bytes(data[: cut % (len(data) + 1)]))


@FUZZ
@given(st.sampled_from(["NONE", "INLONG_GZ", "INLONG_SNAPPY"]), st.binary(max_size=300))
def test_fuzz_pb(kind: str, data: bytes) -> None:
    accepts_or_rejects(lambda d: tdmsg.decode_pb(d, compress_type=kind), data)


@FUZZ
@given(st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=6))
def test_fuzz_mutated_pb(edits: list[tuple[int, int]]) -> None:
    data = bytearray(PB_BATCH)
    for pos, value in edits:
        data[pos % len(data)] = value
    accepts_or_rejects(lambda d: tdmsg.decode_pb(d), bytes(data))
