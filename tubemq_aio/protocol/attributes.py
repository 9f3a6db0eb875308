"""The attribute block of a message: built (and checked) for a send, parsed on receipt.

The attribute is a ``key=value`` list joined by ``,``. Two keys are reserved for the "system
headers": ``$msgType$`` (message type, the consumer filter item) and ``$msgTime$`` (producer wall
time as ``yyyyMMddHHmm``). A producer writes them first, then the user's items
(docs/protocol/wire.md §5.3); on the wire the block is preceded by its length
(:data:`ATTR_LEN`, docs/protocol/wire.md §5.4). Building checks user input with
:class:`~tubemq_aio.checks.Checks` (:class:`InvalidMessageError`); parsing follows the Java
consumer's rules and never fails (docs/protocol/consumer.md §5).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from datetime import datetime
from functools import lru_cache
from types import MappingProxyType

from tubemq_aio.checks import Checks
from tubemq_aio.errors import InvalidMessageError

__all__ = [
    "ATTR_LEN",
    "NO_ATTRIBUTES",
    "TOKEN_MSG_TIME",
    "TOKEN_MSG_TYPE",
    "attribute_block",
    "format_msg_time",
    "parse_attributes",
    "parse_attributes_shared",
    "parse_msg_time",
]

#: Reserved attribute key carrying the message type (``TokenConstants.TOKEN_MSG_TYPE``).
TOKEN_MSG_TYPE = "$msgType$"
#: Reserved attribute key carrying the message time (``TokenConstants.TOKEN_MSG_TIME``).
TOKEN_MSG_TIME = "$msgTime$"
#: The big-endian int32 length in front of the attribute bytes (docs/protocol/wire.md §5.4).
ATTR_LEN = struct.Struct(">i")
#: The (read-only, shared) user attributes of a message without any.
NO_ATTRIBUTES: Mapping[str, str] = MappingProxyType({})

_MSG_TIME_LEN = 12
_RESERVED_CHARS = (",", "=")


@lru_cache(maxsize=1024)
def _user_item(key: object, value: object) -> str:
    """Validate one user attribute and return ``key=value``; cached since pairs repeat a lot."""
    checks = Checks("attributes", error=InvalidMessageError)
    for what, text in (("key", key), ("value", value)):
        if not checks.text(f"attribute {what}", text):
            continue
        if "," in text or "=" in text:  # type: ignore[operator]  # a str, checked above
            checks.problem(f"attribute {what} may not contain ',' or '=': {text!r}")
        # Java refuses the system-header tokens anywhere in a user key or value, since a
        # consumer takes any item containing them for a system header
        # (docs/protocol/wire.md §5.2).
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


@lru_cache(maxsize=1024)
def attribute_block(
    msg_type: str, msg_time: str, items: tuple[tuple[str, str], ...]
) -> tuple[str, str, bytes]:
    """Check and build ``(msg_type, msg_time, length prefix + attribute bytes)``.

    Cached: producers send long runs of messages with the same type, minute and attributes.
    The block is ``b""`` when there is nothing to write.
    """
    type_text, time_text, header = _system_header(msg_type, msg_time)
    parts = [header] if header else []
    parts.extend(_user_item(k, v) for k, v in items)
    if not parts:
        return type_text, time_text, b""
    attr = ",".join(parts).encode()
    return type_text, time_text, ATTR_LEN.pack(len(attr)) + attr


def _system_header(msg_type: str, msg_time: str) -> tuple[str, str, str]:
    """``(msg_type, msg_time, "$msgType$=..,$msgTime$=..")`` with blank values dropped
    (docs/protocol/wire.md §5.3)."""
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


@lru_cache(maxsize=1024)
def parse_attributes_shared(attribute: str) -> tuple[Mapping[str, str], str, str]:
    """:func:`parse_attributes` with a read-only mapping, cached: messages of one producer
    repeat the same attribute, so each is parsed once and the mapping shared."""
    user, msg_type, msg_time = parse_attributes(attribute)
    return (MappingProxyType(user) if user else NO_ATTRIBUTES), msg_type, msg_time
