"""The messages of one gateway read, kept as the broker sent them and written straight to JSON.

A fetch answer carries about 1 300 messages, and decoding each into a
:class:`~tubemq_aio.models.Message`, then a dict (``messages_json``) for ``orjson`` to walk, was
about a third of the replica's CPU per fetch (docs/gateway.md, "Where the time goes"). So a read
keeps the broker's ``RawMessage`` tuples, screened by the consume rules
(:func:`screen_raw_messages`: the same checks, counters and log lines as
``decode_raw_messages``, docs/protocol/consumer.md §5), and the answer writes its ``messages``
array from them in one pass (:func:`encode_messages_json`): the bytes ``orjson`` gives for
``messages_json`` of the decoded messages, property-tested against it. :class:`FetchedMessages`
is still a ``Sequence[Message]`` for every other reader (streams, dead letters), decoding on
first use.

Both functions use the compiled twins of :mod:`tubemq_aio.accelerator` (``MessageJson``) when
they are built, with the same results.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Sequence
from typing import Any, overload

import orjson

from tubemq_aio import accelerator
from tubemq_aio.consumer.toolkit import (
    attribute_cache,
    attribute_info,
    crc_address,
    decode_raw_messages,
)
from tubemq_aio.models import Message
from tubemq_aio.protocol.consumer_replies import RawMessage
from tubemq_aio.protocol.message import (
    ATTRIBUTE_FLAG,
    CHECKSUM_MISMATCH_LOG,
    UNDECODABLE_MESSAGE_LOG,
    crc32,
)

__all__ = [
    "FetchedMessages",
    "block_tail",
    "encode_messages_json",
    "encode_messages_json_py",
    "screen_raw_messages",
    "screen_raw_messages_py",
]

#: The SDK consumer's logger: a dropped message is logged as the SDK's decode logs it.
log = logging.getLogger("tubemq_aio.consumer")

#: Distinct attribute blocks whose JSON tail is remembered (emptied when full).
_TAIL_CACHE_SIZE = 1024
#: Raw attribute block (None: no block) -> the JSON that ends a message of that block.
_tails: dict[bytes | None, bytes] = {}


def block_tail(block: bytes | None) -> bytes:
    """The JSON that ends each message of attribute ``block`` (None: no block):
    ``,"attributes":{…},"msg_type":"…","msg_time":"YYYYMMDDHHMM"|null}``, as ``orjson``
    writes the fields of ``messages_json``. Cached per block."""
    if block is None:
        attrs: Any = {}
        msg_type, stamp = "", None
    else:
        _, mapping, msg_type, when = attribute_cache.get(block) or attribute_info(block)
        attrs = dict(mapping)
        stamp = None if when is None else when.strftime("%Y%m%d%H%M")
    tail = b"".join(
        (
            b',"attributes":',
            orjson.dumps(attrs),
            b',"msg_type":',
            orjson.dumps(msg_type),
            b',"msg_time":',
            orjson.dumps(stamp),
            b"}",
        )
    )
    if len(_tails) >= _TAIL_CACHE_SIZE:
        _tails.clear()
    _tails[block] = tail
    return tail


def screen_raw_messages_py(
    raw: Sequence[RawMessage], *, partition_key: str, filters: frozenset[str], counters: Any
) -> tuple[RawMessage, ...]:
    """:func:`screen_raw_messages` in pure Python."""
    kept: list[RawMessage] = []
    dropped = False
    for item in raw:
        message_id, expected, payload, flag = item
        crc_ok = (crc32(payload) & 0x7FFFFFFF) == expected
        msg_type = ""
        if flag & ATTRIBUTE_FLAG:
            size = len(payload)
            attr_len = int.from_bytes(payload[:4], "big", signed=True) if size >= 4 else -1
            if attr_len < 0 or 4 + attr_len > size:
                counters.decode_errors += 1
                log.warning(
                    UNDECODABLE_MESSAGE_LOG,
                    message_id,
                    partition_key,
                )
                dropped = True
                continue
            if attr_len and filters:
                block = payload[4 : 4 + attr_len]
                msg_type = (attribute_cache.get(block) or attribute_info(block))[2]
        if not crc_ok:
            counters.crc_mismatches += 1
            log.warning(CHECKSUM_MISMATCH_LOG, message_id, partition_key)
            dropped = True
            continue
        if filters and msg_type not in filters:
            counters.filtered += 1
            dropped = True
            continue
        kept.append(item)
    return tuple(kept) if dropped or type(raw) is not tuple else raw


def encode_messages_json_py(raw: Sequence[RawMessage], force_base64: bool) -> bytes:
    """:func:`encode_messages_json` in pure Python."""
    parts: list[bytes] = []
    tails = _tails
    b64 = base64.b64encode
    dumps = orjson.dumps
    for message_id, _, payload, flag in raw:
        if type(payload) is not bytes:
            raise TypeError(f"message {message_id}: the payload is not bytes")
        block: bytes | None = None
        body = payload
        if flag & ATTRIBUTE_FLAG:
            size = len(payload)
            attr_len = int.from_bytes(payload[:4], "big", signed=True) if size >= 4 else -1
            if attr_len < 0 or 4 + attr_len > size:
                raise ValueError(f"message {message_id}: attribute block does not fit")
            if attr_len:
                block = payload[4 : 4 + attr_len]
            body = payload[4 + attr_len :]
        tail = tails.get(block) or block_tail(block)
        if force_base64:
            value = b'"' + b64(body) + b'","encoding":"base64"'
        else:
            try:
                value = dumps(body.decode("utf-8")) + b',"encoding":"utf8"'
            except UnicodeDecodeError:
                value = b'"' + b64(body) + b'","encoding":"base64"'
        parts.append(b'{"message_id":"%d","value":%b%b' % (message_id, value, tail))
    return b"[" + b",".join(parts) + b"]"


_ext = accelerator.compiled()
_twin: Any = None
if _ext is not None and hasattr(_ext, "MessageJson"):
    _twin = _ext.MessageJson(
        crc32,
        attribute_cache,
        attribute_info,
        log,
        block_tail,
        _tails,
        screen_raw_messages_py,
        encode_messages_json_py,
        crc_address(),
    )


def screen_raw_messages(
    raw: Sequence[RawMessage], *, partition_key: str, filters: frozenset[str], counters: Any
) -> tuple[RawMessage, ...]:
    """The fetched messages of one partition that ``decode_raw_messages`` would keep.

    The same rules, counters and log lines (docs/protocol/consumer.md §5): a payload whose
    attribute block does not fit is counted in ``decode_errors`` and dropped, a CRC mismatch in
    ``crc_mismatches`` and dropped, a ``msgType`` outside ``filters`` in ``filtered`` and
    dropped. Nothing is decoded.

    Args:
        raw: the ``TransferedMessage`` tuples of one GetMessage answer, in order.
        partition_key: ``brokerId:topic:partitionId`` they came from (for the log lines).
        filters: subscribed msgTypes (empty: no filter).
        counters: has ``crc_mismatches``, ``decode_errors`` and ``filtered`` (incremented).

    Returns:
        The kept tuples, in order (``raw`` itself when it is a tuple and all are kept).
    """
    if _twin is not None:
        kept: tuple[RawMessage, ...] = _twin.screen(
            raw, partition_key=partition_key, filters=filters, counters=counters
        )
        return kept
    return screen_raw_messages_py(
        raw, partition_key=partition_key, filters=filters, counters=counters
    )


def encode_messages_json(raw: Sequence[RawMessage], force_base64: bool) -> bytes:
    """The JSON array of a fetch answer's ``messages`` for screened ``raw`` messages.

    Byte for byte what ``orjson.dumps(messages_json(decoded, force_base64))`` gives for the
    decoded messages: per message ``message_id`` (decimal text), ``value`` (the body as text
    when it is UTF-8 and base64 is not forced, else base64), ``encoding`` (``utf8`` or
    ``base64``), ``attributes``, ``msg_type`` and ``msg_time`` (``YYYYMMDDHHMM`` or null).

    Raises:
        ValueError: a message's attribute block does not fit its payload (``raw`` was not
            screened by :func:`screen_raw_messages`), or a tuple is not of four items.
        TypeError: a payload is not ``bytes``.
    """
    if _twin is not None:
        out: bytes = _twin.encode(raw, force_base64)
        return out
    return encode_messages_json_py(raw, force_base64)


class _Uncounted:
    """Counters for decoding screened messages again (nothing is dropped twice)."""

    def __init__(self) -> None:
        self.crc_mismatches = self.decode_errors = self.filtered = 0


class FetchedMessages(Sequence[Message]):
    """The screened messages of one read of a partition: a ``Sequence[Message]`` decoded on
    first use, whose answer JSON comes from the raw form (:meth:`json`).

    Args:
        topic: their topic.
        partition_key: ``brokerId:topic:partitionId``.
        raw: the screened ``RawMessage`` tuples (:func:`screen_raw_messages`), in order.
    """

    __slots__ = ("_decoded", "partition_key", "raw", "topic")

    def __init__(self, topic: str, partition_key: str, raw: tuple[RawMessage, ...]) -> None:
        self.topic, self.partition_key, self.raw = topic, partition_key, raw
        self._decoded: tuple[Message, ...] | None = None

    def json(self, force_base64: bool) -> bytes:
        """The JSON array of the messages (see :func:`encode_messages_json`)."""
        return encode_messages_json(self.raw, force_base64)

    def decoded(self) -> tuple[Message, ...]:
        """The messages as :class:`Message` objects (decoded once)."""
        if self._decoded is None:
            messages, _ = decode_raw_messages(
                self.raw,
                topic=self.topic,
                partition_key=self.partition_key,
                filters=frozenset(),
                counters=_Uncounted(),
            )
            self._decoded = tuple(messages)
        return self._decoded

    def __len__(self) -> int:
        return len(self.raw)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Message, ...]: ...

    def __getitem__(self, index: int | slice) -> Message | tuple[Message, ...]:
        return self.decoded()[index]

    def __iter__(self) -> Any:
        return iter(self.decoded())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FetchedMessages | tuple | list):
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"FetchedMessages({self.partition_key!r}, {len(self.raw)} messages)"
