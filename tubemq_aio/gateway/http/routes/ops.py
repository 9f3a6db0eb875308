"""Liveness, readiness and Prometheus metrics (no auth: bind them to an ops network).

Each also answers ``HEAD`` (the status and headers of its ``GET``, no body; RFC 9110, section
9.3.2): uptime monitors and load balancers that probe with ``HEAD`` met 405 and took a healthy
replica for a dead one. The ``HEAD`` routes stay out of the OpenAPI document, and each ``GET``
route is registered first: another method's 405 names the route that matched first in its
``Allow`` header, which must list the documented ``GET``."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import Response

from tubemq_aio.gateway.http.deps import GatewayDep, json_response

__all__ = ["router"]

router = APIRouter(tags=["ops"])
READY_TIMEOUT = 2.0


@router.head("/healthz", include_in_schema=False)
@router.get("/healthz", operation_id="healthz")
async def healthz() -> dict[str, str]:
    """Liveness: the event loop answers."""
    return {"status": "ok"}


@router.head("/readyz", include_in_schema=False)
@router.get(
    "/readyz",
    operation_id="readyz",
    responses={503: {"description": "a dependency is not ready"}},
)
async def readyz(gateway: GatewayDep) -> Response:
    """Readiness: Redis and the master reachable (per the engine), the producer running;
    ``hints`` names the fix of a failed check when the gateway knows it."""
    checks: dict[str, bool] = {}
    if gateway.config.produce_topics:
        checks["producer"] = gateway.producer is not None
    if gateway.config.groups:
        if gateway.engine is None:
            checks["engine"] = False
        else:
            try:
                async with asyncio.timeout(2 * READY_TIMEOUT):  # each check has READY_TIMEOUT
                    checks.update(await gateway.engine.readiness(READY_TIMEOUT))
            except Exception:  # readiness must answer; any failure means not ready
                checks["engine"] = False
    ready = all(checks.values())
    body: dict[str, object] = {"ready": ready, "checks": checks}
    hints = {} if gateway.engine is None else gateway.engine.hints()
    hints = {name: text for name, text in hints.items() if not checks.get(name, True)}
    if hints:  # a failed check whose fix the gateway knows (a web port given for the master)
        body["hints"] = hints
    return json_response(body, 200 if ready else 503)


@router.head("/metrics", include_in_schema=False, response_class=Response)
@router.get("/metrics", operation_id="metrics", response_class=Response)
async def metrics(gateway: GatewayDep) -> Response:
    """Prometheus text exposition of this replica."""
    return Response(gateway.metrics.render(), media_type="text/plain; version=0.0.4")
