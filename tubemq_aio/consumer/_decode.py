"""Raw fetched messages to :class:`~tubemq_aio.models.Message` objects: the consume hot loop.

Does what ``decode_payload`` + ``Message(...)`` do per message (docs/protocol/consumer.md §5), fused
into one loop because this is where a consumer spends most of its CPU. Measured on a 100 x 1 KB
GetMessage batch (``benchmarks/micro/codec.py``), the separate steps cost ≈ 4.5 µs per message:

* ``Message(**kwargs)``, a frozen slotted dataclass, ≈ 2.3 µs: its generated ``__init__`` binds
  ten keyword arguments and calls ``object.__setattr__`` ten times. Here the instance is made
  with ``object.__new__`` and its slots are filled through their descriptors (≈ 0.5 µs); the
  result is an ordinary, equal, immutable ``Message``.
* the intermediate ``DecodedPayload`` named tuple ≈ 0.4 µs: not built.
* parsing the attribute block: cached per distinct block (messages of one producer repeat it),
  keyed by the raw bytes, so neither the UTF-8 decode nor the ``$msgTime$`` parse is repeated.
* CRC-32 of 1 KB with ``zlib`` ≈ 0.45 µs: :func:`~tubemq_aio.protocol.message.checksum` uses
  zlib-ng's SIMD CRC when the ``zlib-ng`` package is installed (≈ 0.1 µs).

The rules are unchanged: an undecodable payload is counted and dropped, a CRC mismatch is
counted and dropped unless ``deliver_corrupt``, and a ``msgType`` outside the filters is counted
and dropped (Java drops it too, §5 item 5).
"""

from __future__ import annotations

import ctypes
import logging
import struct
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Any, Protocol

from tubemq_aio import accelerator
from tubemq_aio.models import Message
from tubemq_aio.protocol.attributes import parse_attributes, parse_msg_time
from tubemq_aio.protocol.consumer_replies import RawMessage
from tubemq_aio.protocol.message import (
    ATTRIBUTE_FLAG,
    CHECKSUM_MISMATCH_LOG,
    UNDECODABLE_MESSAGE_LOG,
    crc32,
)

__all__ = [
    "NO_ATTRIBUTES",
    "DecodeCounters",
    "attribute_cache",
    "attribute_info",
    "crc_address",
    "decode_raw_messages",
    "decode_raw_messages_py",
]

log = logging.getLogger("tubemq_aio.consumer")

#: The one empty attribute mapping every message without user attributes shares.
NO_ATTRIBUTES: Mapping[str, str] = Message(topic="", body=b"").attributes
_new = object.__new__
_ATTR_LEN = struct.Struct(">i")


def _setter(name: str) -> Callable[[Message, Any], None]:
    descriptor: Any = vars(Message)[name]
    setter: Callable[[Message, Any], None] = descriptor.__set__
    return setter


# Slot descriptors of Message: setting through them skips the frozen __setattr__ and the
# keyword binding of the generated __init__, and still fills every field.
_set_topic = _setter("topic")
_set_body = _setter("body")
_set_attributes = _setter("attributes")
_set_msg_type = _setter("msg_type")
_set_msg_time = _setter("msg_time")
_set_message_id = _setter("message_id")
_set_partition_key = _setter("partition_key")
_set_attribute = _setter("attribute")
_set_flag = _setter("flag")
_set_crc_ok = _setter("crc_ok")
_FIELDS = (
    "topic",
    "body",
    "attributes",
    "msg_type",
    "msg_time",
    "message_id",
    "partition_key",
    "attribute",
    "flag",
    "crc_ok",
)
# If Message gains a field this loop does not fill, fail at import, not with half-built objects.
if tuple(Message.__dataclass_fields__) != _FIELDS:  # pragma: no cover
    raise ImportError(f"Message fields changed: {tuple(Message.__dataclass_fields__)}")

_AttrInfo = tuple[str, Mapping[str, str], str, datetime | None]


class DecodeCounters(Protocol):
    """The counters the decode loop updates (``ConsumerStats`` has them)."""

    crc_mismatches: int
    decode_errors: int
    filtered: int


#: Distinct attribute blocks remembered (a plain dict: a hit is cheaper than ``lru_cache``'s).
_ATTR_CACHE_SIZE = 1024
#: Raw attribute block -> what :func:`attribute_info` made of it (shared with the Spark decode).
attribute_cache: dict[bytes, _AttrInfo] = {}


def attribute_info(block: bytes) -> _AttrInfo:
    """``(attribute, user attributes, msg_type, msg_time)`` of one raw attribute block.

    Cached: the mapping is shared between the messages that carry the same block, hence
    read-only (as ``decode_payload`` shares it). The cache is emptied when full.
    """
    attribute = block.decode("utf-8", "replace")
    user, msg_type, msg_time = parse_attributes(attribute)
    when = parse_msg_time(msg_time) if msg_time else None
    info = (attribute, (MappingProxyType(user) if user else NO_ATTRIBUTES), msg_type, when)
    if len(attribute_cache) >= _ATTR_CACHE_SIZE:
        attribute_cache.clear()
    attribute_cache[block] = info
    return info


def crc_address() -> int:
    """The address of the C function behind :func:`~tubemq_aio.protocol.message.crc32`
    (``zng_crc32``, exported by the zlib-ng extension that function comes from), or 0 when
    that is not zlib-ng's or the symbol cannot be found (then the decoder calls the Python
    function). Same library, same CRC-32: only the per-message Python call goes."""
    if getattr(crc32, "__module__", None) != "zlib_ng.zlib_ng":
        return 0
    try:
        from zlib_ng import zlib_ng

        function = ctypes.CDLL(zlib_ng.__file__).zng_crc32  # the loaded module: no second copy
    except (ImportError, OSError, AttributeError):
        return 0
    address = ctypes.cast(function, ctypes.c_void_p).value
    return address or 0


def decode_raw_messages(
    raw: Iterable[RawMessage],
    *,
    topic: str,
    partition_key: str,
    filters: frozenset[str],
    counters: DecodeCounters,
    deliver_corrupt: bool = False,
) -> tuple[list[Message], int]:
    """Decode fetched messages of one partition into :class:`Message` objects.

    Uses the compiled loop of :mod:`tubemq_aio.accelerator` when it is built (same messages,
    counters and log records), else :func:`decode_raw_messages_py`.

    Args:
        raw: the ``TransferedMessage`` tuples of one GetMessage answer, in order.
        topic: their topic.
        partition_key: ``brokerId:topic:partitionId`` they came from.
        filters: subscribed msgTypes (empty: no filter).
        counters: incremented per dropped message (and per delivered corrupt one).
        deliver_corrupt: deliver CRC mismatches (with ``crc_ok=False``) instead of dropping them.

    Returns:
        The messages kept, and the sum of their body lengths.
    """
    return _decode(
        raw,
        topic=topic,
        partition_key=partition_key,
        filters=filters,
        counters=counters,
        deliver_corrupt=deliver_corrupt,
    )


def decode_raw_messages_py(
    raw: Iterable[RawMessage],
    *,
    topic: str,
    partition_key: str,
    filters: frozenset[str],
    counters: DecodeCounters,
    deliver_corrupt: bool = False,
) -> tuple[list[Message], int]:
    """:func:`decode_raw_messages` in pure Python.

    Args:
        raw: the ``TransferedMessage`` tuples of one GetMessage answer, in order.
        topic: their topic.
        partition_key: ``brokerId:topic:partitionId`` they came from.
        filters: subscribed msgTypes (empty: no filter).
        counters: incremented per dropped message (and per delivered corrupt one).
        deliver_corrupt: deliver CRC mismatches (with ``crc_ok=False``) instead of dropping them.

    Returns:
        The messages kept, and the sum of their body lengths.
    """
    result: list[Message] = []
    append = result.append
    cached = attribute_cache.get
    attr_len_of = _ATTR_LEN.unpack_from
    no_attrs = NO_ATTRIBUTES
    total = 0
    for message_id, expected, payload, flag in raw:
        crc_ok = (crc32(payload) & 0x7FFFFFFF) == expected  # checksum(), without the call
        attribute: str | None = None
        attrs = no_attrs
        msg_type = ""
        msg_time: datetime | None = None
        if flag & ATTRIBUTE_FLAG:
            size = len(payload)
            attr_len = attr_len_of(payload)[0] if size >= 4 else -1
            end = 4 + attr_len
            if attr_len < 0 or end > size:
                counters.decode_errors += 1
                log.warning(
                    UNDECODABLE_MESSAGE_LOG,
                    message_id,
                    partition_key,
                )
                continue
            if attr_len:
                block = payload[4:end]
                attribute, attrs, msg_type, msg_time = cached(block) or attribute_info(block)
            body = payload[end:]
        else:
            body = payload
        if not crc_ok:
            counters.crc_mismatches += 1
            log.warning(CHECKSUM_MISMATCH_LOG, message_id, partition_key)
            if not deliver_corrupt:
                continue
        if filters and msg_type not in filters:
            counters.filtered += 1
            continue
        msg = _new(Message)
        _set_topic(msg, topic)
        _set_body(msg, body)
        _set_attributes(msg, attrs)
        _set_msg_type(msg, msg_type)
        _set_msg_time(msg, msg_time)
        _set_message_id(msg, message_id)
        _set_partition_key(msg, partition_key)
        _set_attribute(msg, attribute)
        _set_flag(msg, flag)
        _set_crc_ok(msg, crc_ok)
        append(msg)
        total += len(body)
    return result, total


_Decode = Callable[..., tuple[list[Message], int]]
_ext = accelerator.compiled()
_decode: _Decode = (
    decode_raw_messages_py
    if _ext is None
    else _ext.RawDecoder(
        Message,
        crc32,
        attribute_cache,
        attribute_info,
        NO_ATTRIBUTES,
        log,
        decode_raw_messages_py,
    )
)
