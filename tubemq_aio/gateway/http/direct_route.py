"""A route whose well-formed JSON requests skip FastAPI's body and dependency machinery.

FastAPI spends most of a small request's time in its own machinery: ``json.loads`` of the
body, then solving the dependencies, then validating the parsed dict against the body model.
:class:`DirectJsonRoute` is declared like any route (the same signature, so the same OpenAPI
document) and answers a request whose ``Content-Type`` is one of :data:`DIRECT_CONTENT_TYPES`
(``application/json``, bare or naming UTF-8) and whose body the model accepts in one
``model_validate_json`` call on the raw bytes: each request-only dependency is called with the
request, the path parameters are taken as they are, and the endpoint runs with those arguments.
Every other request (another content type, no body, a body the model refuses, JSON that pydantic's
parser reads differently from ``json.loads``, such as a lone surrogate escape) goes through
FastAPI's own handler unchanged, so its answers (the 422 texts above all) stay FastAPI's. FastAPI's
handler reads the body that was already read from the same request object, which keeps it.

An endpoint may also name a cheaper reading of its most common bodies with :func:`fast_body`:
a parser of the raw bytes that returns what a second endpoint (the same parameters, that value
as the body) takes, or None for any body it does not take, which then goes the model's way
above. The parser must accept only bodies the model accepts, and read them as it would.

Only routes of a simple shape take the direct path (checked once, when the route is built):
one body parameter that is a pydantic model, path parameters that are plain ``str`` (nothing to
validate), no query, header or cookie parameters, and dependencies that take only the request.
Any other route behaves exactly like a
:class:`~tubemq_aio.gateway.http.known_query.KnownQueryRoute`.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from fastapi.dependencies.models import Dependant
from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from tubemq_aio.gateway.http.known_query import Handler, KnownQueryRoute

__all__ = ["DIRECT_CONTENT_TYPES", "DirectJsonRoute", "FastBody", "direct_plan", "fast_body"]

#: The ``Content-Type`` values whose requests may take the direct path, as clients send them:
#: JSON bare, or with UTF-8 named (.NET's ``JsonContent``, Spring and axios before 1.0 send
#: ``application/json; charset=utf-8`` in one of these spellings). FastAPI reads all of them as
#: UTF-8 JSON, so the answers are the same; any other spelling goes FastAPI's way.
DIRECT_CONTENT_TYPES = frozenset(
    {
        "application/json",
        "application/json; charset=utf-8",
        "application/json;charset=utf-8",
        "application/json; charset=UTF-8",
        "application/json;charset=UTF-8",
    }
)

RequestDependency = Callable[[Request], Awaitable[object]]
Endpoint = Callable[..., Awaitable[Response]]
_E = TypeVar("_E", bound=Endpoint)
#: Where an endpoint keeps its :class:`FastBody` (set by :func:`fast_body`).
_FAST_BODY = "__direct_fast_body__"


@dataclass(frozen=True, slots=True)
class FastBody:
    """A cheaper reading of a route's common bodies (see the module).

    Attributes:
        parse: the raw JSON bytes -> the body ``endpoint`` takes, or None (not its case).
        endpoint: the route's endpoint with the parsed value as its body argument.
    """

    parse: Callable[[bytes], object | None]
    endpoint: Endpoint


def fast_body(parse: Callable[[bytes], object | None], endpoint: Endpoint) -> Callable[[_E], _E]:
    """Decorate a route's endpoint (below the route decorator) with a :class:`FastBody`."""

    def mark(route_endpoint: _E) -> _E:
        setattr(route_endpoint, _FAST_BODY, FastBody(parse, endpoint))
        return route_endpoint

    return mark


@dataclass(frozen=True, slots=True)
class DirectPlan:
    """How to call one endpoint without FastAPI: where each argument comes from.

    Attributes:
        body_name: the endpoint's parameter that takes the body.
        model: the body's pydantic model.
        path_names: the endpoint's path parameters (plain strings).
        request_name: the endpoint's parameter that takes the request, if any.
        dependencies: (parameter, callable taking the request) per dependency, in order.
        endpoint: the route's endpoint.
        fast: the endpoint's cheaper reading of its common bodies, if it has one.
    """

    body_name: str
    model: type[BaseModel]
    path_names: tuple[str, ...]
    request_name: str | None
    dependencies: tuple[tuple[str, RequestDependency], ...]
    endpoint: Endpoint
    fast: FastBody | None = None

    async def arguments(self, request: Request) -> tuple[Endpoint, dict[str, object]] | None:
        """The endpoint to call for ``request`` and its arguments, or None when FastAPI must
        handle it.

        Raises:
            Exception: what a dependency raised (e.g. an ``AuthError``), as FastAPI would.
        """
        if request.headers.get("content-type") not in DIRECT_CONTENT_TYPES:
            return None
        raw = await request.body()
        endpoint = self.endpoint
        body = None if self.fast is None else self.fast.parse(raw)
        if body is not None:
            assert self.fast is not None
            endpoint = self.fast.endpoint
        else:
            try:
                body = self.model.model_validate_json(raw)
            except ValidationError:
                return None  # FastAPI's handler builds the answer it always gave
        params = request.path_params
        arguments: dict[str, object] = {name: params[name] for name in self.path_names}
        for name, call in self.dependencies:
            arguments[name] = await call(request)
        arguments[self.body_name] = body
        if self.request_name is not None:
            arguments[self.request_name] = request
        return endpoint, arguments


def _is_async(call: object) -> bool:
    """Whether calling ``call`` gives a coroutine (a function, or an instance's ``__call__``)."""
    method = getattr(call, "__call__", None)  # noqa: B004 - an instance with an async __call__
    return inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(method)


def _request_only(dependency: Dependant) -> bool:
    """Whether ``dependency`` is an async call taking nothing but the request."""
    others = (
        dependency.path_params,
        dependency.query_params,
        dependency.header_params,
        dependency.cookie_params,
        dependency.body_params,
        dependency.dependencies,
    )
    return (
        dependency.call is not None
        and dependency.name is not None
        and dependency.request_param_name is not None
        and not any(others)
        and _is_async(dependency.call)
    )


def direct_plan(dependant: Dependant) -> DirectPlan | None:
    """The direct call plan of a route's ``dependant`` (its endpoint's :class:`FastBody`
    included), or None when its shape does not allow one (see the module's description)."""
    if len(dependant.body_params) != 1 or dependant.query_params:
        return None
    if dependant.header_params or dependant.cookie_params or dependant.websocket_param_name:
        return None
    if dependant.background_tasks_param_name or dependant.response_param_name:
        return None
    body = dependant.body_params[0]
    model = body.field_info.annotation
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return None
    for field in dependant.path_params:
        if field.field_info.annotation is not str or field.field_info.metadata:
            return None
    if not all(_request_only(d) for d in dependant.dependencies):
        return None
    dependencies = tuple(
        (str(d.name), d.call) for d in dependant.dependencies if d.call is not None
    )
    assert dependant.call is not None  # a route's dependant is its endpoint's
    return DirectPlan(
        body_name=body.name,
        model=model,
        path_names=tuple(field.name for field in dependant.path_params),
        request_name=dependant.request_param_name,
        dependencies=dependencies,
        endpoint=dependant.call,
        fast=getattr(dependant.call, _FAST_BODY, None),
    )


class DirectJsonRoute(KnownQueryRoute):
    """A :class:`~tubemq_aio.gateway.http.known_query.KnownQueryRoute` that calls its endpoint
    directly for well-formed JSON requests without a query string.

    Declared with ``APIRouter(route_class=DirectJsonRoute)`` or ``add_api_route(...,
    route_class_override=DirectJsonRoute)``; the OpenAPI document is the one FastAPI derives
    from the endpoint's signature, as for any route. The endpoint must return a ``Response``
    (the direct path does no response-model serialisation).
    """

    def get_route_handler(self) -> Handler:
        """FastAPI's handler, preceded by the direct path when the route's shape allows it."""
        fallback: Handler = super().get_route_handler()
        plan = direct_plan(self.dependant)
        if plan is None:
            return fallback

        async def handle(request: Request) -> Response:
            if request.scope.get("query_string"):
                return await fallback(request)  # its check refuses what the route does not take
            call = await plan.arguments(request)
            if call is None:
                return await fallback(request)
            endpoint, arguments = call
            return await endpoint(**arguments)

        return handle
