"""The producer's send (method 13, docs/protocol/wire.md §5.1), sans-I/O: the request encoder
and the result parser.

The send runs per message, so :class:`SendRequestEncoder` writes its protobuf bytes by hand with
the constant parts cached; the tests check it byte for byte against the generated
``SendMessageRequestP2B``. :data:`SUCCESS` is the ``errCode`` of a successful call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError

from tubemq_aio.accelerator import twin as _compiled_twin
from tubemq_aio.errors import RemoteProtocolError, server_error
from tubemq_aio.protocol.message import NO_CHECKSUM, EncodedMessage, plain_message
from tubemq_aio.protocol.pb import BrokerService_pb2 as broker_pb
from tubemq_aio.protocol.producer_master_values import BrokerAuthorization
from tubemq_aio.protocol.producer_meta import Broker, Partition
from tubemq_aio.protocol.rpc import SERVICE_OF_METHOD, Method, request_head
from tubemq_aio.protocol.wire import encode_varint

__all__ = [
    "SUCCESS",
    "SendRequestEncoder",
    "SendResult",
    "SendResultParser",
    "parse_send_result",
    "plain_send_encoder",
    "send_result_parser",
]


#: ``errCode`` of a successful call.
SUCCESS = 200

# ---------------------------------------------------------------------------------------------
# Send (method 13)
# ---------------------------------------------------------------------------------------------


def _len_field(tag: int, value: bytes) -> bytes:
    return bytes((tag,)) + encode_varint(len(value)) + value


# Field keys of SendMessageRequestP2B: (number << 3) | wire type.
_TAG_CLIENT_ID = 0x0A
_TAG_TOPIC = 0x12
_TAG_PARTITION = b"\x18"
_TAG_DATA = b"\x22"
_TAG_MSG_TYPE = 0x42
_TAG_MSG_TIME = 0x4A
_TAG_AUTH = 0x52
_SEND_METHOD = Method.BROKER_PRODUCER_SEND_MESSAGE
_SEND_SERVICE = SERVICE_OF_METHOD[_SEND_METHOD]


def _varint_len(n: int) -> bytes:
    # Lengths are non-negative and almost always below 2**14: one or two bytes, no loop.
    if n < 0x80:
        return _SMALL[n]
    if n < 0x4000:
        return bytes(((n & 0x7F) | 0x80, n >> 7))
    return encode_varint(n)


_SMALL = [bytes((i,)) for i in range(128)]


class SendRequestEncoder:
    """Fast serializer of ``SendMessageRequestP2B`` for one producer.

    Caches the client id, per-partition prefixes, the constant ``flag``/``checkSum``/``sentAddr``
    tail, the ``msgType``/``msgTime`` fields and the last ``authInfo``. The bytes equal the
    generated class's ``SerializeToString`` (fields in number order, int32 negatives as 10-byte
    varints, ``msgType``/``msgTime`` only when non-empty, ``authInfo`` always, as Java does).

    Args:
        client_id: the producer id.
        sent_addr: the local IPv4 address as int32 (:func:`~tubemq_aio.protocol.message.ip_to_int`).
    """

    __slots__ = (
        "_auth",
        "_auth_bytes",
        "_auth_tails",
        "_client",
        "_heads",
        "_prefix",
        "_system",
        "_tails",
    )

    #: Bound on each cache (per (topic, partition) prefixes, per (msgType, msgTime) fields, per
    #: request shape envelope heads); a cache restarts when it is exceeded.
    MAX_CACHED_PREFIXES = 65536

    def __init__(self, client_id: str, sent_addr: int) -> None:
        self._client = _len_field(_TAG_CLIENT_ID, client_id.encode())
        self._prefix: dict[tuple[str, int], bytes] = {}
        self._system: dict[tuple[str, str], bytes] = {}
        self._heads: dict[tuple[str, int, int, int, int], bytes] = {}
        # flag (5), checkSum (6) = -1 "do not verify" (§5.5), sentAddr (7) for flag 0 and 1.
        self._tails = tuple(
            b"\x28"
            + encode_varint(flag)
            + b"\x30"
            + encode_varint(NO_CHECKSUM)
            + b"\x38"
            + encode_varint(sent_addr)
            for flag in (0, 1)
        )
        self._auth: BrokerAuthorization | None = None
        self._auth_bytes = b""
        self._auth_tails = self._tails  # _tails[flag] + _auth_bytes

    def encode(
        self, topic: str, partition_id: int, message: EncodedMessage, auth: BrokerAuthorization
    ) -> bytes:
        """Serialize one send request.

        Args:
            topic: the topic (validated by the caller).
            partition_id: the chosen partition id.
            message: the encoded message.
            auth: the ``authInfo`` from :meth:`tubemq_aio.auth.TokenState.broker_auth`.
        """
        data = message[0]
        prefix = self._prefix.get((topic, partition_id))
        if prefix is None:
            prefix = self._new_prefix(topic, partition_id)
        tail = self._tail(message, auth)
        return b"".join((prefix, _varint_len(len(data)), data, tail))

    def encode_parts(
        self,
        topic: str,
        partition_id: int,
        message: EncodedMessage,
        auth: BrokerAuthorization,
        timeout_ms: int,
    ) -> tuple[bytes, bytes, bytes, int]:
        """The whole request payload (RPC envelope included) of one send, in three pieces.

        ``head + data + tail`` equals ``encode_request(BROKER_WRITE, 13, timeout_ms,
        encode(...))``; the head is cached per request shape (partition, timeout, data and tail
        sizes), so a send costs a lookup instead of building and copying the envelope, and the
        1 KB body is copied once, when the frame is written.

        Args:
            topic: the topic (validated by the caller).
            partition_id: the chosen partition id.
            message: the encoded message.
            auth: the ``authInfo`` from :meth:`tubemq_aio.auth.TokenState.broker_auth`.
            timeout_ms: ``RequestBody.timeout`` (positive).

        Returns:
            ``(head, data, tail, size)``; ``size`` is the payload length.

        Raises:
            LocalProtocolError: ``timeout_ms`` is not positive.
        """
        data = message[0]
        if auth is self._auth and message[1] == 0 and not message[2] and not message[3]:
            tail = self._auth_tails[0]  # the plain message (inlined _tail)
        else:
            tail = self._tail(message, auth)
        size = len(data)
        key = (topic, partition_id, timeout_ms, size, len(tail))
        head = self._heads.get(key)
        if head is None:
            head = self._new_head(key)
        return head, data, tail, len(head) + size + len(tail)

    def plain_parts(
        self, topic: str, partition_id: int, body: bytes, auth: BrokerAuthorization, timeout_ms: int
    ) -> tuple[tuple[bytes, bytes, bytes], int]:
        """:meth:`encode_parts` of a plain message (a ``bytes`` body without attributes, type or
        time, see :func:`~tubemq_aio.protocol.message.plain_message`): ``((head, body, tail),
        size)``, the pieces as the connection takes them.

        Raises:
            LocalProtocolError: ``timeout_ms`` is not positive.
        """
        head, data, tail, size = self.encode_parts(
            topic, partition_id, plain_message(body), auth, timeout_ms
        )
        return (head, data, tail), size

    def _tail(self, message: EncodedMessage, auth: BrokerAuthorization) -> bytes:
        """Everything after ``data``: flag, checkSum, sentAddr, msgType, msgTime, authInfo."""
        _, flag, msg_type, msg_time = message
        if auth is not self._auth:
            self._set_auth(auth)
        if not msg_type and not msg_time and 0 <= flag <= 1:
            return self._auth_tails[flag]
        if 0 <= flag <= 1:
            tail = self._tails[flag]
        else:
            tail = self._tails[0].replace(b"\x28\x00", b"\x28" + encode_varint(flag), 1)
        fields = b""
        if msg_type or msg_time:
            fields = self._system.get((msg_type, msg_time)) or self._new_system_fields(
                msg_type, msg_time
            )
        return tail + fields + self._auth_bytes

    def _new_head(self, key: tuple[str, int, int, int, int]) -> bytes:
        topic, partition_id, timeout_ms, size, tail_size = key
        prefix = self._prefix.get((topic, partition_id))
        if prefix is None:
            prefix = self._new_prefix(topic, partition_id)
        size_varint = _varint_len(size)
        body_size = len(prefix) + len(size_varint) + size + tail_size
        envelope = request_head(_SEND_SERVICE, _SEND_METHOD, timeout_ms, body_size)
        if len(self._heads) >= self.MAX_CACHED_PREFIXES:
            self._heads.clear()
        head = self._heads[key] = envelope + prefix + size_varint
        return head

    def _new_system_fields(self, msg_type: str, msg_time: str) -> bytes:
        if len(self._system) >= self.MAX_CACHED_PREFIXES:
            self._system.clear()
        fields = b""
        if msg_type:
            fields += _len_field(_TAG_MSG_TYPE, msg_type.encode())
        if msg_time:
            fields += _len_field(_TAG_MSG_TIME, msg_time.encode())
        self._system[(msg_type, msg_time)] = fields
        return fields

    def _new_prefix(self, topic: str, partition_id: int) -> bytes:
        if len(self._prefix) >= self.MAX_CACHED_PREFIXES:
            self._prefix.clear()
        prefix = b"".join(
            (
                self._client,
                _len_field(_TAG_TOPIC, topic.encode()),
                _TAG_PARTITION,
                encode_varint(partition_id),
                _TAG_DATA,
            )
        )
        self._prefix[(topic, partition_id)] = prefix
        return prefix

    def _set_auth(self, auth: BrokerAuthorization) -> None:
        body = b"\x08" + encode_varint(auth.visit_token)
        if auth.auth_token:
            body += _len_field(0x12, auth.auth_token.encode())
        self._auth = auth
        self._auth_bytes = auth_bytes = _len_field(_TAG_AUTH, body)
        self._auth_tails = (self._tails[0] + auth_bytes, self._tails[1] + auth_bytes)


@dataclass(frozen=True, slots=True)
class SendResult:
    """The outcome of a successful send, as returned to users.

    Attributes:
        topic: the topic sent to.
        partition_key: ``brokerId:topic:partitionId`` of the partition that stored the message.
        partition_id: the partition id.
        broker_id: the broker id.
        message_id: the broker-assigned message id (-1 if the broker sent none).
        append_time: the broker's append time in ms since the epoch (-1 if not sent).
        append_offset: the index offset the message was appended at (-1 if not sent).
    """

    topic: str
    partition_key: str
    partition_id: int
    broker_id: int
    message_id: int
    append_time: int
    append_offset: int


_SendResponseMsg = broker_pb.SendMessageResponseB2P
_new_result = object.__new__


def _result_setter(name: str) -> Callable[[SendResult, Any], None]:
    descriptor: Any = vars(SendResult)[name]
    setter: Callable[[SendResult, Any], None] = descriptor.__set__
    return setter


_RESULT_FIELDS = (
    "topic",
    "partition_key",
    "partition_id",
    "broker_id",
    "message_id",
    "append_time",
    "append_offset",
)
(
    _set_topic,
    _set_partition_key,
    _set_partition_id,
    _set_broker_id,
    _set_message_id,
    _set_append_time,
    _set_append_offset,
) = map(_result_setter, _RESULT_FIELDS)
assert tuple(SendResult.__dataclass_fields__) == _RESULT_FIELDS, "update parse_send_result"


def parse_send_result(data: bytes, partition: Partition) -> SendResult:
    """Decode a ``SendMessageResponseB2P`` straight into the user's result.

    Success means ``errCode == 200`` (what Java checks, not the ``success`` field). The message id
    comes from field 5, or from ``errMsg`` (decimal) for old brokers; absent values become -1.
    ``requireAuth`` is ignored, as in Java.

    Raises:
        RemoteProtocolError: the bytes are not a valid message.
        ServerError: the subclass for the response's error code when it was not successful.
    """
    return SendResultParser().parse(data, partition)


class SendResultParser:
    """:func:`parse_send_result` reusing one protobuf message (the producer's hot path).

    Parsing into a kept message spares the allocation of a new one per answer (≈ a quarter of
    the parse). One parser per producer: it must not be shared between threads.
    """

    __slots__ = ("_msg",)

    def __init__(self) -> None:
        self._msg = _SendResponseMsg()

    def parse(self, data: bytes, partition: Partition) -> SendResult:
        """Decode one answer; as :func:`parse_send_result`.

        Raises:
            RemoteProtocolError: the bytes are not a valid message.
            ServerError: the subclass for the response's error code when it was not successful.
        """
        msg = self._msg
        try:
            msg.ParseFromString(data)  # clears what the previous answer left
        except DecodeError as exc:
            raise RemoteProtocolError(f"undecodable SendMessageResponseB2P: {exc}") from None
        err_msg = msg.errMsg
        if type(err_msg) is not str:  # its only string field; see protocol._pbparse
            raise RemoteProtocolError("SendMessageResponseB2P.errMsg is not valid UTF-8")
        if msg.errCode != SUCCESS:
            raise server_error(msg.errCode, err_msg)
        # A non-zero value is present; HasField (twice the cost of a read) only settles a zero.
        message_id = msg.messageId
        if not message_id and not msg.HasField("messageId"):
            text = err_msg.strip()
            message_id = int(text) if text.lstrip("-").isdigit() else -1
        append_time = msg.appendTime
        if not append_time and not msg.HasField("appendTime"):
            append_time = -1
        append_offset = msg.appendOffset
        if not append_offset and not msg.HasField("appendOffset"):
            append_offset = -1
        # One per send: filled through the slot descriptors, which skips the frozen dataclass's
        # seven object.__setattr__ calls of its generated __init__ (≈ 1 µs -> ≈ 0.3 µs).
        result = _new_result(SendResult)
        _set_topic(result, partition.topic)
        _set_partition_key(result, partition.partition_key)
        _set_partition_id(result, partition.partition_id)
        _set_broker_id(result, partition.broker.broker_id)
        _set_message_id(result, message_id)
        _set_append_time(result, append_time)
        _set_append_offset(result, append_offset)
        return result


_CompiledParser = _compiled_twin("SendResultParser")


def send_result_parser() -> Callable[[bytes, Partition], SendResult]:
    """A send-answer parser for one producer (one event loop; not to be shared by threads).

    Returns:
        The compiled parser of :mod:`tubemq_aio.accelerator` when it is built (same results, same
        errors; it hands every answer it does not take to the pure one), else
        ``SendResultParser().parse``.
    """
    pure = SendResultParser().parse
    if _CompiledParser is None:
        return pure
    parser: Callable[[bytes, Partition], SendResult] = _CompiledParser(
        SendResult, _RESULT_FIELDS, pure, Partition, Broker
    ).parse
    return parser


_CompiledPlainEncoder = _compiled_twin("PlainSendEncoder")

#: ``(topic, partition_id, body, auth, timeout_ms) -> ((head, body, tail), size)``.
PlainParts = Callable[
    [str, int, bytes, BrokerAuthorization, int], tuple[tuple[bytes, bytes, bytes], int]
]


def plain_send_encoder(encoder: SendRequestEncoder) -> PlainParts:
    """The request encoder of a plain message for one producer (one event loop).

    Returns:
        The compiled ``PlainSendEncoder.plain_parts`` of :mod:`tubemq_aio.accelerator` when it
        is built (it keeps the pieces ``encoder`` makes, so the bytes are the same), else
        ``encoder.plain_parts``.
    """
    if _CompiledPlainEncoder is None:
        return encoder.plain_parts
    parts: PlainParts = _CompiledPlainEncoder(encoder, plain_message).plain_parts
    return parts
