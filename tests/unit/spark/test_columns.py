"""The Spark source's column decoder gives exactly what the row path gives: the same values for
every message kept, the same counters, the same errors, on valid, odd and malformed answers."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tubemq_aio.consumer._cb_models import DecodeContext
from tubemq_aio.consumer._decode import decode_raw_messages
from tubemq_aio.errors import RemoteProtocolError
from tubemq_aio.protocol._pb import BrokerService_pb2 as broker_pb
from tubemq_aio.protocol.consumer_rpc import GetMessageResponse, parse_get_message_response
from tubemq_aio.protocol.message import checksum, encode_message
from tubemq_aio.spark import _columns
from tubemq_aio.spark._columns import MessageColumns, decode_columns, parse_columns


@dataclass
class Counters:
    crc_mismatches: int = 0
    decode_errors: int = 0
    filtered: int = 0


def rows_of(data: bytes, filters: frozenset[str], deliver: bool) -> Any:
    """The row path: the answer's fields, the kept messages as columns, the counters."""
    counters = Counters()
    try:
        rsp = parse_get_message_response(data)
    except RemoteProtocolError as exc:
        return ("error", str(exc))
    messages, _ = decode_raw_messages(
        rsp.messages, topic="t", partition_key="1:t:0", filters=filters,
        counters=counters, deliver_corrupt=deliver,
    )  # fmt: skip
    return fields_of(rsp), flat(MessageColumns.of(messages)), counters


def columns_of(data: bytes, filters: frozenset[str], deliver: bool) -> Any:
    counters = Counters()
    try:
        answer = parse_columns(data)
    except RemoteProtocolError as exc:
        return ("error", str(exc))
    rsp = answer.response
    assert rsp.messages == ()
    assert (answer.success, answer.err_code, answer.err_msg) == (
        rsp.success, rsp.err_code, rsp.err_msg,
    )  # fmt: skip
    assert (answer.curr_offset, answer.max_offset) == (rsp.curr_offset, rsp.max_offset)
    columns = decode_columns(answer, DecodeContext("t", "1:t:0", filters, counters, deliver))
    return fields_of(rsp), flat(columns), counters


def fields_of(rsp: GetMessageResponse) -> tuple[Any, ...]:
    return (rsp.success, rsp.err_code, rsp.err_msg, rsp.curr_offset, rsp.max_offset,
            rsp.curr_data_dlt, rsp.min_limit_time, rsp.esc_flow_ctrl, rsp.require_slow)  # fmt: skip


def flat(c: MessageColumns) -> Any:
    n = len(c)
    return (
        c.message_ids.tolist(),
        c.bodies.to_pylist(),
        c.msg_types or [""] * n,
        c.msg_times or [None] * n,
        [dict(a) for a in (c.attributes or [{}] * n)],
    )


def answer(messages: list[tuple[int, int, bytes, int]], **fields: Any) -> bytes:
    rsp = broker_pb.GetMessageResponseB2C(
        success=fields.pop("success", True), errCode=fields.pop("errCode", 200), **fields
    )
    for message_id, crc, payload, flag in messages:
        rsp.messages.add(messageId=message_id, checkSum=crc, payLoadData=payload, flag=flag)
    return rsp.SerializeToString()


def fast(data: bytes) -> bool:
    """Whether the answer takes the column reader's fast path (not the protobuf fallback)."""
    walked = _columns._walk(data)
    return walked is not None and _columns._fast_spans(data, *walked[1:]) is not None


def same(data: bytes, filters: frozenset[str] = frozenset(), deliver: bool = False) -> Any:
    want = rows_of(data, filters, deliver)
    assert columns_of(data, filters, deliver) == want
    return want


_text = st.text(
    st.characters(exclude_characters=",=", exclude_categories=["Cs"]), min_size=1, max_size=8
).filter(lambda t: t.strip() and "$msg" not in t)


@st.composite
def messages(draw: st.DrawFn) -> tuple[int, int, bytes, int]:
    kind = draw(st.sampled_from(["plain", "encoded", "random"]))
    body = draw(st.binary(min_size=1, max_size=300))
    if kind == "plain":
        data, flag = body, draw(st.sampled_from([0, 2, 4]))
    elif kind == "encoded":
        enc = encode_message(
            body,
            attributes=draw(st.dictionaries(_text, _text, max_size=3)),
            msg_type=draw(st.sampled_from([None, "a", "b", " c "])),
            msg_time=draw(st.sampled_from([None, "202401011200", "202612312359"])),
        )
        data, flag = enc.data, enc.flag | draw(st.sampled_from([0, 4]))
    else:
        data = draw(st.binary(max_size=40))
        flag = draw(st.one_of(st.integers(0, 7), st.integers(-(2**31), 2**31 - 1)))
    crc = checksum(data) if draw(st.booleans()) else draw(st.integers(-(2**31), 2**31 - 1))
    message_id = draw(st.one_of(st.integers(0, 2**40), st.integers(-(2**63), 2**63 - 1)))
    return message_id, crc, data, flag


_filters = st.sampled_from([frozenset(), frozenset({"a"}), frozenset({"a", "c"})])
_fields = st.fixed_dictionaries(
    {},
    optional={
        "success": st.booleans(),
        "errCode": st.integers(-(2**31), 2**31 - 1),
        "errMsg": st.text(max_size=20),
        "currOffset": st.integers(-(2**63), 2**63 - 1),
        "maxOffset": st.integers(0, 2**40),
        "minLimitTime": st.integers(0, 5000),
        "escFlowCtrl": st.booleans(),
        "requireSlow": st.booleans(),
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(messages(), max_size=12), fields=_fields, filters=_filters,
       deliver=st.booleans())  # fmt: skip
def test_columns_equal_rows_on_random_answers(
    batch: list[tuple[int, int, bytes, int]],
    fields: dict[str, Any],
    filters: frozenset[str],
    deliver: bool,
) -> None:
    same(answer(batch, **fields), filters, deliver)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batch=st.lists(messages(), min_size=1, max_size=6),
    cuts=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4),
    truncate=st.integers(0, 10**6),
    filters=_filters,
)
def test_columns_equal_rows_on_malformed_answers(
    batch: list[tuple[int, int, bytes, int]],
    cuts: list[tuple[int, int]],
    truncate: int,
    filters: frozenset[str],
) -> None:
    data = bytearray(answer(batch))
    for where, value in cuts:  # overwrite bytes anywhere: tags, lengths, varints, payloads
        data[where % len(data)] = value
    same(bytes(data), filters)
    same(bytes(data[: truncate % (len(data) + 1)]), filters)


@settings(max_examples=200, deadline=None)
@given(junk=st.binary(max_size=64))
def test_columns_equal_rows_on_arbitrary_bytes(junk: bytes) -> None:
    same(junk)


def test_canonical_answers_take_the_fast_path_with_the_same_values() -> None:
    enc = encode_message(b"x" * 1000, attributes={"k": "v"}, msg_type="a", msg_time="202401011200")
    batch = [(2**62 + i, checksum(enc.data), enc.data, enc.flag) for i in range(300)]
    batch += [(7, checksum(b"p" * 20000), b"p" * 20000, 0)]  # a 3-byte payload length
    data = answer(batch, currOffset=280, maxOffset=10_000)
    assert fast(data)
    head, cols, counters = same(data)
    assert head[3:5] == (280, 10_000)
    assert len(cols[0]) == 301
    assert cols[2][0] == "a"
    assert cols[4][0] == {"k": "v"}
    assert counters == Counters()
    assert fast(answer([]))


def _varint(value: int) -> bytes:
    value &= 2**64 - 1
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _message(*fields: bytes) -> bytes:
    content = b"".join(fields)
    return b"\x22" + _varint(len(content)) + content


def _head() -> bytes:
    return b"\x08\x01\x10" + _varint(200)


_PAYLOAD_AND_FLAG = (b"\x1a\x02hi", b"\x20\x00")


@pytest.mark.parametrize(
    "content",
    [
        # fields out of order
        [b"\x10" + _varint(5), b"\x08" + _varint(1), b"\x1a\x02hi", b"\x20\x00"],
        # an unknown field inside the message
        [b"\x08" + _varint(1), b"\x10" + _varint(5), b"\x1a\x02hi", b"\x20\x00", b"\x28\x01"],
        # a repeated field (the last value wins)
        [b"\x08" + _varint(1), b"\x08" + _varint(2), b"\x10" + _varint(5), *_PAYLOAD_AND_FLAG],
        # a varint written longer than needed
        [b"\x08\x81\x00", b"\x10" + _varint(5), b"\x1a\x02hi", b"\x20\x00"],
        # a required field missing
        [b"\x08" + _varint(1), b"\x1a\x02hi", b"\x20\x00"],
        # a negative int32 flag and checksum (10-byte varints)
        [b"\x08" + _varint(1), b"\x10" + _varint(-5), b"\x1a\x02hi", b"\x20" + _varint(-1)],
        # the canonical layout
        [b"\x08" + _varint(1), b"\x10" + _varint(checksum(b"hi")), b"\x1a\x02hi", b"\x20\x00"],
    ],
)
def test_odd_layouts_give_what_the_protobuf_parser_gives(content: list[bytes]) -> None:
    data = _head() + _message(*content) + _message(*content) + b"\x50" + _varint(56)
    same(data)
    same(data, deliver=True)


def test_fields_after_and_between_messages_and_long_error_text() -> None:
    good = [b"\x08" + _varint(3), b"\x10" + _varint(checksum(b"ab")), b"\x1a\x02ab", b"\x20\x00"]
    data = (
        b"\x28" + _varint(28) + _message(*good) + _head() + _message(*good)
        + b"\x1a" + _varint(20000) + b"e" * 20000 + b"\x48\x01"
    )  # fmt: skip
    same(data)
    bad_text = _head() + b"\x1a\x02\xff\xfe" + _message(*good)
    assert same(bad_text)[0] == "error"  # not UTF-8: a RemoteProtocolError both ways


def test_corrupt_undecodable_and_filtered_are_counted_and_logged_alike(
    caplog: pytest.LogCaptureFixture,
) -> None:
    keep = encode_message(b"a", msg_type="keep")
    drop = encode_message(b"b", msg_type="drop")
    batch = [
        (1, checksum(keep.data), keep.data, keep.flag),
        (2, checksum(keep.data) ^ 1, keep.data, keep.flag),  # CRC mismatch
        (3, 0, b"\x00\x00", 1),  # flagged but shorter than 4 bytes
        (4, 0, struct.pack(">i", 99) + b"xy", 1),  # attribute runs past the end
        (5, 0, struct.pack(">i", -1) + b"xy", 1),  # negative attribute length
        (6, checksum(drop.data), drop.data, drop.flag),  # filtered out
        (7, checksum(b"\x00\x00\x00\x00z"), b"\x00\x00\x00\x00z", 1),  # empty block
    ]
    data = answer(batch)
    assert fast(data)
    for deliver in (False, True):
        caplog.clear()
        want = rows_of(data, frozenset({"keep"}), deliver)
        row_logs = [r.getMessage() for r in caplog.records]
        caplog.clear()
        got = columns_of(data, frozenset({"keep"}), deliver)
        assert got == want
        assert [r.getMessage() for r in caplog.records] == row_logs
        assert got[2] == Counters(crc_mismatches=1, decode_errors=3, filtered=2)
        assert got[1][0] == ([1, 2] if deliver else [1])
    # Without filters the empty-block message is kept, with an empty body... of one byte.
    _, cols, _ = same(data)
    assert cols[0] == [1, 6, 7]
    assert cols[1] == [b"a", b"b", b"z"]


def test_head_and_take_keep_the_columns_aligned() -> None:
    enc = encode_message(b"q", msg_type="a")
    data = answer([(i, checksum(enc.data), enc.data, enc.flag) for i in range(5)])
    cols = decode_columns(
        parse_columns(data), DecodeContext("t", "1:t:0", frozenset(), Counters(), False)
    )
    assert flat(cols.head(2))[0] == [0, 1]
    assert cols.head(9) is cols
    picked = cols.take(np.array([1, 4]))
    assert flat(picked)[0] == [1, 4]
    assert flat(picked)[2] == ["a", "a"]
    assert picked.bodies.to_pylist() == [b"q", b"q"]
