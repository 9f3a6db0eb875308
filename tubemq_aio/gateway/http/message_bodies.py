"""Message bodies of produce requests: a value decoded, and a batch whose messages share options.

A batch whose messages differ only in their ``value`` (the common case) is a
:class:`SharedBatch`: the decoded bodies and the one set of options, sent as one
``Producer.send_many``. :func:`read_shared_batch` reads such a batch straight from the raw JSON
bytes of ``POST …/messages/batch``, without a pydantic model per message (which cost about as
much as the rest of the request): ``orjson`` parses the body, the first message's options are
validated by :class:`~tubemq_aio.gateway.http.schemas.ProduceRequest` itself, and every other
message must carry equal options and a non-empty text ``value``. What it does not accept (any
other shape, options that differ between messages, JSON that ``orjson`` refuses) it leaves to
the route's model, so the rules and the 422 answers stay those of the OpenAPI document's model.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import orjson
from pydantic import ValidationError

from tubemq_aio.gateway.config.limits import MAX_BATCH_CEILING
from tubemq_aio.gateway.errors import InvalidBodyError
from tubemq_aio.gateway.http.schemas import MAX_VALUE_CHARS, ProduceRequest

__all__ = ["SharedBatch", "decode_value", "read_shared_batch"]


def decode_value(value: str, encoding: str) -> bytes:
    """The message body for ``value`` in ``encoding``.

    Raises:
        InvalidBodyError: base64 is malformed or the body is empty (422).
    """
    if encoding == "base64":
        try:
            body = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidBodyError("value is not valid base64") from None
    else:
        body = value.encode("utf-8", "surrogatepass")
    if not body:
        raise InvalidBodyError("value must not be empty")
    return body


def _body_or_error(value: str, encoding: str) -> bytes | InvalidBodyError:
    try:
        return decode_value(value, encoding)
    except InvalidBodyError as exc:
        return exc


@dataclass(frozen=True, slots=True)
class SharedBatch:
    """The messages of one batch, which share their options.

    Attributes:
        bodies: each message's body, or the error that refuses it alone (e.g. bad base64).
        attributes: the options of every message, as in ``ProduceRequest``.
        msg_type: as in ``ProduceRequest``.
        msg_time: as in ``ProduceRequest``.
        key: as in ``ProduceRequest``.
    """

    bodies: list[bytes | InvalidBodyError]
    attributes: Mapping[str, str] | None
    msg_type: str | None
    msg_time: str | None
    key: str | None

    def __len__(self) -> int:
        return len(self.bodies)

    @classmethod
    def of(cls, requests: Sequence[ProduceRequest]) -> SharedBatch | None:
        """The batch of validated ``requests``, or None when their options differ (or there
        are none)."""
        if not requests:
            return None
        first = requests[0]
        for r in requests:
            if (
                r.attributes != first.attributes
                or r.msg_type != first.msg_type
                or r.msg_time != first.msg_time
                or r.key != first.key
            ):
                return None
        bodies = [_body_or_error(r.value, r.encoding) for r in requests]
        return cls(bodies, first.attributes, first.msg_type, first.msg_time, first.key)


def read_shared_batch(raw: bytes) -> SharedBatch | None:
    """The batch of a ``BatchProduceRequest`` JSON body whose messages share their options, or
    None when the body is not that (the route's model then reads it; see the module)."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if type(data) is not dict or len(data) != 1:
        return None
    messages = data.get("messages")
    if type(messages) is not list or not 0 < len(messages) <= MAX_BATCH_CEILING:
        return None
    first = messages[0]
    if type(first) is not dict:
        return None
    options = dict(first)
    options.pop("value", None)
    values: list[str] = []
    keep = values.append
    for message in messages:
        if type(message) is not dict:
            return None
        value = message.pop("value", None)  # what is left must equal the first's options
        if type(value) is not str or not value or message != options:
            return None
        keep(value)
    if max(map(len, values)) > MAX_VALUE_CHARS:
        return None
    try:
        shape = ProduceRequest.model_validate({**options, "value": values[0]})
    except ValidationError:
        return None
    if shape.encoding == "utf8":  # orjson gives no lone surrogate: every value encodes
        bodies: list[bytes | InvalidBodyError] = [v.encode() for v in values]
    else:
        bodies = [_body_or_error(v, shape.encoding) for v in values]
    return SharedBatch(bodies, shape.attributes, shape.msg_type, shape.msg_time, shape.key)
