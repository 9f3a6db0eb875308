"""``POST /v1/topics/{topic}/messages`` and ``…/messages/batch``."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import APIRouter
from fastapi.responses import Response

from tubemq_aio.errors import TubeMQError
from tubemq_aio.gateway.config.tables import ApiKey
from tubemq_aio.gateway.errors import (
    InvalidBodyError,
    NotReadyError,
    RequestTooLargeError,
    TubeUnavailableError,
    UnknownTopicError,
)
from tubemq_aio.gateway.http.auth import Authenticator
from tubemq_aio.gateway.http.deps import Gateway, GatewayDep, Principal, json_response
from tubemq_aio.gateway.http.direct_route import DirectJsonRoute, fast_body
from tubemq_aio.gateway.http.message_bodies import SharedBatch, read_shared_batch
from tubemq_aio.gateway.http.publishing import send_batch, send_one
from tubemq_aio.gateway.http.schemas import (
    BatchProduceRequest,
    BatchProduceResponse,
    ProduceRequest,
    ProduceResult,
    error_responses,
)
from tubemq_aio.producer import Producer

__all__ = ["router"]

_ERRORS = error_responses((400, 401, 403, 404, 408, 413, 415, 422, 502, 503, 504))
router = APIRouter(tags=["produce"], responses=_ERRORS, route_class=DirectJsonRoute)


def _producer(gateway: Gateway, topic: str) -> Producer:
    if topic not in gateway.config.produce_topics:
        raise UnknownTopicError(f"the gateway may not publish to {topic!r}")
    if gateway.producer is None:
        raise NotReadyError("the producer is not running")
    return gateway.producer


@router.post("/v1/topics/{topic}/messages", operation_id="produce", response_model=ProduceResult)
async def produce(
    topic: str, body: ProduceRequest, gateway: GatewayDep, principal: Principal
) -> Response:
    """Publish one message; answers once the broker stored it (504 when that is unknown)."""
    Authenticator.require(principal, "produce", topic)
    producer = _producer(gateway, topic)
    try:
        result = await gateway.produce_guarded(
            send_one(producer, topic, body, gateway.config.produce_timeout)
        )
    except TubeMQError as exc:
        error = gateway.answer(exc)
        gateway.metrics.produced.labels(topic, str(error.status)).inc()
        raise error from exc
    gateway.metrics.produced.labels(topic, "200").inc()
    return json_response(
        {
            "partition_key": result.partition_key,
            "message_id": str(result.message_id),
            "append_time": result.append_time,
            "append_offset": str(result.append_offset),
        }
    )


async def _produce_batch(
    topic: str,
    body: Sequence[ProduceRequest | InvalidBodyError] | SharedBatch,
    gateway: Gateway,
    principal: ApiKey,
) -> Response:
    """:func:`produce_batch`'s work, for the model's messages or a body
    :func:`read_shared_batch` read (no model per message; the direct route passes it as
    ``body``)."""
    Authenticator.require(principal, "produce", topic)
    if len(body) > gateway.config.max_batch:
        raise RequestTooLargeError(f"at most {gateway.config.max_batch} messages per batch")
    producer = _producer(gateway, topic)
    try:
        answer = await gateway.produce_guarded(
            send_batch(producer, topic, body, gateway.config.produce_timeout, gateway.answer)
        )
    except TubeUnavailableError as exc:  # no master reachable: the batch as a whole
        error = gateway.answer(exc)
        gateway.metrics.produced.labels(topic, str(error.status)).inc(len(body))
        raise error from exc
    for code, count in answer.statuses.items():
        gateway.metrics.produced.labels(topic, str(code)).inc(count)
    status = 200 if answer.statuses.keys() == {200} else 207
    return json_response({"results": answer.items}, status)


@router.post(
    "/v1/topics/{topic}/messages/batch",
    operation_id="produce_batch",
    response_model=BatchProduceResponse,
    responses={207: {"model": BatchProduceResponse, "description": "some messages failed"}},
)
@fast_body(read_shared_batch, _produce_batch)
async def produce_batch(
    topic: str, body: BatchProduceRequest, gateway: GatewayDep, principal: Principal
) -> Response:
    """Publish up to ``max_batch`` messages; 200 when all were stored, else 207 with each
    message's own status (an invalid message is a 422 item; the others are still sent)."""
    return await _produce_batch(topic, body.items(), gateway, principal)


async def noop(body: ProduceRequest, gateway: GatewayDep, principal: Principal) -> Response:
    """The benchmark floor: produce's auth and body parsing, then a fixed answer (no send)."""
    Authenticator.require(principal, "produce", "noop")
    return json_response(
        {"partition_key": "0:noop:0", "message_id": "0", "append_time": 0, "append_offset": "0"}
    )
