"""The RPC envelope inside a frame's payload: ids, request encoding, response decoding.

A request payload is three varint-delimited messages: ``RpcConnHeader{flag=0}``,
``RequestHeader{serviceType, protocolVer}``, ``RequestBody{method, timeout, request}``. A response
is ``RpcConnHeader{flag=1}``, ``ResponseHeader{status, ...}`` and either ``RspResponseBody{method,
data}`` (status SUCCESS) or ``RspExceptionBody{exceptionName, stackTrace}`` (ERROR or FATAL).
docs/protocol/wire.md §1.4 and §2.

The server side of the envelope (:func:`decode_request`, :func:`encode_success`,
:func:`encode_exception`) exists for test servers and fault-injection proxies.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from typing import NamedTuple

from tubemq_aio.accelerator import twin as _compiled_twin
from tubemq_aio.errors import (
    LocalProtocolError,
    RemoteProtocolError,
    RemoteRpcError,
    remote_error_for,
)
from tubemq_aio.protocol.wire import decode_varint, encode_varint, read_delimited, read_fields

__all__ = [
    "PROTOCOL_VERSION",
    "SERVICE_OF_METHOD",
    "Method",
    "RpcRequest",
    "ServiceType",
    "Status",
    "decode_request",
    "decode_response",
    "decode_response_py",
    "encode_exception",
    "encode_request",
    "encode_success",
    "request_head",
    "response_decoder",
    "success_bounds",
]

#: ``RequestHeader.protocolVer`` we send: 3, the Java client's, so exception names come back with
#: their ``org.apache.inlong.tubemq.`` spelling.
PROTOCOL_VERSION = 3

_FLAG_REQUEST = 0
_FLAG_RESPONSE = 1


class ServiceType(IntEnum):
    """``RequestHeader.serviceType`` values."""

    MASTER = 1
    BROKER_READ = 2
    BROKER_WRITE = 3
    BROKER_ADMIN = 4
    MASTER_ADMIN = 5


class Method(IntEnum):
    """``RequestBody.method`` ids (complete table; 10 is unassigned)."""

    MASTER_PRODUCER_REGISTER = 1
    MASTER_PRODUCER_HEARTBEAT = 2
    MASTER_PRODUCER_CLOSE = 3
    MASTER_CONSUMER_REGISTER = 4
    MASTER_CONSUMER_HEARTBEAT = 5
    MASTER_CONSUMER_CLOSE = 6
    MASTER_BROKER_REGISTER = 7
    MASTER_BROKER_HEARTBEAT = 8
    MASTER_BROKER_CLOSE = 9
    BROKER_PRODUCER_REGISTER = 11
    BROKER_PRODUCER_HEARTBEAT = 12
    BROKER_PRODUCER_SEND_MESSAGE = 13
    BROKER_PRODUCER_CLOSE = 14
    BROKER_CONSUMER_REGISTER = 15
    BROKER_CONSUMER_HEARTBEAT = 16
    BROKER_CONSUMER_GET_MESSAGE = 17
    BROKER_CONSUMER_COMMIT = 18
    BROKER_CONSUMER_CLOSE = 19
    MASTER_CONSUMER_REGISTER_V2 = 20
    MASTER_CONSUMER_HEARTBEAT_V2 = 21
    MASTER_CONSUMER_GET_PART_META = 22


class Status(IntEnum):
    """``ResponseHeader.status`` values."""

    SUCCESS = 0
    ERROR = 1
    FATAL = 2


#: The service type each client-side method is sent under. The broker's send goes under
#: BROKER_WRITE like the Java client (Go uses BROKER_READ; the broker accepts both).
SERVICE_OF_METHOD: dict[Method, ServiceType] = {
    **{m: ServiceType.MASTER for m in Method if m <= 9 or m >= 20},
    Method.BROKER_PRODUCER_SEND_MESSAGE: ServiceType.BROKER_WRITE,
    **{m: ServiceType.BROKER_READ for m in Method if 15 <= m <= 19},
}

# RpcConnHeader{flag=0} + RequestHeader{serviceType, protocolVer=3}, cached per service type.
_CONN_HEADER_REQUEST = b"\x02\x08\x00"
_CONN_HEADER_RESPONSE = b"\x02\x08\x01"
_REQUEST_PREFIX: dict[int, bytes] = {
    int(s): _CONN_HEADER_REQUEST + bytes((4, 0x08, int(s), 0x10, PROTOCOL_VERSION))
    for s in ServiceType
}


# RequestBody up to its `request` tag: `08 <method> 10 <timeout>` + `1A`, per (method, timeout).
# Senders use a handful of timeouts, so the cache stays tiny; it is bounded anyway.
_BODY_HEADS: dict[tuple[int, int], bytes] = {}
_MAX_CACHED_HEADS = 1024


def encode_request(service_type: int, method: int, timeout_ms: int, body: bytes) -> bytes:
    """Build a request payload.

    Args:
        service_type: a :class:`ServiceType` value.
        method: a :class:`Method` value.
        timeout_ms: the server-side answer deadline; must be positive, since the server discards
            any answer that is not ready within it (a zero timeout means no answer at all, §2.5).
        body: the serialized business request message.

    Returns:
        The payload to hand to :func:`~tubemq_aio.protocol.framing.encode_frame`.

    Raises:
        LocalProtocolError: ``timeout_ms`` is not positive or an id is out of range.
    """
    return request_head(service_type, method, timeout_ms, len(body)) + body


def request_head(service_type: int, method: int, timeout_ms: int, body_size: int) -> bytes:
    """The request payload up to its business body: ``encode_request`` without ``body``.

    For callers that hand the body over in pieces (the producer's send), so that the payload is
    joined once, when the frame is written.

    Args:
        service_type: a :class:`ServiceType` value.
        method: a :class:`Method` value.
        timeout_ms: the server-side answer deadline (positive).
        body_size: the length in bytes of the business body that will follow.

    Raises:
        LocalProtocolError: ``timeout_ms`` is not positive or an id is out of range.
    """
    prefix = _REQUEST_PREFIX.get(service_type)
    head = _BODY_HEADS.get((method, timeout_ms))
    if head is None:
        if timeout_ms <= 0:
            raise LocalProtocolError("an RPC timeout must be positive, or the server never answers")
        if not 0 < method < 128:
            raise LocalProtocolError(f"invalid method {method}")
        if len(_BODY_HEADS) >= _MAX_CACHED_HEADS:
            _BODY_HEADS.clear()
        head = bytes((0x08, method, 0x10)) + encode_varint(timeout_ms) + b"\x1a"
        _BODY_HEADS[(method, timeout_ms)] = head
    if prefix is None:
        raise LocalProtocolError(f"invalid service type {service_type}")
    size_varint = encode_varint(body_size)
    return b"".join(
        (prefix, encode_varint(len(head) + len(size_varint) + body_size), head, size_varint)
    )


class RpcRequest(NamedTuple):
    """A decoded request payload (server side)."""

    service_type: int
    protocol_version: int
    method: int
    timeout_ms: int
    body: bytes


def decode_request(payload: bytes) -> RpcRequest:
    """Decode a request payload, as a server would.

    Raises:
        RemoteProtocolError: the payload is not a well-formed request envelope.
    """
    _conn, pos = read_delimited(payload, 0)
    header_bytes, pos = read_delimited(payload, pos)
    body_bytes, pos = read_delimited(payload, pos)
    header = read_fields(header_bytes)
    body = read_fields(body_bytes)
    request = body.get(3, b"")
    if not isinstance(request, bytes):
        raise RemoteProtocolError("RequestBody.request is not a bytes field")
    return RpcRequest(
        service_type=_int_field(header, 1),
        protocol_version=_int_field(header, 2),
        method=_int_field(body, 1),
        timeout_ms=_int_field(body, 2),
        body=request,
    )


def encode_success(method: int, data: bytes) -> bytes:
    """Build a SUCCESS response payload (server side)."""
    header = b"\x08\x00\x18" + encode_varint(PROTOCOL_VERSION)
    body = b"\x08" + encode_varint(method) + b"\x12" + encode_varint(len(data)) + data
    return b"".join(
        (
            _CONN_HEADER_RESPONSE,
            encode_varint(len(header)),
            header,
            encode_varint(len(body)),
            body,
        )
    )


def encode_exception(exception_name: str, message: str, *, fatal: bool = False) -> bytes:
    """Build an ERROR (or FATAL) response payload (server side)."""
    header = b"\x08\x02" if fatal else b"\x08\x01\x18" + encode_varint(PROTOCOL_VERSION)
    name = exception_name.encode()
    text = message.encode()
    body = b"\x0a" + encode_varint(len(name)) + name + b"\x12" + encode_varint(len(text)) + text
    return b"".join(
        (
            _CONN_HEADER_RESPONSE,
            encode_varint(len(header)),
            header,
            encode_varint(len(body)),
            body,
        )
    )


# RpcConnHeader{flag=1} + ResponseHeader{status=SUCCESS, protocolVer=3}, both delimited: the
# layout of almost every answer (§1.4), recognised without the generic field reader.
_SUCCESS_PREFIX = b"\x02\x08\x01\x04\x08\x00\x18\x03"
_SUCCESS_PREFIX_LEN = len(_SUCCESS_PREFIX)


def success_bounds(payload: bytes) -> tuple[int, int] | None:
    """Where ``RspResponseBody.data`` lies in a plain SUCCESS envelope: ``(start, end)``, or
    None for any other payload (which :func:`decode_response` then decodes the generic way).

    For a caller that parses the business bytes in place (``payload[start:end]`` is what
    :func:`decode_response` returns for this payload) instead of taking a copy.
    """
    if not payload.startswith(_SUCCESS_PREFIX):
        return None
    if len(payload) > 12:
        # The answer of a send or commit: one-byte lengths, checked without decode_varint.
        size = payload[8]
        length = payload[12]
        if (
            size < 0x80
            and length < 0x80
            and payload[9] == 0x08
            and payload[10] < 0x80
            and payload[11] == 0x12
            and 13 + length == 9 + size <= len(payload)
        ):
            return 13, 9 + size
    try:
        pos = _SUCCESS_PREFIX_LEN
        size, pos = decode_varint(payload, pos)
        end = pos + size
        # RspResponseBody: field 1 (method, a one-byte varint), then field 2 (data).
        if payload[pos] != 0x08 or payload[pos + 1] & 0x80 or payload[pos + 2] != 0x12:
            return None
        length, pos = decode_varint(payload, pos + 3)
    except (IndexError, RemoteProtocolError):
        return None
    if pos + length != end or end > len(payload):
        return None
    return pos, end


def _fast_success_data(payload: bytes) -> bytes | None:
    """``RspResponseBody.data`` of a plain SUCCESS envelope, or None to take the generic path."""
    bounds = success_bounds(payload)
    return None if bounds is None else payload[bounds[0] : bounds[1]]


def decode_response(payload: bytes) -> bytes | RemoteRpcError:
    """Decode a response payload.

    Uses the compiled twin of :mod:`tubemq_aio.accelerator` when it is built (same results, same
    errors), else :func:`decode_response_py`; the transport calls :data:`response_decoder`.

    Returns:
        The business response bytes (``RspResponseBody.data``) on SUCCESS; otherwise the
        :class:`~tubemq_aio.errors.RemoteRpcError` the exception body describes (returned, not
        raised, so the caller can hand it to the waiting request).

    Raises:
        RemoteProtocolError: the payload is not a well-formed response envelope.
    """
    return response_decoder(payload)


def decode_response_py(payload: bytes) -> bytes | RemoteRpcError:
    """:func:`decode_response` in pure Python."""
    fast = _fast_success_data(payload)
    if fast is not None:
        return fast
    _conn, pos = read_delimited(payload, 0)
    header_bytes, pos = read_delimited(payload, pos)
    status = _int_field(read_fields(header_bytes), 1)
    body_bytes, _ = read_delimited(payload, pos)
    body = read_fields(body_bytes)
    if status == Status.SUCCESS:
        data = body.get(2, b"")
        if not isinstance(data, bytes):
            raise RemoteProtocolError("RspResponseBody.data is not a bytes field")
        return data
    name = body.get(1, b"")
    text = body.get(2, b"")
    if not isinstance(name, bytes) or not isinstance(text, bytes):
        raise RemoteProtocolError("RspExceptionBody fields have the wrong wire type")
    return remote_error_for(
        name.decode("utf-8", "replace"),
        text.decode("utf-8", "replace"),
        fatal=status == Status.FATAL,
    )


_ResponseDecoder = _compiled_twin("ResponseDecoder")
#: The :func:`decode_response` in use: the compiled one when built, else the pure one.
response_decoder: Callable[[bytes], bytes | RemoteRpcError] = (
    decode_response_py if _ResponseDecoder is None else _ResponseDecoder(decode_response_py)
)


def _int_field(fields: dict[int, int | bytes], number: int) -> int:
    value = fields.get(number, 0)
    if not isinstance(value, int):
        raise RemoteProtocolError(f"field {number} should be a varint")
    return value
