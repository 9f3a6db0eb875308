"""Decode message bodies written into TubeMQ by Apache InLong DataProxy.

InLong wraps user records in one of these body formats (see ``docs/tdmsg.md``):

* **InLongMsg / TDMsg v0-v4**: a binary envelope that starts and ends with the magic
  ``0F 0v``; decoded by :func:`decode` / :func:`decode_packet`.
* **INLONG_MSG_V1**: a protobuf ``MessageObjs`` batch, recognised only by the TubeMQ message
  attributes (``msgEnType=1``, ``compressType=...``); decoded by :func:`decode_pb`.

:func:`decode_message` picks the right one from the TubeMQ message attributes.

Snappy-compressed payloads need the optional ``cramjam`` package (the ``tdmsg`` extra:
``pip install '.[tdmsg]'`` in a clone). Everything here is pure: no I/O. Malformed input of
any kind raises :class:`TDMsgError`, and decompression is capped by
``max_decompressed_size``.

Example:
    >>> from tubemq_aio import tdmsg
    >>> for record in tdmsg.decode(message.data):  # doctest: +SKIP
    ...     print(record.stream_id, record.attributes.get("dt"), record.data)
"""

from __future__ import annotations

from collections.abc import Mapping

from tubemq_aio.checks import Checks
from tubemq_aio.errors import TDMsgError
from tubemq_aio.tdmsg._binmsg import decode_binmsg
from tubemq_aio.tdmsg._common import DEFAULT_MAX_DECOMPRESSED_SIZE, Budget, parse_attributes
from tubemq_aio.tdmsg._inlongmsg import decode_inlongmsg
from tubemq_aio.tdmsg._pbmsg import decode_pb_batch
from tubemq_aio.tdmsg._records import TDFormat, TDPacket, TDRecord, make_record

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "TDFormat",
    "TDPacket",
    "TDRecord",
    "decode",
    "decode_message",
    "decode_packet",
    "decode_pb",
    "detect_format",
    "parse_attributes",
]

BytesLike = bytes | bytearray | memoryview

_MAGIC_FIRST = 0x0F


def _arguments(body: object, max_decompressed_size: object = 0) -> bytes:
    """The body as ``bytes`` once the arguments are checked (a wrong type is the caller's error,
    not a malformed payload: ``bytes(5)`` would be five zero bytes)."""
    checks = Checks("tdmsg")
    checks.integer("max_decompressed_size", max_decompressed_size, low=0)
    if not isinstance(body, bytes | bytearray | memoryview):
        checks.fail(f"body must be bytes, got {type(body).__name__}")
    checks.done()
    return bytes(body)


def detect_format(body: BytesLike) -> TDFormat | None:
    """Tell which InLongMsg version ``body`` is, from its leading and trailing magic.

    Args:
        body: A TubeMQ message body.

    Returns:
        :attr:`TDFormat.V0` .. :attr:`TDFormat.V4`, or ``None`` when the body does not start
        and end with the same ``0F 00`` .. ``0F 04`` magic (INLONG_MSG_V1 and raw bodies
        have no magic and also give ``None``).

    Raises:
        ConfigError: ``body`` is not bytes-like.
    """
    if not isinstance(body, bytes | bytearray | memoryview):
        checks = Checks("tdmsg")
        checks.instance("body", body, (bytes, bytearray, memoryview))
        checks.done()
    if isinstance(body, memoryview) and (body.ndim != 1 or body.itemsize != 1):
        body = bytes(body)  # len() and slices of a view of shorts or a 2-D view count items
    data = bytes(body[:2]) + bytes(body[-2:]) if len(body) >= 4 else b""
    if len(data) == 4 and data[0] == _MAGIC_FIRST and data[:2] == data[2:] and data[1] <= 4:
        return TDFormat(data[1])
    return None


def decode_packet(
    body: BytesLike, *, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> TDPacket:
    """Decode an InLongMsg (TDMsg) v0-v4 body with its header fields.

    Args:
        body: The TubeMQ message body (the payload after TubeMQ's own attribute header).
        max_decompressed_size: The most bytes decompression may produce in this call, over
            all compressed sections together.

    Returns:
        The packet: format, creation time, message count and the records in order.

    Raises:
        TDMsgError: The body is not an InLongMsg, is malformed or truncated, exceeds
            ``max_decompressed_size``, or is snappy-compressed and ``cramjam`` is missing.
        ConfigError: ``body`` is not bytes-like or ``max_decompressed_size`` not an int >= 0.
    """
    data = _arguments(body, max_decompressed_size)
    fmt = detect_format(data)
    if fmt is None:
        raise TDMsgError("not an InLongMsg body: no matching 0F 00..0F 04 magic at both ends")
    budget = Budget(max_decompressed_size)
    inner = data[2:-2]
    if fmt is TDFormat.V4:
        return decode_binmsg(inner, budget)
    return decode_inlongmsg(inner, fmt.value, budget)


def decode(
    body: BytesLike, *, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> list[TDRecord]:
    """Decode an InLongMsg (TDMsg) v0-v4 body into its records.

    Args:
        body: The TubeMQ message body.
        max_decompressed_size: The most bytes decompression may produce in this call.

    Returns:
        The records, in payload order.

    Raises:
        TDMsgError: As for :func:`decode_packet`.
    """
    return list(decode_packet(body, max_decompressed_size=max_decompressed_size).records)


def decode_pb(
    body: BytesLike,
    *,
    compress_type: str | int = "NONE",
    group_id: str | None = None,
    stream_id: str | None = None,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> list[TDRecord]:
    """Decode an INLONG_MSG_V1 body (protobuf ``MessageObjs``, maybe compressed).

    Args:
        body: The TubeMQ message body.
        compress_type: The message's ``compressType`` attribute: ``NONE``, ``INLONG_GZ`` or
            ``INLONG_SNAPPY`` (or their numbers 0, 1, 2, as text or as an ``int``).
        group_id: The ``inlongGroupId`` attribute, used for records without ``groupId``.
        stream_id: The ``inlongStreamId`` attribute, used for records without ``streamId``.
        max_decompressed_size: The most bytes decompression may produce in this call.

    Returns:
        One record per ``MessageObj``: ``data`` is its body, ``attributes`` its params,
        ``time_ms`` its msgTime and ``source_ip`` its sourceIp.

    Raises:
        TDMsgError: Unknown compression type, corrupt compressed data or protobuf.
        ConfigError: ``body`` is not bytes-like, ``max_decompressed_size`` not an int >= 0,
            ``compress_type`` not a ``str`` (or an ``int`` 0-2), or ``group_id`` or
            ``stream_id`` neither a ``str`` nor None.
    """
    data = _arguments(body, max_decompressed_size)
    checks = Checks("tdmsg")
    # an int is the number of a compressType (1 for INLONG_GZ); a bool is no number
    kind = str(compress_type) if type(compress_type) is int else compress_type
    checks.instance("compress_type", kind, str)
    checks.instance("group_id", group_id, str, optional=True)
    checks.instance("stream_id", stream_id, str, optional=True)
    checks.done()
    budget = Budget(max_decompressed_size)
    packet = decode_pb_batch(data, str(kind), budget, group_id, stream_id)
    return list(packet.records)


def _tube_attributes(attributes: Mapping[str, str] | str) -> Mapping[str, str]:
    if not isinstance(attributes, str):
        return attributes
    result: dict[str, str] = {}
    for item in attributes.split(","):
        key, sep, value = item.partition("=")
        if sep:
            result[key.strip()] = value.strip()
    return result


def decode_message(
    body: BytesLike,
    attributes: Mapping[str, str] | str | None,
    *,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> list[TDRecord]:
    """Decode a TubeMQ message written by InLong, choosing the format from its attributes.

    ``msgEnType=1`` selects INLONG_MSG_V1 (with ``compressType``, ``inlongGroupId`` and
    ``inlongStreamId``); ``msgEnType=2`` selects InLongMsg. Without ``msgEnType`` a body
    with an InLongMsg magic is decoded as InLongMsg. Anything else (``msgEnType=0``) is
    returned as one :attr:`TDFormat.RAW` record carrying the TubeMQ attributes.

    Args:
        body: The TubeMQ message body.
        attributes: The TubeMQ message attributes, as the comma-separated ``k=v,k2=v2``
            string or as a mapping; ``None`` when the message has none.
        max_decompressed_size: The most bytes decompression may produce in this call.

    Returns:
        The records, in payload order.

    Raises:
        TDMsgError: The body does not match its declared format or is malformed.
        ConfigError: ``body`` is not bytes-like, ``attributes`` neither a string nor a
            mapping of ``str`` to ``str``, or ``max_decompressed_size`` not an int >= 0.
    """
    _arguments(body, max_decompressed_size)
    checks = Checks("tdmsg")
    if checks.instance("attributes", attributes, (str, Mapping), optional=True) and isinstance(
        attributes, Mapping
    ):
        odd = next(
            (
                (k, v)
                for k, v in attributes.items()
                if not (isinstance(k, str) and isinstance(v, str))
            ),
            None,
        )
        if odd is not None:
            checks.problem(
                f"attributes must map str to str, got {type(odd[0]).__name__} -> "
                f"{type(odd[1]).__name__}"
            )
    checks.done()
    attrs = _tube_attributes(attributes or {})
    kind = attrs.get("msgEnType", "").strip()
    if kind == "1":
        return decode_pb(
            body,
            compress_type=attrs.get("compressType", "NONE"),
            group_id=attrs.get("inlongGroupId"),
            stream_id=attrs.get("inlongStreamId"),
            max_decompressed_size=max_decompressed_size,
        )
    if kind == "2" or (kind == "" and detect_format(body) is not None):
        return decode(body, max_decompressed_size=max_decompressed_size)
    return [make_record(bytes(body), attrs, TDFormat.RAW, None)]
