"""The message codec: the ``data`` bytes of a send and the payload bytes a consumer receives.

Layout of ``SendMessageRequestP2B.data`` / ``TransferedMessage.payLoadData``
(docs/protocol/wire.md §5.2–5.5, docs/protocol/consumer.md §5)::

    flag bit 0 clear:  body
    flag bit 0 set:    attrLen (int32, big-endian) | attribute (attrLen bytes, UTF-8) | body

The attribute is a ``key=value`` list joined by ``,``. Two keys are reserved for the "system
headers": ``$msgType$`` (message type, the consumer filter item) and ``$msgTime$`` (producer wall
time as ``yyyyMMddHHmm``). A producer writes them first, then the user's items
(docs/protocol/wire.md §5.3).

The encoder validates user input once and raises :class:`InvalidMessageError`; the decoder never
drops anything silently: a CRC-32 mismatch is reported as ``crc_ok=False`` and a payload whose
attribute block cannot be cut out raises :class:`MessageDecodeError` (Java drops such messages).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from datetime import datetime
from functools import lru_cache
from types import MappingProxyType
from typing import NamedTuple

from tubemq_aio.checks import Checks
from tubemq_aio.errors import InvalidMessageError, MessageDecodeError

try:  # zlib-ng's CRC-32 uses SIMD (≈ 4x faster on 1 KB); same polynomial, same results.
    from zlib_ng.zlib_ng import crc32
except ImportError:  # pragma: no cover - the optional "speedups" extra is not installed
    from zlib import crc32

__all__ = [
    "ATTRIBUTE_FLAG",
    "DEFAULT_MAX_MESSAGE_SIZE",
    "MAX_TOPIC_LENGTH",
    "NO_CHECKSUM",
    "TOKEN_MSG_TIME",
    "TOKEN_MSG_TYPE",
    "DecodedPayload",
    "EncodedMessage",
    "check_message",
    "checksum",
    "crc32",
    "decode_payload",
    "encode_message",
    "format_msg_time",
    "ip_to_int",
    "parse_attributes",
    "parse_msg_time",
    "plain_message",
    "validate_topic",
]

#: Flag bit 0: ``data`` starts with the 4-byte-length attribute block (§5.4).
ATTRIBUTE_FLAG = 0x1
#: Reserved attribute key carrying the message type (``TokenConstants.TOKEN_MSG_TYPE``).
TOKEN_MSG_TYPE = "$msgType$"
#: Reserved attribute key carrying the message time (``TokenConstants.TOKEN_MSG_TIME``).
TOKEN_MSG_TIME = "$msgTime$"
#: ``SendMessageRequestP2B.checkSum`` meaning "do not verify"; every reference client sends it.
NO_CHECKSUM = -1
#: Longest topic name the broker accepts on send (§5.7).
MAX_TOPIC_LENGTH = 64
#: Max message size before the master told us anything (``META_MAX_MESSAGE_DATA_SIZE``, §4.7).
DEFAULT_MAX_MESSAGE_SIZE = 1024 * 1024

_ATTR_LEN = struct.Struct(">i")
_CRC_MASK = 0x7FFFFFFF
_MSG_TIME_LEN = 12
_RESERVED_CHARS = (",", "=")
_BODY_TYPES = (bytes, bytearray, memoryview)
# tuple.__new__ skips the Python-level NamedTuple constructor on the per-message path.
_tuple_new = tuple.__new__


class EncodedMessage(NamedTuple):
    """What the send request needs from one message (a named tuple: built per send, kept cheap).

    Attributes:
        data: ``SendMessageRequestP2B.data``: the attribute block (if any) followed by the body.
        flag: ``SendMessageRequestP2B.flag``: :data:`ATTRIBUTE_FLAG` iff ``data`` has the block.
        msg_type: trimmed message type for proto field 8, ``""`` when none.
        msg_time: ``yyyyMMddHHmm`` for proto field 9, ``""`` when none.
    """

    data: bytes
    flag: int
    msg_type: str
    msg_time: str


class DecodedPayload(NamedTuple):
    """A received payload split into its parts (consumer side; a named tuple, built per message).

    Attributes:
        body: the user payload.
        attribute: the raw attribute string, or ``None`` when the message carried none.
        attributes: the user ``key -> value`` items (system headers excluded), read-only.
        msg_type: the ``$msgType$`` value, ``""`` when absent.
        msg_time: the ``$msgTime$`` value if it is a valid ``yyyyMMddHHmm``, else ``""``.
        crc_ok: whether CRC-32 of the payload matched the broker's checksum.
        flag: the message flag as received.
    """

    body: bytes
    attribute: str | None
    attributes: Mapping[str, str]
    msg_type: str
    msg_time: str
    crc_ok: bool
    flag: int


def checksum(data: bytes) -> int:
    """The broker's checksum of ``data``: CRC-32 (zlib polynomial) masked to a non-negative int32.

    ``checksum(b"hello") == 907060870`` (§5.5). Uses zlib-ng when installed (extra
    ``speedups``), else :func:`zlib.crc32`.
    """
    return crc32(data) & _CRC_MASK


def ip_to_int(ip: str) -> int:
    """Pack a dotted IPv4 address into the signed int32 of ``sentAddr`` (§5.6).

    Raises:
        InvalidMessageError: ``ip`` is not a dotted IPv4 address.
    """
    parts = ip.split(".")
    try:
        octets = [int(p) for p in parts]
    except ValueError:
        octets = []
    if len(octets) != 4 or not all(0 <= o <= 255 for o in octets):
        checks = Checks("sentAddr", error=InvalidMessageError)
        checks.fail(f"not an IPv4 address: {ip!r}")
    value = (octets[0] << 24) | (octets[1] << 16) | (octets[2] << 8) | octets[3]
    return value - (1 << 32) if value & 0x80000000 else value


def validate_topic(topic: object) -> str:
    """Check a topic name for a send.

    Returns:
        The topic, unchanged.

    Raises:
        InvalidMessageError: not a string, blank, or longer than :data:`MAX_TOPIC_LENGTH`.
    """
    if type(topic) is str and len(topic) <= MAX_TOPIC_LENGTH and topic.strip():
        return topic
    checks = Checks("topic", error=InvalidMessageError)
    if checks.text("topic", topic) and len(topic) > MAX_TOPIC_LENGTH:  # type: ignore[arg-type]
        checks.problem(f"topic must be at most {MAX_TOPIC_LENGTH} characters: {topic!r:.80}")
    checks.done()
    return topic  # type: ignore[return-value]  # a subclass of str passed the checks


def _plain(attributes: object, msg_type: object) -> bool:
    """Whether falsy ``attributes``/``msg_type`` really mean "none" (``[]`` or ``0`` do not)."""
    return (attributes is None or type(attributes) is dict) and (msg_type is None or msg_type == "")


def _check_body(checks: Checks, body: object) -> bytes:
    """``body`` as ``bytes`` if it is a non-empty bytes-like object (else a problem, ``b""``)."""
    if not isinstance(body, bytes | bytearray | memoryview):
        checks.instance("message body", body, _BODY_TYPES)  # records the problem
        return b""
    data = bytes(body)
    if not data:
        checks.problem("message body is empty")
    return data


def _check_fields(
    checks: Checks, attributes: object, msg_type: object, msg_time: object
) -> tuple[str, str, bytes]:
    """Check the attribute-carried fields; returns ``(msgType, msgTime, block)`` texts (empty
    texts when a problem was recorded)."""
    fine = checks.instance("attributes", attributes, Mapping, optional=True)
    fine = checks.instance("msg_type", msg_type, str, optional=True) and fine
    if isinstance(msg_time, datetime):
        msg_time = format_msg_time(msg_time)
    else:
        fine = checks.instance("msg_time", msg_time, (datetime, str), optional=True) and fine
    if not fine:
        return "", "", b""
    try:
        items = tuple(attributes.items()) if isinstance(attributes, Mapping) else ()
        return _attribute_block(msg_type or "", msg_time or "", items)
    except InvalidMessageError as exc:
        checks.adopt(exc)
    except TypeError:  # something unhashable reached the cache
        checks.problem("attributes, msg_type and msg_time must be strings")
    except UnicodeEncodeError as exc:  # lone surrogates cannot be sent as UTF-8
        checks.problem(f"attribute text is not encodable as UTF-8: {exc}")
    return "", "", b""


def check_message(
    body: object,
    *,
    attributes: object = None,
    msg_type: object = None,
    msg_time: datetime | str | None = None,
) -> None:
    """Validate a message to send without encoding it (the size is checked at encoding).

    Raises:
        InvalidMessageError: as :func:`encode_message` would, size aside.
    """
    checks = Checks("message", error=InvalidMessageError)
    if type(body) is not bytes or not body:
        _check_body(checks, body)
    if attributes or msg_type or msg_time is not None or not _plain(attributes, msg_type):
        _check_fields(checks, attributes, msg_type, msg_time)
    checks.done()


@lru_cache(maxsize=1024)
def _user_item(key: object, value: object) -> str:
    """Validate one user attribute and return ``key=value``; cached since pairs repeat a lot."""
    checks = Checks("attributes", error=InvalidMessageError)
    for what, text in (("key", key), ("value", value)):
        if not checks.text(f"attribute {what}", text):
            continue
        if "," in text or "=" in text:  # type: ignore[operator]  # a str, checked above
            checks.problem(f"attribute {what} may not contain ',' or '=': {text!r}")
        # Java refuses the system-header tokens anywhere in a user key or value (§5.2), since a
        # consumer takes any item containing them for a system header.
        elif TOKEN_MSG_TYPE in text or TOKEN_MSG_TIME in text:  # type: ignore[operator]
            checks.problem(
                f"attribute {what} may not contain {TOKEN_MSG_TYPE} or {TOKEN_MSG_TIME}: {text!r}"
            )
    checks.done()
    return f"{key}={value}"


@lru_cache(maxsize=256)
def _msg_type_item(msg_type: str) -> tuple[str, str]:
    trimmed = msg_type.strip()
    # Not checked by Java, but a ',' or '=' would corrupt the attribute for every consumer.
    if any(c in trimmed for c in _RESERVED_CHARS) or TOKEN_MSG_TIME in trimmed:
        checks = Checks("msg_type", error=InvalidMessageError)
        checks.fail(f"msg_type may not contain ',', '=' or $msgTime$: {msg_type!r}")
    return trimmed, f"{TOKEN_MSG_TYPE}={trimmed}"


def format_msg_time(value: datetime | str) -> str:
    """Render a message time as ``yyyyMMddHHmm``.

    A ``datetime`` is formatted from its own fields, without any time-zone conversion: Java uses
    the producer's local wall time, so pass a local time if you want the Java behaviour.

    Raises:
        InvalidMessageError: a string that is not 12 digits forming a valid date and time.
    """
    if isinstance(value, datetime):
        return f"{value.year:04d}{value.month:02d}{value.day:02d}{value.hour:02d}{value.minute:02d}"
    checks = Checks("msg_time", error=InvalidMessageError)
    text = ""
    if checks.instance("msg_time", value, (datetime, str)):
        text = value.strip()
        if parse_msg_time(text) is None:
            checks.problem(f"msg_time must be 'yyyyMMddHHmm', got {value!r}")
    checks.done()
    return text


def parse_msg_time(text: str) -> datetime | None:
    """Parse ``yyyyMMddHHmm`` into a naive ``datetime``; ``None`` when it is not valid."""
    if len(text) != _MSG_TIME_LEN or not text.isascii() or not text.isdigit():
        return None
    try:
        return datetime(
            int(text[0:4]), int(text[4:6]), int(text[6:8]), int(text[8:10]), int(text[10:12])
        )
    except ValueError:
        return None


def plain_message(body: bytes) -> EncodedMessage:
    """:func:`encode_message` of a non-empty ``bytes`` body without attributes, type or time,
    whose size the caller has checked (the producer's hot path)."""
    return _tuple_new(EncodedMessage, (body, 0, "", ""))


def encode_message(
    body: bytes | bytearray | memoryview,
    *,
    attributes: Mapping[str, str] | None = None,
    msg_type: str | None = None,
    msg_time: datetime | str | None = None,
    max_size: int = DEFAULT_MAX_MESSAGE_SIZE,
) -> EncodedMessage:
    """Encode one message into the ``data``/``flag``/``msgType``/``msgTime`` of a send.

    The attribute is ``$msgType$=<t>,$msgTime$=<yyyyMMddHHmm>,k1=v1,...`` (each system item only
    when given, user items in mapping order); without any item no block is written and the flag
    stays 0 (§5.2–5.4).

    Args:
        body: the payload; must not be empty.
        attributes: user ``key -> value`` items; keys and values non-blank, without ``,`` ``=``
            or the reserved tokens.
        msg_type: message type (filter item); blank means none.
        msg_time: message time; a ``datetime`` or a ``yyyyMMddHHmm`` string.
        max_size: the topic's max message size (body + attribute) in bytes (§4.7, §5.8).

    Returns:
        The encoded parts.

    Raises:
        InvalidMessageError: any input is invalid, or the message is larger than ``max_size``.
    """
    if (
        type(body) is bytes
        and 0 < len(body) <= max_size
        and not attributes
        and not msg_type
        and msg_time is None
        and (attributes is None or type(attributes) is dict)  # inlined _plain(): the hot path
        and (msg_type is None or msg_type == "")
    ):
        # The common plain message: no attribute block, the body is the data (no copy).
        return _tuple_new(EncodedMessage, (body, 0, "", ""))
    checks = Checks("message", error=InvalidMessageError)
    data = body if type(body) is bytes and body else _check_body(checks, body)
    type_text, time_text, block = _check_fields(checks, attributes, msg_type, msg_time)
    checks.done()
    size = len(data)
    # Java measures the attribute in UTF-16 units; UTF-8 bytes are never fewer, so this check is
    # at least as strict and keeps us under the broker's limit (max + 10 KiB, §5.8).
    attr_size = len(block) - _ATTR_LEN.size if block else 0
    if size + attr_size > max_size:
        extra = f" plus {attr_size} attribute bytes" if block else ""
        checks.fail(f"message of {size} bytes{extra} exceeds max {max_size}")
    if not block:
        return _tuple_new(EncodedMessage, (data, 0, "", ""))
    return _tuple_new(EncodedMessage, (block + data, ATTRIBUTE_FLAG, type_text, time_text))


@lru_cache(maxsize=1024)
def _attribute_block(
    msg_type: str, msg_time: str, items: tuple[tuple[str, str], ...]
) -> tuple[str, str, bytes]:
    """Validate and build ``(msg_type, msg_time, length prefix + attribute bytes)``.

    Cached: producers send long runs of messages with the same type, minute and attributes.
    The block is ``b""`` when there is nothing to write.
    """
    type_text, time_text, header = _system_header(msg_type, msg_time)
    parts = [header] if header else []
    parts.extend(_user_item(k, v) for k, v in items)
    if not parts:
        return type_text, time_text, b""
    attr = ",".join(parts).encode()
    return type_text, time_text, _ATTR_LEN.pack(len(attr)) + attr


def _system_header(msg_type: str, msg_time: str) -> tuple[str, str, str]:
    """``(msg_type, msg_time, "$msgType$=..,$msgTime$=..")`` with blank values dropped (§5.3)."""
    type_text = ""
    time_text = ""
    items: list[str] = []
    if msg_type:
        type_text, item = _msg_type_item(msg_type)
        if type_text:
            items.append(item)
    if msg_time.strip():
        time_text = format_msg_time(msg_time)
        items.append(f"{TOKEN_MSG_TIME}={time_text}")
    return type_text, time_text, ",".join(items)


def _split_item(item: str) -> list[str]:
    # Java's String.split("=") drops trailing empty strings; "a=" is a one-element split.
    parts = item.split("=")
    while parts and not parts[-1]:
        parts.pop()
    return parts


def parse_attributes(attribute: str) -> tuple[dict[str, str], str, str]:
    """Parse an attribute string the way the Java consumer does
    (docs/protocol/consumer.md §5 step 4).

    User items: ``key=value`` with a non-blank key; the first occurrence of a key wins and the
    value is the text between the first and the second ``=`` (Java ``getAttrValue``). Any item that
    contains ``$msgType$`` or ``$msgTime$`` is a system item: the last one wins, and a msgTime that
    is not a valid ``yyyyMMddHHmm`` becomes ``""``.

    Returns:
        ``(user_attributes, msg_type, msg_time)``.
    """
    user: dict[str, str] = {}
    msg_type = ""
    msg_time = ""
    for item in attribute.split(","):
        if not item.strip():
            continue
        if TOKEN_MSG_TYPE in item:
            parts = _split_item(item)
            if len(parts) > 1:
                msg_type = parts[1]
        elif TOKEN_MSG_TIME in item:
            parts = _split_item(item)
            if len(parts) > 1:
                msg_time = parts[1] if parse_msg_time(parts[1]) is not None else ""
        else:
            parts = _split_item(item)
            if len(parts) > 1 and parts[0].strip():
                user.setdefault(parts[0], parts[1])
    return user, msg_type, msg_time


_EMPTY: Mapping[str, str] = MappingProxyType({})


@lru_cache(maxsize=1024)
def _parse_attributes_shared(attribute: str) -> tuple[Mapping[str, str], str, str]:
    # Messages of one producer repeat the same attribute; parse each once. The mapping is shared
    # between messages, hence read-only.
    user, msg_type, msg_time = parse_attributes(attribute)
    return (MappingProxyType(user) if user else _EMPTY), msg_type, msg_time


def decode_payload(payload: bytes, flag: int, expected_checksum: int) -> DecodedPayload:
    """Split a received payload (``TransferedMessage.payLoadData``) into attribute and body.

    Args:
        payload: the stored ``data`` bytes.
        flag: the message flag; bit 0 says the payload starts with an attribute block.
        expected_checksum: the broker's ``checkSum`` for the payload.

    Returns:
        The parts; ``crc_ok`` is False on a checksum mismatch (Java silently drops such a message;
        the caller decides).

    Raises:
        MessageDecodeError: bit 0 is set but the payload is shorter than 4 bytes, or the
            attribute length is negative or runs past the end.
    """
    crc_ok = checksum(payload) == expected_checksum
    if not flag & ATTRIBUTE_FLAG:
        return DecodedPayload(payload, None, _EMPTY, "", "", crc_ok, flag)
    if len(payload) < _ATTR_LEN.size:
        raise MessageDecodeError("payload flagged with attributes is shorter than 4 bytes")
    (attr_len,) = _ATTR_LEN.unpack_from(payload)
    end = _ATTR_LEN.size + attr_len
    if attr_len < 0 or end > len(payload):
        raise MessageDecodeError(f"attribute length {attr_len} does not fit the payload")
    if attr_len == 0:
        # Java keeps the attribute null for a zero length (a blank-attribute send,
        # docs/protocol/wire.md §5.4).
        return DecodedPayload(payload[end:], None, _EMPTY, "", "", crc_ok, flag)
    attribute = payload[_ATTR_LEN.size : end].decode("utf-8", "replace")
    user, msg_type, msg_time = _parse_attributes_shared(attribute)
    return DecodedPayload(payload[end:], attribute, user, msg_type, msg_time, crc_ok, flag)
