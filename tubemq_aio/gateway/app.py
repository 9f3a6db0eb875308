"""``create_app(config)``: the gateway as an ASGI app (FastAPI).

The app's lifespan owns the SDK producer and the consume engine: both start before the first
request and close (with every task they own) on shutdown. When mounting the app inside another
one, enter ``app.router.lifespan_context(app)`` from the outer app's lifespan (Starlette does not
run the lifespan of mounted apps).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tubemq_aio.errors import TubeMQError
from tubemq_aio.gateway.config import GatewayConfig
from tubemq_aio.gateway.cors import install_cors
from tubemq_aio.gateway.engine.port import ConsumeEngine
from tubemq_aio.gateway.engine.service import ConsumeService, ConsumeSettings, GroupSpec
from tubemq_aio.gateway.housekeeper.jobs import Housekeeper
from tubemq_aio.gateway.http.api_errors import ApiError, api_error_for
from tubemq_aio.gateway.http.auth import Authenticator
from tubemq_aio.gateway.http.deps import Gateway, json_response
from tubemq_aio.gateway.http.docs_pages import install_docs
from tubemq_aio.gateway.http.routes import admin, consume, ops, produce
from tubemq_aio.gateway.metrics import MetricsMiddleware
from tubemq_aio.producer import Producer

__all__ = ["EngineFactory", "create_app", "openapi_document"]

log = logging.getLogger("tubemq_aio.gateway")
EngineFactory = Callable[[GatewayConfig], ConsumeEngine]
_STATUS_CODES = {404: "not_found", 405: "method_not_allowed", 413: "too_large"}


def create_app(
    config: GatewayConfig,
    *,
    engine_factory: EngineFactory | None = None,
    producer_factory: Callable[[GatewayConfig], Producer] | None = None,
) -> FastAPI:
    """Build one gateway replica.

    Args:
        config: the validated configuration.
        engine_factory: builds the consume engine (default: the Redis/TubeMQ ``ConsumeService``).
        producer_factory: builds the SDK producer (default: one for ``produce_topics``).

    Returns:
        The ASGI app; its lifespan starts and closes the producer and the engine.
    """
    gateway = Gateway(
        config=config,
        replica=f"{socket.gethostname()}:{os.getpid()}",
        auth=Authenticator(config.keys, config.allow_anonymous, config.anonymous_grant()),
    )
    if config.allow_anonymous:
        log.warning(
            "allow_anonymous: requests without an API key are served with scopes %s",
            list(config.anonymous_grant()) or "(none)",
        )
    make_engine = engine_factory or default_engine
    make_producer = producer_factory or default_producer

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            if config.produce_topics:
                producer = make_producer(config)
                await producer.start()
                stack.push_async_callback(producer.close)
                gateway.producer = producer
            if config.groups:
                engine = make_engine(config)
                await engine.start()
                stack.push_async_callback(engine.close)
                gateway.engine = engine
                gateway.metrics.watch_engine(engine.stats)
                if isinstance(engine, ConsumeService):  # stand-ins in tests have no store
                    keeper = Housekeeper(engine, config.housekeeper, replica=gateway.replica)
                    await keeper.start()
                    stack.callback(gateway.metrics.watch_housekeeper, None)
                    stack.push_async_callback(keeper.close)
                    gateway.metrics.watch_housekeeper(keeper.collect)
            try:
                yield
            finally:
                gateway.producer = None
                gateway.engine = None

    title = "TubeMQ HTTP gateway"
    app = FastAPI(
        title=title,
        version="1",
        description="Stateless HTTP produce/consume for TubeMQ; consume state lives in Redis.",
        lifespan=lifespan,
        docs_url=None,  # FastAPI's pages load their scripts from a CDN; ours are served here
        redoc_url=None,
    )
    app.state.gateway = gateway
    for router in (produce.router, consume.router, admin.router, ops.router):
        app.include_router(router)
    if config.noop_route:
        app.add_api_route("/v1/noop", produce.noop, methods=["POST"], include_in_schema=False)
    if config.docs:
        install_docs(app, title)
    _install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware, max_bytes=config.max_body_bytes)
    app.add_middleware(MetricsMiddleware, metrics=gateway.metrics)
    install_cors(app, config.cors)  # outermost: error answers carry the CORS headers too
    return app


def default_producer(config: GatewayConfig) -> Producer:
    """The SDK producer for ``config.produce_topics``."""
    return Producer(
        config.masters,
        topics=config.produce_topics,
        send_timeout=config.produce_timeout,
        rpc_timeout=config.rpc_timeout,
        **config.tubemq.client_options(),
    )


def default_engine(config: GatewayConfig) -> ConsumeEngine:
    """The Redis/TubeMQ ``ConsumeService`` for ``config.groups``."""
    groups = tuple(
        GroupSpec(
            name=g.name,
            topics=g.topics,
            mode=g.mode,
            start=g.start,
            lease_ms=g.lease_ms,
            lease_ms_min=g.lease_ms_min,
            lease_ms_max=g.lease_ms_max,
            max_clients=g.max_clients,
            max_clients_per_key=g.max_clients_per_key,
        )
        for g in config.groups
    )
    settings = ConsumeSettings(
        masters=config.masters,
        redis_url=config.redis,
        deployment=config.deployment,
        groups=groups,
        rpc_timeout=config.rpc_timeout,
        max_long_poll_waiters=config.max_long_poll_waiters,
        redis_max_connections=config.redis_max_connections,
        redis_ack_replicas=config.redis_ack_replicas,
        redis_ack_wait_ms=config.redis_ack_wait_ms,
        not_found_wait_ms=config.not_found_wait_ms,
        sync_interval=config.sync_interval,
        credentials=config.tubemq.credentials,
        ssl_context=config.tubemq.ssl_context(),
        tls_server_hostname=config.tubemq.tls_server_hostname,
    )
    return ConsumeService(settings)


def _install_error_handlers(app: FastAPI) -> None:
    async def api_error(_request: Request, exc: Exception) -> Response:
        mapped = api_error_for(exc)
        if mapped is None:  # an unexpected library error: a bug of ours, say so
            log.exception("unexpected error", exc_info=exc)
            mapped = ApiError(500, "internal", "internal error", True)
        return json_response(mapped.body(), mapped.status, mapped.headers or None)

    async def invalid(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        text = f"{where}: {first.get('msg', 'invalid request')}" if where else "invalid request"
        return json_response(ApiError(422, "invalid", text).body(), 422)

    async def http_error(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 400 and isinstance(exc.__cause__, ValueError):
            # FastAPI's answer to a body json.loads refuses with something other than a
            # JSONDecodeError, e.g. a number over Python's 4300-digit limit: a client mistake
            # like any other unparseable body, so the same 422
            reason = str(exc.__cause__).split(";")[0][:200]
            return json_response(ApiError(422, "invalid", f"body: {reason}").body(), 422)
        code = _STATUS_CODES.get(exc.status_code, "http_error")
        body = ApiError(exc.status_code, code, str(exc.detail)).body()
        return json_response(body, exc.status_code, dict(exc.headers or {}) or None)

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(TubeMQError, api_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(StarletteHTTPException, http_error)


class BodyLimitMiddleware:
    """Refuses request bodies over ``max_bytes`` with 413, by header or while streaming."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry point."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length" and (not value.isdigit() or int(value) > self.max_bytes):
                await self._refuse(send)
                return
        # A body without Content-Length (chunked) is read here first, at most max_bytes of it:
        # FastAPI would read it all anyway, and refusing mid-parse would turn into a 400.
        chunks: list[Message] = []
        seen = 0
        while True:
            message = await receive()
            chunks.append(message)
            if message["type"] != "http.request":
                break
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                await self._refuse(send)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return chunks.pop(0) if chunks else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        error = ApiError(413, "too_large", f"request body over {self.max_bytes} bytes")
        response = json_response(error.body(), 413)
        await response({"type": "http"}, _no_receive, send)


async def _no_receive() -> Message:
    return {"type": "http.disconnect"}


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of the gateway (independent of any configuration)."""
    placeholder = GatewayConfig(
        masters="127.0.0.1:8715",
        redis="redis://127.0.0.1:6379/0",
        secret="x" * 32,
        allow_anonymous=True,
    )
    return create_app(placeholder).openapi()
