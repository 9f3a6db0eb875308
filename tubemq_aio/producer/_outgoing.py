"""One message on its way to the broker, as the send paths hand it on: :class:`Outgoing`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from tubemq_aio.protocol.message import EncodedMessage, encode_message

__all__ = ["Outgoing", "snapshot"]


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A validated message and the options of its send (the arguments of
    :meth:`~tubemq_aio.Producer.send`, checked by
    :func:`~tubemq_aio.producer.config.check_send_args`).

    Attributes:
        topic: the topic (published on first use).
        body: the payload, non-empty ``bytes`` (see :func:`snapshot`).
        attributes: user ``key -> value`` items, or ``None`` (a mapping of its own, see
            :func:`snapshot`).
        msg_type: message type (a server-side filter item), or ``None``.
        msg_time: message time (``datetime`` or ``yyyyMMddHHmm``), or ``None``.
        key: routes every message with this key to the same partition, or ``None``.
        timeout: seconds the send may take, retries included (``None``: the producer's
            ``send_timeout``).
    """

    topic: str
    body: bytes
    attributes: Mapping[str, str] | None = None
    msg_type: str | None = None
    msg_time: datetime | str | None = None
    key: bytes | str | None = None
    timeout: float | None = None

    def encode(self, max_size: int) -> EncodedMessage:
        """The message's body and attribute block as sent (a plain message costs no copy).

        Args:
            max_size: the topic's max message size in bytes.

        Raises:
            InvalidMessageError: too large for the topic (``MessageTooLargeError``) or invalid.
        """
        return encode_message(
            self.body,
            attributes=self.attributes,
            msg_type=self.msg_type,
            msg_time=self.msg_time,
            max_size=max_size,
        )

    def with_body(self, body: bytes) -> Outgoing:
        """This message with another body (the messages of one ``send_many`` call share the
        rest)."""
        return replace(self, body=body)

    def with_timeout(self, timeout: float) -> Outgoing:
        """This message with another ``timeout`` (seconds; a message of ``send_many`` gets what
        the call has left)."""
        return replace(self, timeout=timeout)


def snapshot(
    body: bytes, attributes: Mapping[str, str] | None
) -> tuple[bytes, Mapping[str, str] | None]:
    """A send's body and attributes as they are at the call: a ``bytearray`` or ``memoryview``
    body copied to ``bytes``, a mapping of attributes copied to a dict of its own.

    A send goes on after the call returned (``send_nowait``) or waits before it encodes (for
    its topic's first publish), and retries encode nothing again: without the copies, a caller
    refilling its buffer or changing its mapping meanwhile had the new content sent.
    """
    if type(body) is not bytes:
        body = bytes(body)
    return body, None if attributes is None else dict(attributes)
