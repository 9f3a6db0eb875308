"""Routes that refuse a query parameter they do not take.

A misspelt or misplaced parameter would otherwise be ignored and its default silently apply:
``POST /v1/groups/g/fetch?wait_ms=5000`` answered ``empty`` at once, the long poll never
asked for (its settings go in the JSON body). :class:`KnownQueryRoute` answers 422
``invalid_request`` naming the parameter and what the route takes instead. A request without
a query string costs one lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from tubemq_aio.gateway.errors import InvalidRequestError

__all__ = ["Handler", "KnownQueryRoute"]

#: A route's ASGI-level handler: the request to its response.
Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class KnownQueryRoute(APIRoute):
    """An ``APIRoute`` that refuses query parameters its endpoint (or a dependency) does not
    declare: 422 ``invalid_request``, before the endpoint runs."""

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

        async def handle(request: Request) -> Response:
            if request.scope.get("query_string"):
                unknown = sorted(set(request.query_params) - taken)
                if unknown:
                    raise InvalidRequestError(f"unknown query parameter {unknown[0]!r}; {instead}")
            return await handler(request)

        return handle


def _with_dependencies(dependant: Dependant) -> list[Dependant]:
    """``dependant`` and every dependency under it, however deep."""
    found = [dependant]
    for below in dependant.dependencies:
        found += _with_dependencies(below)
    return found
