"""Publishing HTTP messages through the SDK :class:`~tubemq_aio.Producer`."""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import Callable, Sequence

from tubemq_aio.gateway.errors import InvalidBodyError
from tubemq_aio.gateway.http.api_errors import ApiError, api_error_for
from tubemq_aio.gateway.http.schemas import BatchItem, ErrorBody, ProduceRequest
from tubemq_aio.producer import Producer
from tubemq_aio.protocol.producer_rpc import SendResult

__all__ = ["decode_value", "send_batch", "send_one"]


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


async def send_one(
    producer: Producer, topic: str, request: ProduceRequest, timeout: float
) -> SendResult:
    """Send one message and wait until the broker stored it.

    Raises:
        InvalidBodyError: a bad value (422).
        TubeMQError: what the producer raised (an unknown outcome is a
            ``SendOutcomeUnknownError``).
    """
    body = decode_value(request.value, request.encoding)
    return await producer.send(
        topic,
        body,
        attributes=request.attributes,
        msg_type=request.msg_type,
        msg_time=request.msg_time,
        key=request.key,
        timeout=timeout,
    )


async def send_batch(
    producer: Producer, topic: str, requests: Sequence[ProduceRequest], timeout: float,
    answer: Callable[[BaseException], ApiError],
) -> list[BatchItem]:  # fmt: skip
    """Send every message concurrently (pipelined by the producer); one result each, in order.

    ``answer`` maps a failed message's exception to its error answer (and logs and counts it).

    Raises:
        Exception: only an unexpected failure (a bug); expected ones become per-item errors.
    """
    outcomes = await asyncio.gather(
        *(send_one(producer, topic, r, timeout) for r in requests), return_exceptions=True
    )
    items: list[BatchItem] = []
    for index, outcome in enumerate(outcomes):
        if isinstance(outcome, SendResult):
            items.append(
                BatchItem(
                    index=index,
                    status=200,
                    partition_key=outcome.partition_key,
                    message_id=str(outcome.message_id),
                    append_offset=str(outcome.append_offset),
                )
            )
        elif isinstance(outcome, Exception) and api_error_for(outcome) is not None:
            error = answer(outcome)
            items.append(
                BatchItem(
                    index=index,
                    status=error.status,
                    error=ErrorBody(
                        code=error.code, message=error.message, retriable=error.retriable
                    ),
                )
            )
        else:
            raise outcome
    return items
