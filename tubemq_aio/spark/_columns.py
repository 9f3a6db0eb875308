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
:func:`~tubemq_aio.consumer._decode.decode_raw_messages`: an attribute block that does not fit
is counted and dropped, a CRC mismatch is counted and dropped unless ``deliver_corrupt``, a
msgType outside the consumer's filters is counted and dropped, each with the same log line.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from tubemq_aio.consumer._cb_models import BatchCodec, DecodeContext
from tubemq_aio.consumer._decode import _NO_ATTRIBUTES, _attr_cache, _attribute_info
from tubemq_aio.models import Message
from tubemq_aio.protocol.consumer_rpc import (
    GetMessageResponse,
    RawMessage,
    parse_get_message_response,
)
from tubemq_aio.protocol.message import ATTRIBUTE_FLAG, crc32

__all__ = ["COLUMNS", "ColumnAnswer", "MessageColumns", "decode_columns", "parse_columns"]

log = logging.getLogger("tubemq_aio.consumer")

_Ints = np.ndarray[Any, np.dtype[np.int64]]

#: Tag of ``GetMessageResponseB2C.messages`` (field 4, length-delimited).
_MESSAGES_TAG = 0x22
#: Tags of the answer's other fields (1-3, 5-10) and whether each is length-delimited.
_OTHER_TAGS = {0x08: False, 0x10: False, 0x1A: True, 0x28: False, 0x30: False, 0x38: False,
               0x40: False, 0x48: False, 0x50: False}  # fmt: skip
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


@dataclass(frozen=True, slots=True)
class MessageColumns:
    """The kept messages of one broker batch, column by column, in order.

    Attributes:
        message_ids: ``messageId`` per message.
        bodies: the bodies (an Arrow binary array).
        msg_types: ``$msgType$`` per message, or None when no message has an attribute block
            (then every one is ``""``).
        msg_times: ``$msgTime$`` (naive local time) per message, or None (as for
            ``msg_types``).
        attributes: the user attributes per message, or None (as for ``msg_types``).
    """

    message_ids: _Ints
    bodies: pa.BinaryArray
    msg_types: list[str] | None
    msg_times: list[datetime | None] | None
    attributes: list[Mapping[str, str]] | None

    def __len__(self) -> int:
        return len(self.message_ids)

    @classmethod
    def of(cls, messages: Sequence[Message]) -> MessageColumns:
        """The columns of decoded messages (tests, and answers already decoded into rows)."""
        plain = all(m.attribute is None for m in messages)
        return cls(
            np.array([m.message_id for m in messages], dtype=np.int64),
            pa.array([m.body for m in messages], pa.binary()),
            None if plain else [m.msg_type for m in messages],
            None if plain else [m.msg_time for m in messages],
            None if plain else [m.attributes for m in messages],
        )

    def head(self, count: int) -> MessageColumns:
        """The first ``count`` messages."""
        if count >= len(self):
            return self
        return MessageColumns(
            self.message_ids[:count],
            self.bodies.slice(0, count),
            None if self.msg_types is None else self.msg_types[:count],
            None if self.msg_times is None else self.msg_times[:count],
            None if self.attributes is None else self.attributes[:count],
        )

    def take(self, rows: _Ints) -> MessageColumns:
        """The messages at positions ``rows`` (ascending)."""
        pick = rows.tolist()
        return MessageColumns(
            self.message_ids[rows],
            self.bodies.take(pa.array(rows)),
            None if self.msg_types is None else [self.msg_types[i] for i in pick],
            None if self.msg_times is None else [self.msg_times[i] for i in pick],
            None if self.attributes is None else [self.attributes[i] for i in pick],
        )


_EMPTY_INTS: _Ints = np.zeros(0, dtype=np.int64)
EMPTY = MessageColumns(_EMPTY_INTS, pa.array([], pa.binary()), None, None, None)


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

    Raises:
        RemoteProtocolError: the bytes are not a valid answer (as the row path's parser).
    """
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

    Returns:
        The kept messages.
    """
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
    types: list[str] | None = None
    times: list[datetime | None] | None = None
    attrs: list[Mapping[str, str]] | None = None
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
            types, times, attrs = _blocks(data, with_block, starts, body_starts, n)
    keep = ~bad_block & (good_crc | context.deliver_corrupt)
    if context.filters:
        type_of = types or [""] * n
        wanted = np.fromiter((t in context.filters for t in type_of), dtype=bool, count=n)
    else:
        wanted = np.ones(n, dtype=bool)
    _count(s, context, bad_block, good_crc, keep, wanted)
    keep &= wanted
    bodies = _bodies(data, body_starts, ends, np.flatnonzero(keep))
    columns = MessageColumns(s.ids, bodies, types, times, attrs)
    if keep.all():
        return columns
    rows = np.flatnonzero(keep)
    return MessageColumns(
        s.ids[rows],
        bodies,
        None if types is None else [types[i] for i in rows.tolist()],
        None if times is None else [times[i] for i in rows.tolist()],
        None if attrs is None else [attrs[i] for i in rows.tolist()],
    )


def _blocks(
    data: bytes, rows: _Ints, starts: _Ints, body_starts: _Ints, n: int
) -> tuple[list[str], list[datetime | None], list[Mapping[str, str]]]:
    """msgType, msgTime and user attributes per message from the attribute blocks of
    ``rows`` (parsed once per distinct block, shared with the row path's cache)."""
    types = [""] * n
    times: list[datetime | None] = [None] * n
    attrs: list[Mapping[str, str]] = [_NO_ATTRIBUTES] * n
    cached = _attr_cache.get
    for i, a, b in zip(
        rows.tolist(), (starts[rows] + 4).tolist(), body_starts[rows].tolist(), strict=True
    ):
        block = data[a:b]
        _, attrs[i], types[i], times[i] = cached(block) or _attribute_info(block)
    return types, times, attrs


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
                "undecodable message %d in %s: attribute block does not fit the payload",
                message_id,
                key,
            )
            continue
        if not good_crc[i]:
            counters.crc_mismatches += 1
            log.warning("checksum mismatch of message %d in %s", message_id, key)
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


#: The Spark source's codec for :meth:`ClientBalancedConsumer.read_with`.
COLUMNS: BatchCodec[ColumnAnswer, MessageColumns] = BatchCodec(parse_columns, decode_columns, EMPTY)
