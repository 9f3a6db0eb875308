"""Publishing HTTP messages through the SDK :class:`~tubemq_aio.Producer`."""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import Sequence

from tubemq_aio.gateway.http.api_errors import ApiError, api_error_for
from tubemq_aio.gateway.http.schemas import BatchItem, ErrorBody, ProduceRequest
from tubemq_aio.producer import Producer
from tubemq_aio.protocol.producer_rpc import SendResult

__all__ = ["decode_value", "send_batch", "send_one"]


def decode_value(value: str, encoding: str) -> bytes:
    """The message body for ``value`` in ``encoding``.

    Raises:
        ApiError: 422 when base64 is malformed or the body is empty.
    """
    if encoding == "base64":
        try:
            body = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise ApiError(422, "invalid", "value is not valid base64") from None
    else:
        body = value.encode("utf-8", "surrogatepass")
    if not body:
        raise ApiError(422, "invalid", "value must not be empty")
    return body


async def send_one(
    producer: Producer, topic: str, request: ProduceRequest, timeout: float
) -> SendResult:
    """Send one message and wait until the broker stored it.

    Raises:
        ApiError: a client mistake (422/413) or a failure with its HTTP meaning; an unknown
            outcome is a 504 that says so.
    """
    body = decode_value(request.value, request.encoding)
    try:
        return await producer.send(
            topic,
            body,
            attributes=request.attributes,
            msg_type=request.msg_type,
            msg_time=request.msg_time,
            key=request.key,
            timeout=timeout,
        )
    except ApiError:
        raise
    except Exception as exc:
        mapped = api_error_for(exc)
        if mapped is None:
            raise
        raise mapped from exc


async def send_batch(
    producer: Producer, topic: str, requests: Sequence[ProduceRequest], timeout: float
) -> list[BatchItem]:
    """Send every message concurrently (pipelined by the producer); one result each, in order.

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
        elif isinstance(outcome, ApiError):
            items.append(
                BatchItem(
                    index=index,
                    status=outcome.status,
                    error=ErrorBody(
                        code=outcome.code, message=outcome.message, retriable=outcome.retriable
                    ),
                )
            )
        else:
            raise outcome
    return items
