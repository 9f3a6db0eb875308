"""``GET /ui``: the gateway's own page (lists topics and groups, tails a group live), and
``GET /ui/session``, which tells the page whether its key has an ``admin:`` scope.

Served only with ``ui = true`` (off by default). The page itself holds no data and needs no key
(a browser cannot send one when it opens a page); everything it shows comes from routes that
check the key, and the page refuses to go on without an ``admin:`` scope.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

from tubemq_aio.gateway.errors import ForbiddenScopeError
from tubemq_aio.gateway.http.deps import Principal, json_response
from tubemq_aio.gateway.http.ui_page import PAGE

__all__ = ["router"]

router = APIRouter(include_in_schema=False)
#: The page may only talk to its own origin and load nothing from anywhere else.
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
        "connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    ),
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
}


@router.get("/ui")
async def page() -> Response:
    """The page (HTML with its script inline; no asset from another host)."""
    return HTMLResponse(PAGE, headers=_HEADERS)


@router.get("/ui/session")
async def session(principal: Principal) -> Response:
    """The key's name and scopes; 403 unless it has an ``admin:`` scope."""
    if not any(scope.startswith("admin:") for scope in principal.scopes):
        raise ForbiddenScopeError("the /ui page needs a key with an admin: scope")
    return json_response({"name": principal.name, "scopes": list(principal.scopes)})
