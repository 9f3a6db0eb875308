"""The Spark source's column decoder gives exactly what the row path gives: the same values for
every message kept, the same counters, the same errors, on valid, odd and malformed answers.

Every comparison runs the pure column decoder and, when the accelerator is built (whatever
``TUBEMQ_AIO_PURE`` says), the compiled one."""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema

from tests.support.examples import examples
from tests.support.message_strategies import attribute_text, stored_messages
from tubemq_aio import accelerator
from tubemq_aio.consumer._cb_models import DecodeContext
from tubemq_aio.consumer._decode import decode_raw_messages
from tubemq_aio.consumer.toolkit import crc_address
from tubemq_aio.errors import RemoteProtocolError
from tubemq_aio.protocol.consumer_replies import GetMessageResponse, parse_get_message_response
from tubemq_aio.protocol.damage import damage_signature
from tubemq_aio.protocol.message import checksum, encode_message
from tubemq_aio.protocol.pb import BrokerService_pb2 as broker_pb
from tubemq_aio.protocol.rpc import Method, encode_success
from tubemq_aio.spark import _columns
from tubemq_aio.spark._columns import (
    ColumnAnswer,
    MessageColumns,
    column_damage,
    compiled_decode,
    compiled_parse,
    decode_columns,
    decode_columns_py,
    parse_columns,
    parse_columns_py,
    parse_whole_columns,
    parse_whole_columns_py,
)
from tubemq_aio.spark._message_columns import NO_BLOCK
from tubemq_aio.spark._reader import ReadChunk, chunks_to_arrow
from tubemq_aio.spark.source import SCHEMA


def _loaded() -> ModuleType | None:
    """The compiled module if it is built, whatever ``TUBEMQ_AIO_PURE`` says."""
    try:
        from tubemq_aio._speedups import _cdecode
    except ImportError:  # not built: the pure decoder alone
        return None
    return _cdecode


EXT = _loaded()

Parse = Callable[[bytes], ColumnAnswer]
Decode = Callable[[ColumnAnswer, DecodeContext], MessageColumns]
#: (name, parse, decode) of each column decoder.
IMPLS: list[tuple[str, Parse, Decode]] = [("pure", parse_columns_py, decode_columns_py)]


def enveloped(parse_whole: Parse) -> Parse:
    """A parse of answer bytes through ``parse_whole`` of the answer in a SUCCESS envelope (as
    the transport hands it over with ``raw``): the answer is read inside a larger buffer."""
    return lambda data: parse_whole(encode_success(Method.BROKER_CONSUMER_GET_MESSAGE, data))


IMPLS.append(("pure, whole answer", enveloped(parse_whole_columns_py), decode_columns_py))
if EXT is not None:
    # A build older than round five (no COLUMN_API) is used as the package uses it.
    _NEW = getattr(EXT, "COLUMN_API", 1) >= 2
    _compiled_parse, _compiled_whole = compiled_parse(EXT.GetMessageParser, in_place=_NEW)
    _compiled_decode = compiled_decode(EXT.ColumnDecoder, None if _NEW else 0)
    IMPLS += [
        ("compiled", _compiled_parse, _compiled_decode),
        ("compiled, whole answer", enveloped(_compiled_whole), _compiled_decode),
        # The CRC through the Python function instead of zlib-ng's C function.
        ("compiled, CRC via Python", _compiled_parse, compiled_decode(EXT.ColumnDecoder, 0)),
    ]


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
        rsp.messages,
        topic="t",
        partition_key="1:t:0",
        filters=filters,
        counters=counters,
        deliver_corrupt=deliver,
    )
    return fields_of(rsp), flat(MessageColumns.of(messages)), counters


def columns_of(
    data: bytes,
    filters: frozenset[str],
    deliver: bool,
    parse: Parse = parse_columns,
    decode: Decode = decode_columns,
) -> Any:
    counters = Counters()
    try:
        answer = parse(data)
    except RemoteProtocolError as exc:
        return ("error", str(exc))
    rsp = answer.response
    assert rsp.messages == ()
    assert (answer.success, answer.err_code, answer.err_msg) == (
        rsp.success,
        rsp.err_code,
        rsp.err_msg,
    )
    assert (answer.curr_offset, answer.max_offset) == (rsp.curr_offset, rsp.max_offset)
    columns = decode(answer, DecodeContext("t", "1:t:0", filters, counters, deliver))
    return fields_of(rsp), flat(columns), counters


def fields_of(rsp: GetMessageResponse) -> tuple[Any, ...]:
    return (
        rsp.success,
        rsp.err_code,
        rsp.err_msg,
        rsp.curr_offset,
        rsp.max_offset,
        rsp.curr_data_dlt,
        rsp.min_limit_time,
        rsp.esc_flow_ctrl,
        rsp.require_slow,
    )


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
    """The row path's outcome, after checking that every column decoder gives it."""
    want = rows_of(data, filters, deliver)
    for name, parse, decode in IMPLS:
        assert columns_of(data, filters, deliver, parse, decode) == want, name
    return want


def messages() -> st.SearchStrategy[tuple[int, int, bytes, int]]:
    return stored_messages(max_body=300, any_int32=True)


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


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batch=st.lists(messages(), max_size=12), fields=_fields, filters=_filters, deliver=st.booleans()
)
def test_columns_equal_rows_on_random_answers(
    batch: list[tuple[int, int, bytes, int]],
    fields: dict[str, Any],
    filters: frozenset[str],
    deliver: bool,
) -> None:
    same(answer(batch, **fields), filters, deliver)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
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


@settings(max_examples=examples(200), deadline=None)
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
    messages = b"\x28" + _varint(28) + _message(*good) + _head() + _message(*good)
    long_error = b"\x1a" + _varint(20000) + b"e" * 20000
    data = messages + long_error + b"\x48\x01"
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
        for name, parse, decode in IMPLS:
            caplog.clear()
            got = columns_of(data, frozenset({"keep"}), deliver, parse, decode)
            assert got == want, name
            assert [r.getMessage() for r in caplog.records] == row_logs, name
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


# ---- the compiled column decoder against the pure one ------------------------------------------


def test_the_accelerator_is_used_when_built_and_checks_its_spans() -> None:
    if os.environ.get(accelerator.ENV_EXPECT, "") not in ("", "0"):
        assert EXT is not None, "the accelerator is expected but not built"
    if accelerator.compiled() is None:
        assert (_columns._parse, _columns._decode) == (parse_columns_py, decode_columns_py)
    else:
        assert _columns._parse is not parse_columns_py
        assert _columns._decode is not decode_columns_py
    if EXT is None:
        return
    # The compiled decoder gets its spans from the walk; handed inconsistent ones, it refuses.
    decoder = EXT.ColumnDecoder(checksum, {}, print, NO_BLOCK, logging.getLogger())
    one = np.zeros(1, dtype=np.int64)
    kwargs: dict[str, Any] = {
        "partition_key": "k",
        "filters": frozenset(),
        "counters": Counters(),
        "deliver_corrupt": False,
    }
    with pytest.raises(ValueError, match="different lengths"):
        decoder(b"ab", one, one, one, one, np.zeros(2, dtype=np.int64), bytearray(2), **kwargs)
    with pytest.raises(ValueError, match="outside"):
        decoder(b"ab", one, one, one, one, one + 3, bytearray(2), **kwargs)
    with pytest.raises(ValueError, match="shorter"):
        decoder(b"ab", one, one, one, one, one + 2, bytearray(1), **kwargs)
    with pytest.raises(BufferError):
        decoder(b"ab", one, one, one, one, one + 2, b"xx", **kwargs)  # not writable
    ids, offsets, blocks, infos = decoder(
        b"ab", one, one + checksum(b"ab"), one, one, one + 2, bytearray(2), **kwargs
    )
    assert np.frombuffer(ids, np.int64).tolist() == [0]
    assert np.frombuffer(offsets, np.int32).tolist() == [0, 2]
    assert (blocks, infos) == (None, [NO_BLOCK])


@st.composite
def big_messages(draw: st.DrawFn) -> tuple[int, int, bytes, int]:
    """Messages with bodies of 0 to 70 000 bytes (1-, 2- and 3-byte payload lengths)."""
    size = draw(st.sampled_from([0, 1, 127, 128, 1024, 16383, 16384, 70_000]))
    body = (draw(st.binary(min_size=1, max_size=8)) * (size // 8 + 1))[:size]
    if draw(st.booleans()):
        enc = encode_message(
            body or b"x",
            attributes=draw(st.dictionaries(attribute_text, attribute_text, max_size=2)),
            msg_type=draw(st.sampled_from([None, "a", "c"])),
            msg_time=draw(st.sampled_from([None, "202401011200"])),
        )
        data, flag = enc.data, enc.flag | draw(st.sampled_from([0, 2, 4]))
    else:
        data, flag = body, draw(st.sampled_from([0, 1, 2, 3, -1]))
    crc = checksum(data) if draw(st.booleans()) else draw(st.integers(-(2**31), 2**31 - 1))
    return draw(st.integers(-(2**63), 2**63 - 1)), crc, data, flag


def _arrow(columns: MessageColumns) -> pa.RecordBatch:
    schema = to_arrow_schema(SCHEMA, timezone="UTC")
    chunk = ReadChunk(columns, np.arange(len(columns), dtype=np.int64) * 28)
    return chunks_to_arrow([chunk, chunk], schema, ("t", "1:t:0"))


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _logged(run: Callable[[], MessageColumns]) -> tuple[MessageColumns, list[str]]:
    handler = _Lines()
    logger = logging.getLogger("tubemq_aio.consumer")
    logger.addHandler(handler)
    try:
        return run(), handler.lines
    finally:
        logger.removeHandler(handler)


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batch=st.lists(st.one_of(messages(), big_messages()), max_size=10),
    filters=_filters,
    deliver=st.booleans(),
)
def test_every_decoder_gives_the_row_paths_columns_arrow_and_logs(
    batch: list[tuple[int, int, bytes, int]], filters: frozenset[str], deliver: bool
) -> None:
    data = answer(batch, currOffset=5)
    want_counters = Counters()
    rows, want_lines = _logged(
        lambda: MessageColumns.of(
            decode_raw_messages(
                parse_get_message_response(data).messages,
                topic="t",
                partition_key="1:t:0",
                filters=filters,
                counters=want_counters,
                deliver_corrupt=deliver,
            )[0]
        )
    )
    for name, parse, decode in IMPLS:
        counters = Counters()
        context = DecodeContext("t", "1:t:0", filters, counters, deliver)
        cols, lines = _logged(lambda: decode(parse(data), context))  # noqa: B023
        assert (flat(cols), counters, lines) == (flat(rows), want_counters, want_lines), name
        assert _arrow(cols).equals(_arrow(rows)), name


@settings(max_examples=examples(300), deadline=None)
@given(
    batch=st.lists(messages(), min_size=1, max_size=4),
    cuts=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=3),
    truncate=st.integers(0, 10**6),
)
def test_every_decoder_raises_the_row_paths_typed_error_on_bad_answers(
    batch: list[tuple[int, int, bytes, int]], cuts: list[tuple[int, int]], truncate: int
) -> None:
    data = bytearray(answer(batch))
    for where, value in cuts:
        data[where % len(data)] = value
    cut = bytes(data[: truncate % (len(data) + 1)])

    def outcome(parse: Callable[[bytes], object]) -> tuple[Any, ...]:
        try:
            parse(cut)
        except Exception as exc:
            return ("error", type(exc), str(exc))
        return ("ok",)

    want = outcome(parse_get_message_response)
    for name, parse, _ in IMPLS:
        assert outcome(parse) == want, name


# ---- the whole answer (envelope included) and the C CRC ----------------------------------------


def test_the_whole_answer_parse_refuses_anything_but_a_plain_success_envelope() -> None:
    data = answer([(1, checksum(b"a"), b"a", 0)])
    whole = encode_success(Method.BROKER_CONSUMER_GET_MESSAGE, data)
    for parse_whole in (parse_whole_columns, parse_whole_columns_py):
        got = parse_whole(whole)
        assert got.spans.ids.tolist() == [1]
        for bad in (data, whole[1:], b"", whole[:-1]):
            with pytest.raises(RemoteProtocolError, match="plain SUCCESS envelope"):
                parse_whole(bad)
    if EXT is not None and _NEW:
        parser = EXT.GetMessageParser(GetMessageResponse, tuple, print, -2)
        for start, stop in ((-1, 3), (2, 1), (0, len(whole) + 1)):
            with pytest.raises(ValueError, match="bounds"):
                parser.columns(whole, start, stop)


def test_the_c_crc_is_zlib_ngs_and_gives_the_same_checksums() -> None:
    import ctypes

    address = crc_address()
    try:
        from zlib_ng import zlib_ng
    except ImportError:
        assert address == 0
        return
    assert address != 0
    assert address == ctypes.cast(ctypes.CDLL(zlib_ng.__file__).zng_crc32, ctypes.c_void_p).value
    function = ctypes.CFUNCTYPE(ctypes.c_uint32, ctypes.c_uint32, ctypes.c_char_p, ctypes.c_uint32)
    zng_crc32 = function(address)
    for size in (0, 1, 15, 16, 64, 1000, 70_000):
        data = os.urandom(size)
        assert zng_crc32(0, data, size) == zlib_ng.crc32(data)


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(messages(), max_size=8))
def test_column_damage_is_the_row_paths_damage_signature(
    batch: list[tuple[int, int, bytes, int]],
) -> None:
    """The positioned read compares two reads' damage by this (protocol/damage.py)."""
    data = answer(batch)
    want = damage_signature(parse_get_message_response(data).messages)
    for name, parse, _ in IMPLS:
        assert column_damage(parse(data)) == want, name
