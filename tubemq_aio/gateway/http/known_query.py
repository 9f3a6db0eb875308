"""Routes that refuse a query parameter they do not take, and a body when they take none.

A misspelt or misplaced parameter would otherwise be ignored and its default silently apply:
``POST /v1/groups/g/fetch?wait_ms=5000`` answered ``empty`` at once, the long poll never
asked for (its settings go in the JSON body). :class:`KnownQueryRoute` answers 422
``invalid_request`` naming the parameter and what the route takes instead, and so it does for
a parameter given twice (``?client_id=a&client_id=b`` answered for ``b`` alone; every
parameter here is one value). A request without a query string costs one lookup.

The same holds for a body sent to a route that takes none (``pause``, ``resume``, ``ack``):
``POST /v1/groups/g/pause`` with ``{"partitions": ["1:t:0"]}`` paused the whole group and
answered ``{"ok": true}``. Such a route answers 422 ``invalid`` naming the first key; an empty
body and ``{}`` (what ``curl -d '{}'`` sends to make a POST) are taken. A request without a
body costs one look at its headers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from tubemq_aio.gateway.errors import InvalidBodyError, InvalidRequestError

__all__ = ["Handler", "KnownQueryRoute"]

#: A route's ASGI-level handler: the request to its response.
Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class KnownQueryRoute(APIRoute):
    """An ``APIRoute`` that refuses query parameters its endpoint (or a dependency) does not
    declare or that are given twice (422 ``invalid_request``) and, on a route of a method with
    a body (``POST``, ``PUT``, ...) that declares no body, a body other than none or ``{}``
    (422 ``invalid``), before the endpoint runs."""

    def get_route_handler(self) -> Handler:
        """FastAPI's handler, preceded by the check of the query string's names."""
        handler: Handler = super().get_route_handler()
        everyone = _with_dependencies(self.dependant)
        taken = frozenset(str(field.alias) for d in everyone for field in d.query_params)
        if taken:
            instead = "this route takes " + ", ".join(sorted(taken))
        elif any(d.body_params for d in everyone):
            instead = "this route takes none: send its settings in the JSON body"
        else:
            instead = "this route takes none"
        with_body = (self.methods or set()) - {"GET", "HEAD"}
        bodiless = bool(with_body) and not any(d.body_params for d in everyone)

        async def handle(request: Request) -> Response:
            if request.scope.get("query_string"):
                given = request.query_params
                unknown = sorted(set(given) - taken)
                if unknown:
                    raise InvalidRequestError(f"unknown query parameter {unknown[0]!r}; {instead}")
                if len(given) < len(given.multi_items()):
                    twice = sorted(k for k in given if len(given.getlist(k)) > 1)[0]
                    raise InvalidRequestError(
                        f"query parameter {twice!r} given more than once; give it once"
                    )
            if bodiless and _has_body(request):
                _refuse_body(await request.body())
            return await handler(request)

        return handle


def _has_body(request: Request) -> bool:
    """Whether the request declares a body (a non-zero length, or a chunked one)."""
    headers = request.headers
    if "transfer-encoding" in headers:
        return True
    return headers.get("content-length", "").strip(" 0") != ""


def _refuse_body(raw: bytes) -> None:
    """Raise :class:`InvalidBodyError` unless ``raw`` is empty or the JSON object ``{}``."""
    if not raw.strip():
        return
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        where = f" at character {exc.pos}" if isinstance(exc, json.JSONDecodeError) else ""
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "unreadable"
        raise InvalidBodyError(f"body: not valid JSON{where} ({reason})") from None
    if value == {}:
        return
    if isinstance(value, dict):
        first = next(iter(value))
        raise InvalidBodyError(
            f"body.{first}: this route takes no body; send none (or {{}}); a setting it does "
            "not take would be ignored"
        )
    raise InvalidBodyError("body: this route takes no body; send none (or {})")


def _with_dependencies(dependant: Dependant) -> list[Dependant]:
    """``dependant`` and every dependency under it, however deep."""
    found = [dependant]
    for below in dependant.dependencies:
        found += _with_dependencies(below)
    return found
