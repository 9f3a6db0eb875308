"""Encoding every message of a :meth:`Producer.send_many` call before any is sent, so that a
bad one refuses the whole call with nothing sent."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from tubemq_aio.errors import InvalidMessageError
from tubemq_aio.protocol.message import EncodedMessage, encode_message, plain_message

__all__ = ["encode_all"]


def encode_all(
    bodies: list[bytes],
    max_size: int,
    attributes: Mapping[str, str] | None,
    msg_type: str | None,
    msg_time: datetime | str | None,
) -> list[EncodedMessage]:
    """Encode every message of a ``send_many`` call before any is sent.

    Raises:
        InvalidMessageError: a message is too large for the topic or otherwise invalid (its
            index is named; nothing was sent).
    """
    plain = attributes is None and msg_type is None and msg_time is None
    encoded: list[EncodedMessage] = []
    for index, body in enumerate(bodies):
        if plain and type(body) is bytes and len(body) <= max_size:
            encoded.append(plain_message(body))
            continue
        try:
            encoded.append(
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
