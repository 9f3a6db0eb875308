"""GetMessage answers straight into columns: the Spark source's decode, without a ``Message``.

The row path (``parse_get_message_response`` + ``decode_raw_messages``) builds a protobuf
wrapper, a ``RawMessage`` tuple, a body copy and a ``Message`` per message, and the source then
takes every ``Message`` apart again into Arrow columns. Here one Python loop only hops from one
``TransferedMessage`` to the next (their spans in the answer bytes); the fields inside them are
read for all messages at once with numpy (field 1 ``messageId``, 2 ``checkSum``, 3
``payLoadData``, 4 ``flag``, in that order, as the broker writes them), the CRC-32 of each payload
is taken on a view of the answer, and the bodies are cut out of the answer by Arrow in one
``take``: no Python object per message except a CRC call (and an attribute-block lookup for
messages that carry one).

Exactness: the fast reader accepts only the canonical layout. Anything else (other field order,
unknown fields, a 10-byte varint, a truncated or overlong length) sends the whole answer to the
row path's protobuf parse, whose errors and values are the reference; its messages are then put
into columns the same way. The non-message fields of an answer are always parsed by the row
path's parser (from the answer without its messages). The decode rules are those of
:func:`~tubemq_aio.consumer.toolkit.decode_raw_messages`: an attribute block that does not fit
is counted and dropped, a CRC mismatch is counted and dropped unless ``deliver_corrupt``, a
msgType outside the consumer's filters is counted and dropped, each with the same log line.

When the optional accelerator (:mod:`tubemq_aio.accelerator`) is built, both steps are compiled
and this Python and numpy code is their reference (``parse_columns_py``,
``decode_columns_py``): the walk of ``GetMessageParser.columns`` takes the messages' fields in
any order (what protobuf accepts, checked the same way as the row parser's walk) and hands
back their spans, and ``ColumnDecoder`` runs the decode rules per message in C, writing the
kept bodies end to end into one Arrow buffer (the binary column's data) and each message's
attribute block as an index into the batch's table of distinct blocks. Measured in process,
that takes the parse + decode of a 1 KB message from ≈ 2.5–3 µs to ≈ 0.5 µs of CPU
(``docs/benchmarks.md``, Spark source, round four). The compiled decoder calls zlib-ng's C
CRC-32 (``zng_crc32``, the function behind the Python one) directly, and the source's reads
hand the answer over inside its RPC envelope (:func:`parse_whole_columns`), so the walk reads
it where the frame decoder put it: no copy of the answer (round five).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from tubemq_aio import accelerator
from tubemq_aio.consumer.toolkit import (
    BatchCodec,
    DecodeContext,
    attribute_cache,
    attribute_info,
    crc_address,
)
from tubemq_aio.errors import RemoteProtocolError
from tubemq_aio.protocol.consumer_meta import META_VALUE_UNDEFINED
from tubemq_aio.protocol.consumer_replies import (
    GetMessageResponse,
    RawMessage,
    parse_get_message_response,
    parse_get_message_response_py,
)
from tubemq_aio.protocol.damage import DamageSignature, damage_signature
from tubemq_aio.protocol.message import (
    ATTRIBUTE_FLAG,
    CHECKSUM_MISMATCH_LOG,
    UNDECODABLE_MESSAGE_LOG,
    crc32,
)
from tubemq_aio.protocol.rpc import success_bounds
from tubemq_aio.spark._message_columns import (
    EMPTY,
    NO_BLOCK,
    AttrInfo,
    MessageColumns,
    type_mask,
)

__all__ = [
    "COLUMNS",
    "ColumnAnswer",
    "MessageColumns",
    "column_damage",
    "compiled_decode",
    "compiled_parse",
    "decode_columns",
    "decode_columns_py",
    "parse_columns",
    "parse_columns_py",
    "parse_whole_columns",
    "parse_whole_columns_py",
]

log = logging.getLogger("tubemq_aio.consumer")

_Ints = np.ndarray[Any, np.dtype[np.int64]]
_Int32s = np.ndarray[Any, np.dtype[np.int32]]
_EMPTY_INTS: _Ints = np.zeros(0, dtype=np.int64)

#: Tag of ``GetMessageResponseB2C.messages`` (field 4, length-delimited).
_MESSAGES_TAG = 0x22
#: Tags of the answer's other fields (1-3, 5-10) and whether each is length-delimited.
_OTHER_TAGS = {
    0x08: False,
    0x10: False,
    0x1A: True,
    0x28: False,
    0x30: False,
    0x38: False,
    0x40: False,
    0x48: False,
    0x50: False,
}
#: Tags of ``TransferedMessage`` fields 1-4 in order (varint, varint, bytes, varint).
_ID_TAG, _CRC_TAG, _PAYLOAD_TAG, _FLAG_TAG = 0x08, 0x10, 0x1A, 0x20
_WINDOW = np.arange(10, dtype=np.int64)
_EXPECTED_TAGS = np.array([_ID_TAG, _CRC_TAG, _PAYLOAD_TAG, _FLAG_TAG], dtype=np.uint8)
_LENGTH_WEIGHTS = np.array([1, 1 << 7, 1 << 14, 1 << 21], dtype=np.int64)
_CRC_MASK = 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class _Spans:
    """Where the fields of each message lie in the answer bytes (fast path) or the row
    path's messages (fallback)."""

    data: bytes
    ids: _Ints
    checksums: _Ints
    flags: _Ints
    starts: _Ints  # payload start in ``data``
    ends: _Ints  # payload end in ``data``


@dataclass(frozen=True, slots=True)
class ColumnAnswer:
    """A parsed ``GetMessageResponseB2C`` whose messages are not decoded yet.

    Attributes:
        response: the answer's other fields, as the row path parses them (``messages`` empty).
        spans: the messages' fields and payload positions.
    """

    response: GetMessageResponse
    spans: _Spans

    @property
    def success(self) -> bool:
        """``success`` of the answer."""
        return self.response.success

    @property
    def err_code(self) -> int:
        """``errCode`` of the answer."""
        return self.response.err_code

    @property
    def err_msg(self) -> str:
        """``errMsg`` of the answer."""
        return self.response.err_msg

    @property
    def curr_offset(self) -> int:
        """``currOffset`` of the answer (-2 when absent)."""
        return self.response.curr_offset

    @property
    def max_offset(self) -> int:
        """``maxOffset`` of the answer (-2 when absent)."""
        return self.response.max_offset


def _fields_class() -> Any:
    """A protobuf message with ``TransferedMessage``'s varint fields as repeated fields.

    The contents of all the messages of an answer laid end to end are a valid serialization of
    it (a repeated field may occur anywhere; field 3, the payload, is an unknown field skipped
    without a Python object): one C parse reads every ``messageId``, ``checkSum`` and ``flag``.
    """
    kind = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(
        name="tubemq_aio_spark_fields.proto", package="tubemq_aio_spark", syntax="proto2"
    )
    message = proto.message_type.add(name="MessageFields")
    for name, number, type_ in (
        ("message_id", 1, kind.TYPE_INT64),
        ("checksum", 2, kind.TYPE_INT32),
        ("flag", 4, kind.TYPE_INT32),
    ):
        message.field.add(name=name, number=number, type=type_, label=kind.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName("tubemq_aio_spark.MessageFields")
    )


_FIELDS = _fields_class()
#: Varint lengths: a value below ``_VARINT_LIMITS[k]`` takes ``k + 1`` bytes (as uint64).
_VARINT_LIMITS = np.array([1 << (7 * k) for k in range(1, 10)], dtype=np.uint64)


def _varint_sizes(values: _Ints) -> _Ints:
    """Bytes of each value's shortest varint (negative values: 10, as protobuf writes them)."""
    sizes: _Ints = np.searchsorted(_VARINT_LIMITS, values.astype(np.uint64), side="right") + 1
    return sizes


def _walk(data: bytes) -> tuple[bytes, list[int], list[int], list[memoryview]] | None:
    """Split an answer into its non-message fields (bytes), its messages' spans and their
    contents, or None when it is not in the canonical layout."""
    starts: list[int] = []
    ends: list[int] = []
    contents: list[memoryview] = []
    other: list[bytes] = []
    view = memoryview(data)
    size = len(data)
    p = 0
    while p < size:
        tag = data[p]
        q = p + 1
        if tag == _MESSAGES_TAG or _OTHER_TAGS.get(tag, False):
            if q >= size:
                return None
            length = data[q]
            q += 1
            if length >= 0x80:  # a second and maybe a third byte (up to 2 MiB)
                if q + 1 >= size:
                    return None
                high = data[q]
                q += 1
                length = (length & 0x7F) | ((high & 0x7F) << 7)
                if high >= 0x80:
                    if q >= size:
                        return None
                    top = data[q]
                    q += 1
                    if top >= 0x80:
                        return None  # ≥ 2 MiB: left to the protobuf parser
                    length |= top << 14
            end = q + length
            if end > size:
                return None
            if tag == _MESSAGES_TAG:
                starts.append(q)
                ends.append(end)
                contents.append(view[q:end])
            else:
                other.append(data[p:end])
            p = end
        elif tag in _OTHER_TAGS:
            while q < size and data[q] >= 0x80:
                q += 1
            if q >= size or q - p > 10:
                return None
            other.append(data[p : q + 1])
            p = q + 1
        else:
            return None
    return b"".join(other), starts, ends, contents


def _fast_spans(
    data: bytes, starts: list[int], ends: list[int], contents: list[memoryview]
) -> _Spans | None:
    """The messages' fields, when every message is exactly ``messageId``, ``checkSum``,
    ``payLoadData``, ``flag`` with shortest varints; else None.

    The values come from one parse of the contents laid end to end; the check that each
    message has that layout (each tag where the values' sizes put it, each varint ending
    there, the payload length matching) makes that parse read the same tokens, message by
    message, as the protobuf parser of the whole answer would.
    """
    n = len(starts)
    if not n:
        return _Spans(data, _EMPTY_INTS, _EMPTY_INTS, _EMPTY_INTS, _EMPTY_INTS, _EMPTY_INTS)
    try:
        fields = _FIELDS.FromString(b"".join(contents))
    except Exception:  # any parse failure: the protobuf parser of the answer decides
        return None
    ids = np.array(fields.message_id, dtype=np.int64)
    checksums = np.array(fields.checksum, dtype=np.int64)
    flags = np.array(fields.flag, dtype=np.int64)
    if not len(ids) == len(checksums) == len(flags) == n:
        return None
    first = np.array(starts, dtype=np.int64)
    limit = np.array(ends, dtype=np.int64)
    id_end = first + _varint_sizes(ids)  # last byte of each varint
    crc_tag = id_end + 1
    crc_end = crc_tag + _varint_sizes(checksums)
    payload_tag = crc_end + 1
    flag_size = _varint_sizes(flags)
    flag_tag = limit - 1 - flag_size
    # The payload length L fills the room between its tag and the flag's: L + size(L) == room.
    room = flag_tag - payload_tag - 1
    length = room - 1
    for k in (2, 3, 4):
        length = np.where(room - k >= 1 << (7 * (k - 1)), room - k, length)
    length_size = room - length
    begin = flag_tag - length
    if (length < 0).any() or (length_size > 4).any():
        return None
    buf = np.frombuffer(data, dtype=np.uint8)
    # Tags where the sizes put them, and each varint's last byte without its high bit.
    tags = buf.take(np.concatenate((first, crc_tag, payload_tag, flag_tag)))
    if (tags != _EXPECTED_TAGS.repeat(n)).any():
        return None
    last = buf.take(np.concatenate((id_end, crc_end, begin - 1, limit - 1)))
    if (last >= 0x80).any():
        return None
    # The payload length's own bytes (at most 4) say L.
    window = buf.take((payload_tag + 1)[:, None] + _WINDOW[:4], mode="clip").astype(np.int64)
    window &= 0x7F
    window[_WINDOW[:4] >= length_size[:, None]] = 0
    if ((window @ _LENGTH_WEIGHTS) != length).any():
        return None
    return _Spans(data, ids, checksums, flags, begin, flag_tag)


def _row_spans(response: GetMessageResponse) -> _Spans:
    """Spans of the row path's messages (the fallback): payloads laid end to end."""
    raw: Sequence[RawMessage] = response.messages
    sizes = np.array([len(m.payload) for m in raw], dtype=np.int64)
    ends = np.cumsum(sizes)
    return _Spans(
        b"".join(m.payload for m in raw),
        np.array([m.message_id for m in raw], dtype=np.int64),
        np.array([m.checksum for m in raw], dtype=np.int64),
        np.array([m.flag for m in raw], dtype=np.int64),
        ends - sizes,
        ends,
    )


def parse_columns(data: bytes) -> ColumnAnswer:
    """Parse a ``GetMessageResponseB2C`` without building anything per message.

    Uses the compiled walker of :mod:`tubemq_aio.accelerator` when it is built (same answers,
    same errors), else :func:`parse_columns_py`.

    Raises:
        RemoteProtocolError: the bytes are not a valid answer (as the row path's parser).
    """
    return _parse(data)


def parse_columns_py(data: bytes) -> ColumnAnswer:
    """:func:`parse_columns` in Python and numpy."""
    walked = _walk(data)
    if walked is not None:
        other, starts, ends, contents = walked
        spans = _fast_spans(data, starts, ends, contents)
        if spans is not None:
            return ColumnAnswer(parse_get_message_response(other), spans)
    response = parse_get_message_response(data)
    return ColumnAnswer(replace(response, messages=()), _row_spans(response))


def decode_columns(answer: ColumnAnswer, context: DecodeContext) -> MessageColumns:
    """Decode a parsed answer's messages into columns (the row path's rules, see the module).

    Uses the compiled loop of :mod:`tubemq_aio.accelerator` when it is built (same columns,
    counters and log lines), else :func:`decode_columns_py`.

    Returns:
        The kept messages.
    """
    return _decode(answer, context)


def parse_whole_columns(data: bytes) -> ColumnAnswer:
    """:func:`parse_columns` of the answer inside a plain SUCCESS RPC envelope (the transport's
    whole answer, see :attr:`BatchCodec.parse_whole`), read in place when the accelerator is
    built (the pure code parses a copy).

    Raises:
        RemoteProtocolError: ``data`` is not a plain SUCCESS envelope, or its answer is not a
            valid answer.
    """
    return _parse_whole(data)


def _answer_of(data: bytes) -> tuple[int, int]:
    bounds = success_bounds(data)
    if bounds is None:
        raise RemoteProtocolError("a whole GetMessage answer is not a plain SUCCESS envelope")
    return bounds


def parse_whole_columns_py(data: bytes) -> ColumnAnswer:
    """:func:`parse_whole_columns` in Python and numpy (on a copy of the answer)."""
    start, end = _answer_of(data)
    return parse_columns_py(data[start:end])


def compiled_parse(
    parser_cls: Any, *, in_place: bool = True
) -> tuple[Callable[[bytes], ColumnAnswer], Callable[[bytes], ColumnAnswer]]:
    """:func:`parse_columns` and :func:`parse_whole_columns` on the ``columns`` walk of a
    compiled ``GetMessageParser`` class (what it does not take goes to the pure code).

    Args:
        parser_cls: the class.
        in_place: whether its walk takes the answer's bounds (``COLUMN_API`` 2); without,
            the whole-answer parse walks a copy of the answer.
    """
    parser = parser_cls(
        GetMessageResponse, RawMessage, parse_get_message_response_py, META_VALUE_UNDEFINED
    )

    def columns(data: bytes, start: int, end: int) -> ColumnAnswer | None:
        if not in_place and (start, end) != (0, len(data)):
            data, start, end = data[start:end], 0, end - start
        got = parser.columns(data, start, end) if in_place else parser.columns(data)
        if got is None:
            return None
        response, n, spans = got
        ids, checksums, flags, starts, ends = np.frombuffer(spans, np.int64).reshape(5, n)
        return ColumnAnswer(response, _Spans(data, ids, checksums, flags, starts, ends))

    def parse(data: bytes) -> ColumnAnswer:
        return columns(data, 0, len(data)) or parse_columns_py(data)

    def parse_whole(data: bytes) -> ColumnAnswer:
        start, end = _answer_of(data)
        return columns(data, start, end) or parse_columns_py(data[start:end])

    return parse, parse_whole


def compiled_decode(
    decoder_cls: Any, crc: int | None = None
) -> Callable[[ColumnAnswer, DecodeContext], MessageColumns]:
    """:func:`decode_columns` on a compiled ``ColumnDecoder`` class.

    Args:
        decoder_cls: the class.
        crc: the address of the C CRC-32 it calls (default :func:`crc_address`); 0 makes it
            call :func:`~tubemq_aio.protocol.message.crc32` per message.
    """
    address = crc_address() if crc is None else crc
    # Without an address the arguments of a build older than COLUMN_API 2 (same behaviour).
    args = (crc32, attribute_cache, attribute_info, NO_BLOCK, log) + ((address,) if address else ())
    decoder = decoder_cls(*args)

    def decode(answer: ColumnAnswer, context: DecodeContext) -> MessageColumns:
        s = answer.spans
        if not len(s.ids) or len(s.data) > _MAX_OFFSET:
            return decode_columns_py(answer, context)
        # From Arrow's pool, which keeps its pages between batches: a fresh bytes object of
        # this size (≈ 0.5 MB) is mapped anew each time and its page faults cost ≈ 1 µs a row.
        bodies = pa.allocate_buffer(len(s.data))
        ids, offsets, blocks, infos = decoder(
            s.data,
            s.ids,
            s.checksums,
            s.flags,
            s.starts,
            s.ends,
            bodies,
            partition_key=context.partition_key,
            filters=context.filters,
            counters=context.counters,
            deliver_corrupt=context.deliver_corrupt,
        )
        kept = len(ids) // 8
        array = pa.Array.from_buffers(pa.binary(), kept, [None, pa.py_buffer(offsets), bodies])
        assert isinstance(array, pa.BinaryArray)
        return MessageColumns(
            np.frombuffer(ids, np.int64),
            array,
            None if blocks is None else np.frombuffer(blocks, np.int32),
            tuple(infos),
        )

    return decode


def decode_columns_py(answer: ColumnAnswer, context: DecodeContext) -> MessageColumns:
    """:func:`decode_columns` in Python and numpy."""
    s = answer.spans
    n = len(s.ids)
    if not n:
        return EMPTY
    data, starts, ends = s.data, s.starts, s.ends
    view = memoryview(data)
    crc_ok = np.fromiter(
        (crc32(view[a:b]) for a, b in zip(starts.tolist(), ends.tolist(), strict=True)),
        dtype=np.int64,
        count=n,
    )
    crc_ok &= _CRC_MASK
    good_crc = crc_ok == s.checksums
    flagged = (s.flags & ATTRIBUTE_FLAG) != 0
    body_starts = starts.copy()
    bad_block = np.zeros(n, dtype=bool)
    blocks: _Int32s | None = None
    infos: tuple[AttrInfo, ...] = (NO_BLOCK,)
    if flagged.any():
        # (A payload shorter than 4 bytes is undecodable whatever is read for its length.)
        buf = np.frombuffer(data if len(data) >= 4 else bytes(4), dtype=np.uint8)
        rows = np.flatnonzero(flagged)
        room = ends[rows] - starts[rows]
        head = starts[rows][:, None] + _WINDOW[:4]
        np.minimum(head, len(buf) - 1, out=head)
        length = buf[head].astype(np.int64) @ np.array([1 << 24, 1 << 16, 1 << 8, 1])
        length = np.where(length >= 2**31, length - 2**32, length)
        bad = (room < 4) | (length < 0) | (4 + length > room)
        bad_block[rows] = bad
        body_starts[rows] = np.where(bad, starts[rows], starts[rows] + 4 + length)
        with_block = rows[~bad & (length > 0)]
        if len(with_block):
            blocks, infos = _blocks(data, with_block, starts, body_starts, n)
    keep = ~bad_block & (good_crc | context.deliver_corrupt)
    wanted = np.ones(n, dtype=bool)
    if context.filters:
        wanted = type_mask(blocks, infos, n, context.filters)
    _count(s, context, bad_block, good_crc, keep, wanted)
    keep &= wanted
    bodies = _bodies(data, body_starts, ends, np.flatnonzero(keep))
    if keep.all():
        return MessageColumns(s.ids, bodies, blocks, infos)
    rows = np.flatnonzero(keep)
    return MessageColumns(s.ids[rows], bodies, None if blocks is None else blocks[rows], infos)


def _blocks(
    data: bytes, rows: _Ints, starts: _Ints, body_starts: _Ints, n: int
) -> tuple[_Int32s, tuple[AttrInfo, ...]]:
    """Per message, its entry in the table of the distinct attribute blocks of ``rows``
    (each parsed once, through the row path's cache), and that table."""
    index = np.zeros(n, dtype=np.int32)
    infos: list[AttrInfo] = [NO_BLOCK]
    seen: dict[bytes, int] = {}
    picks = []
    cached = attribute_cache.get
    for a, b in zip((starts[rows] + 4).tolist(), body_starts[rows].tolist(), strict=True):
        block = data[a:b]
        entry = seen.get(block)
        if entry is None:
            entry = seen[block] = len(infos)
            infos.append(cached(block) or attribute_info(block))
        picks.append(entry)
    index[rows] = picks
    return index, tuple(infos)


def _count(
    s: _Spans,
    context: DecodeContext,
    bad_block: np.ndarray[Any, Any],
    good_crc: np.ndarray[Any, Any],
    keep: np.ndarray[Any, Any],
    wanted: np.ndarray[Any, Any],
) -> None:
    """Count (and log) the dropped messages as the row path does, in message order."""
    if not bad_block.any() and good_crc.all() and wanted.all():
        return
    counters, key = context.counters, context.partition_key
    for i in range(len(s.ids)):
        message_id = int(s.ids[i])
        if bad_block[i]:
            counters.decode_errors += 1
            log.warning(
                UNDECODABLE_MESSAGE_LOG,
                message_id,
                key,
            )
            continue
        if not good_crc[i]:
            counters.crc_mismatches += 1
            log.warning(CHECKSUM_MISMATCH_LOG, message_id, key)
            if not keep[i]:
                continue
        if not wanted[i]:
            counters.filtered += 1


def _bodies(data: bytes, starts: _Ints, ends: _Ints, rows: _Ints) -> pa.BinaryArray:
    """The bodies ``data[starts[i]:ends[i]]`` of ``rows``, copied by Arrow: the answer read as
    a binary array of bodies and the gaps between them, then the bodies taken."""
    n = len(starts)
    bounds = np.empty(2 * n, dtype=np.int32)
    bounds[0::2] = starts
    bounds[1::2] = ends
    spans = pa.Array.from_buffers(
        pa.binary(), 2 * n - 1, [None, pa.py_buffer(bounds), pa.py_buffer(data)]
    )
    taken = spans.take(pa.array(2 * rows))
    assert isinstance(taken, pa.BinaryArray)
    return taken


#: Arrow binary offsets are int32: a larger answer (none is: frames are capped far below) is
#: decoded by the pure code, whose ``take`` copes.
_MAX_OFFSET = 2**31 - 1
# Both or neither: an extension built from an older source lacks ColumnDecoder (and the
# parser's ``columns``), and the pure code runs until it is rebuilt.
_decoder_cls = accelerator.twin("ColumnDecoder")
#: An extension built before round five (no COLUMN_API) parses a copy and calls the CRC
#: through Python until it is rebuilt.
_API = accelerator.twin("COLUMN_API") or 1
_parse, _parse_whole = (
    (parse_columns_py, parse_whole_columns_py)
    if _decoder_cls is None
    else compiled_parse(accelerator.twin("GetMessageParser"), in_place=_API >= 2)
)
_decode = (
    decode_columns_py
    if _decoder_cls is None
    else compiled_decode(_decoder_cls, None if _API >= 2 else 0)
)


def column_damage(answer: ColumnAnswer) -> DamageSignature:
    """:func:`~tubemq_aio.protocol.damage.damage_signature` of a parsed answer's messages (the
    positioned read asks for it only after a decode counted a checksum mismatch)."""
    s = answer.spans
    view = memoryview(s.data)
    fields = zip(
        s.ids.tolist(), s.checksums.tolist(), s.starts.tolist(), s.ends.tolist(), strict=True
    )
    return damage_signature(RawMessage(i, c, bytes(view[a:b]), 0) for i, c, a, b in fields)


#: The Spark source's codec for :meth:`ClientBalancedConsumer.read_with`.
COLUMNS: BatchCodec[ColumnAnswer, MessageColumns] = BatchCodec(
    parse_columns, decode_columns, EMPTY, parse_whole_columns, damage=column_damage
)
