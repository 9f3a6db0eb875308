"""Publishing HTTP messages through the SDK :class:`~tubemq_aio.Producer`."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import orjson

from tubemq_aio.errors import TubeMQError
from tubemq_aio.gateway.errors import InvalidBodyError
from tubemq_aio.gateway.http.api_errors import ApiError, api_error_for
from tubemq_aio.gateway.http.message_bodies import SharedBatch, decode_value
from tubemq_aio.gateway.http.schemas import ProduceRequest
from tubemq_aio.producer import Producer
from tubemq_aio.protocol.producer_send import SendResult

__all__ = ["BatchAnswer", "send_batch", "send_one"]


@dataclass(frozen=True, slots=True)
class BatchAnswer:
    """A batch's answer.

    Attributes:
        items: the JSON array of each message's
            :class:`~tubemq_aio.gateway.http.schemas.BatchItem`, in request order, ready for
            ``orjson.dumps`` to splice in as is.
        statuses: how many messages had each HTTP status.
    """

    items: orjson.Fragment
    statuses: dict[int, int]


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
        timeout=_per_send(producer, timeout),
    )


def _per_send(producer: Producer, timeout: float) -> float | None:
    """``timeout`` as a send's argument: None when it is the producer's own ``send_timeout``
    (the same deadline), which lets a plain message take the SDK's hot path."""
    return None if timeout == producer.config.effective_send_timeout else timeout


async def _send_shared(
    producer: Producer, topic: str, batch: SharedBatch, timeout: float
) -> list[SendResult | BaseException]:
    """Send a batch's bodies through one ``send_many`` (no task per message); one at a time,
    concurrently, when the SDK refuses that call as a whole (e.g. one body too large for the
    topic: nothing was sent, each answers for itself) or the batch exceeds ``max_send_many``."""
    bodies = batch.bodies
    valid = [b for b in bodies if type(b) is bytes]
    per_send = _per_send(producer, timeout)
    sent: Sequence[SendResult | BaseException] | None = None
    if valid and len(valid) <= producer.config.max_send_many:
        try:
            sent = await producer.send_many(
                topic,
                valid,
                attributes=batch.attributes,
                msg_type=batch.msg_type,
                msg_time=batch.msg_time,
                key=batch.key,
                timeout=per_send,
            )
        except TubeMQError:
            sent = None
    if sent is None:
        sent = await asyncio.gather(
            *(
                producer.send(
                    topic,
                    body,
                    attributes=batch.attributes,
                    msg_type=batch.msg_type,
                    msg_time=batch.msg_time,
                    key=batch.key,
                    timeout=per_send,
                )
                for body in valid
            ),
            return_exceptions=True,
        )
    if len(valid) == len(bodies):
        return list(sent)
    results = iter(sent)
    return [next(results) if isinstance(b, bytes) else b for b in bodies]


def _items(
    outcomes: Sequence[SendResult | BaseException], answer: Callable[[BaseException], ApiError]
) -> BatchAnswer:
    """The JSON array of the outcomes' items, and how many answers had each status.

    A stored message's item is written as text straight away (its partition key quoted once
    per partition): a dict per message, then ``orjson`` over them, cost about 650 instructions
    more per message (Callgrind; docs/gateway.md, "Batch produce"). An error item is a dict
    through ``orjson``.
    """
    failed: list[int] = []
    quoted: dict[str, str] = {}
    items: list[str] = []
    keep = items.append
    for index, outcome in enumerate(outcomes):
        if isinstance(outcome, SendResult):
            key = outcome.partition_key
            text = quoted.get(key)
            if text is None:
                text = quoted[key] = orjson.dumps(key).decode()
            keep(
                f'{{"index":{index},"status":200,"partition_key":{text},'
                f'"message_id":"{outcome.message_id}",'
                f'"append_offset":"{outcome.append_offset}"}}'
            )
            continue
        if not isinstance(outcome, Exception) or api_error_for(outcome) is None:
            raise outcome
        error = answer(outcome)
        failed.append(error.status)
        body = {"code": error.code, "message": error.message, "retriable": error.retriable}
        keep(orjson.dumps({"index": index, "status": error.status, "error": body}).decode())
    statuses = Counter(failed)
    if len(failed) < len(items):
        statuses[200] = len(items) - len(failed)
    return BatchAnswer(orjson.Fragment(f"[{','.join(items)}]"), dict(statuses))


async def send_batch(
    producer: Producer,
    topic: str,
    messages: Sequence[ProduceRequest | InvalidBodyError] | SharedBatch,
    timeout: float,
    answer: Callable[[BaseException], ApiError],
) -> BatchAnswer:
    """Send every message, pipelined by the producer; one result each, in order.

    Messages that share their options (the common case, and always a :class:`SharedBatch`)
    go through one ``send_many`` call; otherwise each is its own concurrent send. A message
    given as the :class:`InvalidBodyError` that refuses it is not sent; its result is that error.
    ``answer`` maps a failed message's exception to its error answer (and logs and counts it).

    Raises:
        Exception: only an unexpected failure (a bug); expected ones become per-item errors.
    """
    if isinstance(messages, SharedBatch):
        return _items(await _send_shared(producer, topic, messages, timeout), answer)
    valid = [m for m in messages if isinstance(m, ProduceRequest)]
    sent = await _send_valid(producer, topic, valid, timeout) if valid else []
    if len(valid) == len(messages):
        return _items(sent, answer)
    results = iter(sent)  # an invalid message's own error stands in its place
    return _items(
        [m if isinstance(m, InvalidBodyError) else next(results) for m in messages], answer
    )


async def _send_valid(
    producer: Producer, topic: str, messages: Sequence[ProduceRequest], timeout: float
) -> Sequence[SendResult | BaseException]:
    """Send validated messages: one ``send_many`` when they share their options, else one
    concurrent send each."""
    if (batch := SharedBatch.of(messages)) is not None:
        return await _send_shared(producer, topic, batch, timeout)
    return await asyncio.gather(
        *(send_one(producer, topic, r, timeout) for r in messages), return_exceptions=True
    )
