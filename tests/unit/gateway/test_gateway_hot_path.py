"""What every request pays: no handler or dependency that FastAPI would run in a worker thread,
one middleware of the gateway's own, routes matched directly (not through an included router)."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterator

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from tests.support.gateway_fakes import CFG
from tubemq_aio.gateway.app import create_app
from tubemq_aio.gateway.http.edge import EdgeMiddleware


def _calls(dependant: Dependant) -> Iterator[object]:
    if dependant.call is not None:
        yield dependant.call
    for sub in dependant.dependencies:
        yield from _calls(sub)


def _is_async(call: object) -> bool:
    return inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(
        getattr(call, "__call__", None)  # noqa: B004 - an instance with an async __call__
    )


def test_no_handler_or_dependency_hops_to_a_worker_thread() -> None:
    app = create_app(dataclasses.replace(CFG, noop_route=True))
    routes = [r for r in app.routes if isinstance(r, APIRoute)]
    assert any(r.path == "/v1/noop" for r in routes)
    assert any(r.path == "/v1/topics/{topic}/messages" for r in routes)
    sync = sorted(
        f"{route.path}: {getattr(call, '__name__', call)}"
        for route in routes
        for call in _calls(route.dependant)
        if not _is_async(call)
    )
    assert sync == []


def test_one_middleware_of_our_own_when_cors_is_off() -> None:
    app = create_app(CFG)
    classes: list[object] = [m.cls for m in app.user_middleware]
    assert classes == [EdgeMiddleware]


def test_routes_are_matched_directly_not_through_an_included_router() -> None:
    app = create_app(CFG)
    kinds = {type(route).__name__ for route in app.router.routes}
    assert "_IncludedRouter" not in kinds
    assert "APIRoute" in kinds
