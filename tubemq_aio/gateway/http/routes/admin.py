"""Group administration: offset reset, pause/resume, rate limit, lag."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import Response

from tubemq_aio.gateway.http.deps import (
    AdminGroup,
    GatewayDep,
    ReaderGroup,
    json_response,
)
from tubemq_aio.gateway.http.known_query import KnownQueryRoute
from tubemq_aio.gateway.http.schemas import (
    LagResponse,
    OkResponse,
    RateRequest,
    ResetRequest,
    ResetResponse,
    error_responses,
)
from tubemq_aio.gateway.http.wire_ints import int_text

__all__ = ["ClientIdQuery", "lag_body", "plain", "router"]

_ERRORS = error_responses((400, 401, 403, 404, 408, 409, 413, 415, 422, 503))
router = APIRouter(tags=["admin"], responses=_ERRORS, route_class=KnownQueryRoute)


def plain(value: object) -> Any:
    """``value`` as JSON-ready data (dataclasses and mappings become dicts, recursively)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def _offsets_as_text(entry: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """``entry`` with the integer values under ``keys`` as decimal strings (64-bit safe JSON)."""
    for key in keys:
        value = entry.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            entry[key] = int_text(value)
    return entry


@router.post(
    "/v1/groups/{group}/offsets/reset", operation_id="reset_offsets", response_model=ResetResponse
)
async def reset_offsets(
    group: str, body: ResetRequest, gateway: GatewayDep, _access: AdminGroup
) -> Response:
    """Move committed offsets (``to``, or ``to_time``: each partition's first message stamped at
    or after that time); outstanding lease tokens of the group then get 409."""
    target = body.to_time if body.to is None else body.to
    assert target is not None  # the model requires one of them
    entries = await gateway.require_engine().reset(group, target, client_id=body.client_id)
    rows = [_offsets_as_text(plain(e), ("old", "new")) for e in entries]
    return json_response({"partitions": rows})


@router.post("/v1/groups/{group}/pause", operation_id="pause", response_model=OkResponse)
async def pause(group: str, gateway: GatewayDep, _access: AdminGroup) -> Response:
    """Stop deliveries of the group on every replica from their next fetch."""
    await gateway.require_engine().pause(group)
    return json_response({"ok": True})


@router.post("/v1/groups/{group}/resume", operation_id="resume", response_model=OkResponse)
async def resume(group: str, gateway: GatewayDep, _access: AdminGroup) -> Response:
    """Resume deliveries of a paused group."""
    await gateway.require_engine().resume(group)
    return json_response({"ok": True})


@router.put("/v1/groups/{group}/rate", operation_id="set_rate", response_model=OkResponse)
async def set_rate(
    group: str, body: RateRequest, gateway: GatewayDep, _access: AdminGroup
) -> Response:
    """Set the group's consume rate (messages/s, shared by all replicas; 0 = off)."""
    await gateway.require_engine().set_rate(group, body.messages_per_second, body.burst)
    return json_response({"ok": True})


#: The ``client_id`` query parameter of a broadcast group's read-only routes.
ClientIdQuery = Annotated[
    str | None, Query(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")
]


@router.get("/v1/groups/{group}/lag", operation_id="get_lag", response_model=LagResponse)
async def get_lag(
    group: str,
    gateway: GatewayDep,
    _access: ReaderGroup,
    client_id: ClientIdQuery = None,
) -> Response:
    """Backlog per partition (committed, max, lag bytes, lease holder) and in total."""
    report = await gateway.require_engine().lag(group, client_id=client_id)
    return json_response(lag_body(group, report))


def lag_body(group: str, report: object) -> dict[str, Any]:
    """The JSON form of an engine's lag report (a :class:`LagResponse`): offsets as decimal
    strings, ``group`` and ``total_lag_bytes`` filled in."""
    body = plain(report)
    if not isinstance(body, dict):
        body = {"partitions": body}
    partitions = body.setdefault("partitions", [])
    body["group"] = group
    body.setdefault("total_lag_bytes", sum(p.get("lag_bytes") or 0 for p in partitions))
    for entry in partitions:
        _offsets_as_text(entry, ("committed", "max", "lag_bytes"))
    return _offsets_as_text(body, ("total_lag_bytes",))
