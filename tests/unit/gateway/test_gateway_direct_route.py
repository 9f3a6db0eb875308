"""DirectJsonRoute answers exactly as FastAPI's APIRoute does, and takes the direct path only
for the requests and route shapes it can serve itself."""

from __future__ import annotations

import dataclasses
from typing import Annotated

import pytest
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Path, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from pydantic import BaseModel, ConfigDict, Field

from tests.support.gateway_fakes import CFG
from tubemq_aio.gateway.app import create_app
from tubemq_aio.gateway.http.direct_route import DIRECT_CONTENT_TYPES, DirectJsonRoute, direct_plan


class Body(BaseModel):
    """A strict body like the gateway's."""

    model_config = ConfigDict(extra="forbid", strict=True)
    value: str = Field(min_length=1)
    count: int = 1


async def _caller(request: Request) -> str:
    header = request.headers.get("authorization")
    if header != "Bearer ok":
        raise HTTPException(401, "no key")
    return "alice"


Caller = Annotated[str, Depends(_caller)]


def _app(route_class: type[APIRoute]) -> FastAPI:
    router = APIRouter(route_class=route_class)

    @router.post("/things/{name}")
    async def thing(name: str, body: Body, caller: Caller, request: Request) -> Response:
        assert request.method == "POST"
        answer = {"name": name, "length": len(body.value), "count": body.count, "by": caller}
        return JSONResponse(answer)

    @router.post("/short/{name}")
    async def short(name: Annotated[str, Path(max_length=3)], body: Body) -> Response:
        return JSONResponse({"name": name, "length": len(body.value)})

    app = FastAPI()
    app.router.routes.extend(router.routes)
    app.add_exception_handler(RequestValidationError, _invalid)
    return app


async def _invalid(_request: Request, exc: Exception) -> Response:
    # the loc and text of every error, as the gateway reports the first (the default handler
    # echoes the input, which a lone surrogate cannot be encoded from)
    assert isinstance(exc, RequestValidationError)
    errors = [[list(e["loc"]), e["msg"]] for e in exc.errors()]
    return JSONResponse({"errors": errors}, status_code=422)


CASES = [
    ("application/json", b'{"value": "x", "count": 2}', "Bearer ok"),
    ("application/json", b'{"value": "x"}', None),
    ("application/json", b'{"value": ""}', "Bearer ok"),
    ("application/json", b'{"value": ""}', None),
    ("application/json", b'{"value": "x", "other": 1}', "Bearer ok"),
    ("application/json", b'{"value": "x", "count": "2"}', "Bearer ok"),
    ("application/json", b"{not json", "Bearer ok"),
    ("application/json", b"{not json", None),
    ("application/json", b"", "Bearer ok"),
    ("application/json", b'{"value": "a\\ud800b"}', "Bearer ok"),
    ("application/json", b"[1, 2]", "Bearer ok"),
    ("application/json; charset=utf-8", b'{"value": "x"}', "Bearer ok"),
    ("text/plain", b'{"value": "x"}', "Bearer ok"),
    ("", b'{"value": "x"}', "Bearer ok"),
]


@pytest.mark.parametrize(("content_type", "body", "auth"), CASES)
@pytest.mark.parametrize("path", ["/things/n1", "/short/abc", "/short/toolong"])
def test_answers_are_those_of_fastapi(
    content_type: str, body: bytes, auth: str | None, path: str
) -> None:
    headers = {"content-type": content_type}
    if auth is not None:
        headers["authorization"] = auth
    answers = []
    for route_class in (APIRoute, DirectJsonRoute):
        with TestClient(_app(route_class)) as client:
            r = client.post(path, content=body, headers=headers)
            answers.append((r.status_code, r.json()))
    assert answers[0] == answers[1]


def test_a_well_formed_json_request_takes_the_direct_path() -> None:
    app = _app(DirectJsonRoute)
    route = next(r for r in app.routes if getattr(r, "path", "") == "/things/{name}")
    assert isinstance(route, DirectJsonRoute)
    plan = direct_plan(route.dependant)
    assert plan is not None
    assert plan.path_names == ("name",)
    assert plan.request_name == "request"
    assert [name for name, _ in plan.dependencies] == ["caller"]


def test_routes_of_another_shape_keep_fastapis_handler() -> None:
    app = _app(DirectJsonRoute)
    short = next(r for r in app.routes if getattr(r, "path", "") == "/short/{name}")
    assert isinstance(short, APIRoute)
    assert direct_plan(short.dependant) is None  # a constrained path parameter


def test_the_gateways_hot_routes_take_the_direct_path() -> None:
    app = create_app(dataclasses.replace(CFG, noop_route=True))
    direct = sorted(
        route.path
        for route in app.routes
        if isinstance(route, DirectJsonRoute) and direct_plan(route.dependant) is not None
    )
    assert direct == [
        "/v1/groups/{group}/fetch",
        "/v1/noop",
        "/v1/topics/{topic}/messages",
        "/v1/topics/{topic}/messages/batch",
    ]


async def _direct_arguments(content_type: str) -> tuple[object, dict[str, object]] | None:
    """What the direct path makes of a well-formed request with ``content_type`` (None: it
    leaves the request to FastAPI)."""
    route = next(
        r for r in _app(DirectJsonRoute).routes if getattr(r, "path", "") == "/things/{name}"
    )
    assert isinstance(route, DirectJsonRoute)
    plan = direct_plan(route.dependant)
    assert plan is not None
    headers = [(b"content-type", content_type.encode()), (b"authorization", b"Bearer ok")]
    scope: dict[str, object] = {"type": "http", "method": "POST", "path": "/things/n1"}
    scope["headers"] = headers
    scope["path_params"] = {"name": "n1"}

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b'{"value": "x"}', "more_body": False}

    return await plan.arguments(Request(scope, receive))


@pytest.mark.parametrize("content_type", sorted(DIRECT_CONTENT_TYPES))
async def test_json_named_as_clients_name_it_takes_the_direct_path(content_type: str) -> None:
    # before: only the bare "application/json"; .NET's JsonContent (and Spring, and axios
    # before 1.0) name the charset, and their requests all went through FastAPI's handler
    taken = await _direct_arguments(content_type)
    assert taken is not None
    _endpoint, arguments = taken
    assert arguments["body"] == Body(value="x")
    assert arguments["name"] == "n1"


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/json; charset=latin-1", "application/x+json"]
)
async def test_other_content_types_are_left_to_fastapi(content_type: str) -> None:
    assert await _direct_arguments(content_type) is None
