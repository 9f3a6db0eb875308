"""Encoding every message of a :meth:`Producer.send_many` call before any is sent, so that a
bad one refuses the whole call with nothing sent."""

from __future__ import annotations

from collections.abc import Sequence

from tubemq_aio.errors import InvalidMessageError
from tubemq_aio.producer._outgoing import Outgoing
from tubemq_aio.producer.config import is_plain_send
from tubemq_aio.protocol.message import EncodedMessage, encode_message

__all__ = ["encode_all"]


def encode_all(
    shared: Outgoing, bodies: list[bytes], max_size: int
) -> Sequence[EncodedMessage | bytes]:
    """Encode every message of a ``send_many`` call before any is sent.

    Args:
        shared: the call's message options (its attributes, type and time are every message's).
        bodies: the bodies, in order (validated: non-empty ``bytes``).
        max_size: the topic's max message size in bytes.

    Returns:
        Each message as :meth:`SendAttempts.begin
        <tubemq_aio.producer._attempts.SendAttempts.begin>` takes it: ``bodies`` itself when
        the messages are plain (no attributes, type or time: each request is then built by the
        compiled plain encoder, as a plain :meth:`~tubemq_aio.Producer.send` is), else one
        :class:`~tubemq_aio.protocol.message.EncodedMessage` each.

    Raises:
        InvalidMessageError: a message is too large for the topic or otherwise invalid (its
            index is named; nothing was sent).
    """
    attributes, msg_type, msg_time = shared.attributes, shared.msg_type, shared.msg_time
    plain = is_plain_send(shared.topic, shared.body, attributes, msg_type, msg_time)
    if plain and max(map(len, bodies), default=0) <= max_size:
        return bodies  # every body is checked non-empty bytes: each is as plain as the first
    encoded: list[EncodedMessage] = []
    append = encoded.append
    for index, body in enumerate(bodies):
        try:
            append(
                encode_message(
                    body,
                    attributes=attributes,
                    msg_type=msg_type,
                    msg_time=msg_time,
                    max_size=max_size,
                )
            )
        except InvalidMessageError as exc:
            raise type(exc)(f"send_many: bodies[{index}]: {exc}") from None
    return encoded
