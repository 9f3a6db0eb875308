"""The public data types users see: send results, received messages, brokers and partitions.

All are frozen, slotted dataclasses. :class:`Broker`, :class:`Partition` and :class:`SendResult`
are built by the pure protocol layer and re-exported here unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

from tubemq_aio.protocol.attributes import parse_msg_time
from tubemq_aio.protocol.message import DecodedPayload
from tubemq_aio.protocol.producer_meta import Broker, Partition
from tubemq_aio.protocol.producer_send import SendResult

__all__ = ["Broker", "Message", "Partition", "SendResult"]

_NO_ATTRIBUTES: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """A message delivered to a consumer.

    Attributes:
        topic: the topic the message was read from.
        body: the user payload.
        attributes: the user attributes (``key -> value``), read-only; the system headers
            ``$msgType$``/``$msgTime$`` are not included, see ``msg_type``/``msg_time``.
        msg_type: the message type (``$msgType$``), ``""`` when the producer set none.
        msg_time: the producer's message time (``$msgTime$``, a naive local wall time with minute
            precision), or ``None`` when absent or invalid.
        message_id: the broker-assigned message id (not an offset).
        partition_key: ``brokerId:topic:partitionId`` of the partition it came from.
        attribute: the raw attribute string as stored, or ``None`` when the message had none.
        flag: the message flag as stored (bit 0 = attribute block present).
        crc_ok: False when the payload's CRC-32 did not match the broker's checksum (the Java
            consumer silently drops such messages; we deliver them only if asked to).
    """

    topic: str
    body: bytes
    attributes: Mapping[str, str] = field(default_factory=lambda: _NO_ATTRIBUTES)
    msg_type: str = ""
    msg_time: datetime | None = None
    message_id: int = -1
    partition_key: str = ""
    attribute: str | None = None
    flag: int = 0
    crc_ok: bool = True

    @classmethod
    def from_payload(
        cls, decoded: DecodedPayload, *, topic: str, message_id: int, partition_key: str
    ) -> Message:
        """Build a message from a decoded payload.

        Args:
            decoded: the result of :func:`tubemq_aio.protocol.message.decode_payload`.
            topic: the topic read from.
            message_id: ``TransferedMessage.messageId``.
            partition_key: the partition read from.

        Returns:
            The message; its attribute mapping is the decoder's read-only (shared) mapping.
        """
        return cls(
            topic=topic,
            body=decoded.body,
            attributes=decoded.attributes,
            msg_type=decoded.msg_type,
            msg_time=parse_msg_time(decoded.msg_time) if decoded.msg_time else None,
            message_id=message_id,
            partition_key=partition_key,
            attribute=decoded.attribute,
            flag=decoded.flag,
            crc_ok=decoded.crc_ok,
        )
