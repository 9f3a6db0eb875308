"""Fetch with a lease, and ack / nack / extend by lease token."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Annotated, Literal

from fastapi import APIRouter, Path, Request
from fastapi.responses import Response

from tubemq_aio.errors import TubeMQError
from tubemq_aio.gateway.config.tables import ApiKey
from tubemq_aio.gateway.engine.data import FetchOutcome, FetchQuery, Lease
from tubemq_aio.gateway.engine.port import ConsumeEngine, PiggybackAcks
from tubemq_aio.gateway.engine.tokens import MAX_TOKEN_LENGTH, LeaseTokens
from tubemq_aio.gateway.errors import LeaseStaleError, RateLimitedError
from tubemq_aio.gateway.http.api_errors import ApiError, api_error_for
from tubemq_aio.gateway.http.auth import Authenticator
from tubemq_aio.gateway.http.deps import (
    ConsumeGroup,
    Gateway,
    GatewayDep,
    Principal,
    json_response,
    messages_fragment,
)
from tubemq_aio.gateway.http.direct_route import DirectJsonRoute
from tubemq_aio.gateway.http.disconnect import run_unless_disconnected
from tubemq_aio.gateway.http.schemas import (
    ExtendRequest,
    ExtendResponse,
    FetchRequest,
    FetchResponse,
    NackRequest,
    SettleResponse,
    error_responses,
)
from tubemq_aio.gateway.leases.lease_key import LeaseKey

__all__ = ["lease_json", "router"]

_FETCH_ERRORS = (400, 401, 403, 404, 408, 413, 415, 422, 429, 503, 504)
_LEASE_ERRORS = (400, 401, 403, 404, 408, 409, 413, 415, 422, 503)
#: What the access log and the metrics show for a fetch whose client left before its answer
#: (nginx's "client closed request"; nobody receives it).
CLIENT_GONE = 499
router = APIRouter(tags=["consume"], route_class=DirectJsonRoute)
TokenPath = Annotated[
    str, Path(min_length=1, max_length=MAX_TOKEN_LENGTH, description="a lease token from fetch")
]
# OpenAPI links: a fetch's lease token feeds the lease routes (clients and fuzzers chain them).
_LEASE_LINKS = {
    name: {"operationId": name, "parameters": {"token": "$response.body#/lease/token"}}
    for name in ("ack", "nack", "extend")
}


def _errors(codes: tuple[int, ...]) -> dict[int | str, dict[str, object]]:
    return error_responses(codes)


def _claims(gateway: Gateway, principal: ApiKey, token: str) -> LeaseKey:
    claims = gateway.tokens.decode(token)  # 400 before anything else is asked
    Authenticator.require(principal, "consume", claims.group)
    gateway.group(claims.group)
    return claims


async def _settle(
    gateway: Gateway,
    principal: ApiKey,
    token: str,
    action: Literal["ack", "nack"],
    delay_ms: int = 0,
) -> str:
    claims = _claims(gateway, principal, token)
    try:
        result = await gateway.require_engine().settle(claims, action, delay_ms=delay_ms)
    except LeaseStaleError:
        gateway.streams.settled(claims.lease_id)  # not a stream's to wait for any more
        raise
    gateway.streams.settled(claims.lease_id)
    gateway.metrics.child(gateway.metrics.settles, claims.group, action, result).inc()
    return result


@router.post(
    "/v1/groups/{group}/fetch",
    operation_id="fetch",
    response_model=FetchResponse,
    responses={**_errors(_FETCH_ERRORS), 200: {"links": _LEASE_LINKS}},
)
async def fetch(
    group: str, body: FetchRequest, request: Request, gateway: GatewayDep, access: ConsumeGroup
) -> Response:
    """Settle the piggy-backed acks, then lease one partition and return a batch from it.

    ``busy`` (every partition leased), ``empty`` and ``paused`` are normal 200 answers. When
    the client disconnects first, the (long) poll stops at once and a batch leased for it is
    released, so nothing waits for the lease to expire.
    """
    principal = access.principal
    engine = gateway.require_engine()
    # a fair share of long polls per key; a fetch refused for it (503) has no effect at all,
    # its carried acks included (the client's retry carries them again)
    with gateway.long_poll_slot(principal.name, body.wait_ms):
        carried = _Carried(gateway, principal, body.ack or ())
        query = FetchQuery(
            group,
            body.client_id,
            wait_ms=body.wait_ms,
            lease_ms=body.lease_ms,
            max_messages=body.max_messages,
            holder=gateway.replica,
            owner=principal.name,
        )
        work = engine.fetch(query, acks=carried.batch if carried.batch.refs else None)
        try:
            outcome, gone = await run_unless_disconnected(
                request.receive, work, functools.partial(_release_unread, engine)
            )
        finally:
            carried.count()
    if gone or outcome is None:
        gateway.metrics.child(gateway.metrics.fetch_outcomes, group, "client_gone").inc()
        return Response(status_code=CLIENT_GONE)
    metrics = gateway.metrics
    metrics.child(metrics.fetch_outcomes, group, outcome.status).inc()
    if outcome.status == "throttled":
        raise RateLimitedError(f"group {group!r} is over its consume rate", outcome.retry_after_ms)
    reply: dict[str, object] = {"status": outcome.status, "messages": []}
    lease = outcome.lease
    if outcome.status == "ok" and lease is not None:
        reply["lease"] = lease_json(lease, gateway.tokens)
        force = body.value_encoding == "base64"
        reply["messages"] = messages_fragment(outcome.messages, force)
        metrics.child(metrics.messages_delivered, group).inc(len(outcome.messages))
    elif outcome.retry_after_ms is not None:
        reply["retry_after_ms"] = outcome.retry_after_ms
    if body.ack:
        reply["acks"] = carried.answers()
    return json_response(reply)


def lease_json(lease: Lease, tokens: LeaseTokens) -> dict[str, object]:
    """A granted lease as a client gets it: its token (issued by ``tokens``), partition, expiry
    (Redis ms) and redelivery count."""
    return {
        "token": tokens.encode(lease.key),
        "partition_key": lease.partition_key,
        "expires_at": lease.expires_at_ms,
        "redelivery": lease.redelivery,
    }


class _Carried:
    """The acks a fetch carries: verified up front, settled by the engine's fetch (with its
    first Redis round trip, or one by one); answered per token, in order."""

    def __init__(self, gateway: Gateway, principal: ApiKey, tokens: Sequence[str]) -> None:
        self.gateway, self.principal, self.tokens = gateway, principal, tokens
        self._errors: dict[int, Exception] = {}
        refs: list[LeaseKey] = []
        self._slots: list[int] = []
        for i, token in enumerate(tokens):
            try:
                refs.append(_claims(gateway, principal, token))
                self._slots.append(i)
            except (ApiError, TubeMQError) as exc:
                self._errors[i] = exc
        self.batch = PiggybackAcks(tuple(refs))

    def count(self) -> None:
        """Count the settled acks in the replica's settle metrics."""
        for ref, result in zip(self.batch.refs, self.batch.results or (), strict=False):
            if isinstance(result, str | LeaseStaleError):
                self.gateway.streams.settled(ref.lease_id)
            if isinstance(result, str):
                metrics = self.gateway.metrics
                metrics.child(metrics.settles, ref.group, "ack", result).inc()

    def answers(self) -> list[dict[str, object]]:
        """Per token: its result or its error."""
        outcome: dict[int, str | Exception] = dict(self._errors)
        outcome.update(zip(self._slots, self.batch.results or (), strict=False))
        out: list[dict[str, object]] = []
        for i, token in enumerate(self.tokens):
            result = outcome.get(i)
            if isinstance(result, str):
                out.append({"token": token, "result": result})
                continue
            if result is None:  # the engine answered no result for it: a bug of ours
                result = RuntimeError("the carried ack was not settled")
            elif api_error_for(result) is None and not isinstance(result, ApiError):
                raise result
            error = self.gateway.answer(result).body()["error"]
            out.append({"token": token, "result": "error", "error": error})
        return out


async def _release_unread(engine: ConsumeEngine, outcome: FetchOutcome) -> None:
    """Give back a batch leased for a client that left: no redelivery count, no lease wait."""
    if outcome.lease is not None:
        await engine.settle(outcome.lease.key, "release")


@router.post(
    "/v1/leases/{token}/ack",
    operation_id="ack",
    response_model=SettleResponse,
    responses=_errors(_LEASE_ERRORS),
)
async def ack(token: TokenPath, gateway: GatewayDep, principal: Principal) -> Response:
    """Commit the leased batch: ``acked``, or ``already_acked`` for a retry; 409 if re-leased."""
    return json_response({"result": await _settle(gateway, principal, token, "ack")})


@router.post(
    "/v1/leases/{token}/nack",
    operation_id="nack",
    response_model=SettleResponse,
    responses=_errors(_LEASE_ERRORS),
)
async def nack(
    token: TokenPath,
    gateway: GatewayDep,
    principal: Principal,
    body: NackRequest | None = None,
) -> Response:
    """Give the batch back; it is delivered again after ``delay_ms``."""
    delay = body.delay_ms if body is not None else 0
    return json_response({"result": await _settle(gateway, principal, token, "nack", delay)})


@router.post(
    "/v1/leases/{token}/extend",
    operation_id="extend",
    response_model=ExtendResponse,
    responses=_errors(_LEASE_ERRORS),
)
async def extend(
    token: TokenPath, body: ExtendRequest, gateway: GatewayDep, principal: Principal
) -> Response:
    """Keep the lease for ``lease_ms`` from now (Redis clock); 409 when it was taken over."""
    claims = _claims(gateway, principal, token)
    expires = await gateway.require_engine().extend(claims, body.lease_ms)
    return json_response({"expires_at": expires})
