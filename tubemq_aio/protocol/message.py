"""The message codec: the ``data`` bytes of a send and the payload bytes a consumer receives.

Layout of ``SendMessageRequestP2B.data`` / ``TransferedMessage.payLoadData``
(docs/protocol/wire.md §5.2–5.5, docs/protocol/consumer.md §5)::

    flag bit 0 clear:  body
    flag bit 0 set:    attrLen (int32, big-endian) | attribute (attrLen bytes, UTF-8) | body

The attribute block (system headers and user items) is built and parsed by
:mod:`tubemq_aio.protocol.attributes` (docs/protocol/wire.md §5.3).

The encoder validates user input once and raises :class:`InvalidMessageError`; the decoder never
drops anything silently: a CRC-32 mismatch is reported as ``crc_ok=False`` and a payload whose
attribute block cannot be cut out raises :class:`MessageDecodeError` (Java drops such messages).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import NamedTuple

from tubemq_aio.checks import Checks, is_utf8
from tubemq_aio.errors import InvalidMessageError, MessageDecodeError, MessageTooLargeError
from tubemq_aio.protocol.attributes import (
    ATTR_LEN,
    NO_ATTRIBUTES,
    attribute_block,
    format_msg_time,
    parse_attributes_shared,
)

try:  # zlib-ng's CRC-32 uses SIMD (≈ 4x faster on 1 KB); same polynomial, same results.
    from zlib_ng.zlib_ng import crc32
except ImportError:  # pragma: no cover - the optional "speedups" extra is not installed
    from zlib import crc32

__all__ = [
    "ATTRIBUTE_FLAG",
    "CHECKSUM_MISMATCH_LOG",
    "DEFAULT_MAX_MESSAGE_SIZE",
    "MAX_TOPIC_LENGTH",
    "NO_CHECKSUM",
    "UNDECODABLE_MESSAGE_LOG",
    "DecodedPayload",
    "EncodedMessage",
    "check_message",
    "checksum",
    "crc32",
    "decode_payload",
    "encode_message",
    "ip_to_int",
    "plain_message",
    "validate_topic",
]

#: Flag bit 0: ``data`` starts with the 4-byte-length attribute block (§5.4).
ATTRIBUTE_FLAG = 0x1
#: The log lines (``%`` format: message id, partition key) of every reader that drops a
#: received message: its attribute block does not fit the payload, or its checksum does not
#: match (§5.4). One text for all readers (the SDK's decodes, their compiled twins, the
#: Spark source, the gateway's screening), which tests compare line for line.
UNDECODABLE_MESSAGE_LOG = "undecodable message %d in %s: attribute block does not fit the payload"
CHECKSUM_MISMATCH_LOG = "checksum mismatch of message %d in %s"
#: ``SendMessageRequestP2B.checkSum`` meaning "do not verify"; every reference client sends it.
NO_CHECKSUM = -1
#: Longest topic name the broker accepts on send (§5.7).
MAX_TOPIC_LENGTH = 64
#: Max message size before the master told us anything (``META_MAX_MESSAGE_DATA_SIZE``, §4.7).
DEFAULT_MAX_MESSAGE_SIZE = 1024 * 1024

_CRC_MASK = 0x7FFFFFFF
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
        InvalidMessageError: not a string, blank, longer than :data:`MAX_TOPIC_LENGTH`, or
            not encodable as UTF-8 (a lone surrogate).
    """
    if type(topic) is str and len(topic) <= MAX_TOPIC_LENGTH and topic.strip() and topic.isascii():
        return topic
    checks = Checks("topic", error=InvalidMessageError)
    if checks.text("topic", topic) and len(topic) > MAX_TOPIC_LENGTH:  # type: ignore[arg-type]
        checks.problem(f"topic must be at most {MAX_TOPIC_LENGTH} characters: {topic!r:.80}")
    if isinstance(topic, str) and not is_utf8(topic):
        checks.problem(f"topic is not encodable as UTF-8 (a lone surrogate?): {topic!r:.80}")
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
        return attribute_block(msg_type or "", msg_time or "", items)
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
        MessageTooLargeError: the message is larger than ``max_size`` (an
            :class:`InvalidMessageError`).
        InvalidMessageError: any input is invalid.
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
    attr_size = len(block) - ATTR_LEN.size if block else 0
    if size + attr_size > max_size:
        extra = f" plus {attr_size} attribute bytes" if block else ""
        raise MessageTooLargeError(f"message of {size} bytes{extra} exceeds max {max_size}")
    if not block:
        return _tuple_new(EncodedMessage, (data, 0, "", ""))
    return _tuple_new(EncodedMessage, (block + data, ATTRIBUTE_FLAG, type_text, time_text))


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
        return DecodedPayload(payload, None, NO_ATTRIBUTES, "", "", crc_ok, flag)
    if len(payload) < ATTR_LEN.size:
        raise MessageDecodeError("payload flagged with attributes is shorter than 4 bytes")
    (attr_len,) = ATTR_LEN.unpack_from(payload)
    end = ATTR_LEN.size + attr_len
    if attr_len < 0 or end > len(payload):
        raise MessageDecodeError(f"attribute length {attr_len} does not fit the payload")
    if attr_len == 0:
        # Java keeps the attribute null for a zero length (a blank-attribute send,
        # docs/protocol/wire.md §5.4).
        return DecodedPayload(payload[end:], None, NO_ATTRIBUTES, "", "", crc_ok, flag)
    attribute = payload[ATTR_LEN.size : end].decode("utf-8", "replace")
    user, msg_type, msg_time = parse_attributes_shared(attribute)
    return DecodedPayload(payload[end:], attribute, user, msg_type, msg_time, crc_ok, flag)
