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
import secrets
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from tubemq_aio.config import parse_masters
from tubemq_aio.errors import ClientClosedError, TubeMQError
from tubemq_aio.gateway.config.cors import install_cors
from tubemq_aio.gateway.config.gateway_config import GatewayConfig
from tubemq_aio.gateway.engine.data import ConsumeSettings
from tubemq_aio.gateway.engine.dead_letters import DeadLetters
from tubemq_aio.gateway.engine.port import ConsumeEngine
from tubemq_aio.gateway.engine.service import ConsumeService
from tubemq_aio.gateway.engine.streams import StreamHub
from tubemq_aio.gateway.engine.tokens import LeaseTokens
from tubemq_aio.gateway.housekeeper.jobs import Housekeeper
from tubemq_aio.gateway.http.api_errors import ApiError
from tubemq_aio.gateway.http.auth import Authenticator
from tubemq_aio.gateway.http.deps import Gateway, json_response
from tubemq_aio.gateway.http.direct_route import DirectJsonRoute
from tubemq_aio.gateway.http.docs_pages import install_docs
from tubemq_aio.gateway.http.edge import EdgeMiddleware
from tubemq_aio.gateway.http.routes import admin, consume, listing, ops, produce, stream, ui
from tubemq_aio.gateway.tubemq.master_reach import MasterReach
from tubemq_aio.gateway.tubemq.topic_offsets import TopicOffsets, cluster_topic_offsets
from tubemq_aio.gateway.tubemq.web_port import web_port_hint
from tubemq_aio.producer import Producer

__all__ = [
    "EngineFactory",
    "EngineParts",
    "create_app",
    "default_engine",
    "default_engine_parts",
    "new_replica_id",
    "openapi_document",
]

log = logging.getLogger("tubemq_aio.gateway")
EngineFactory = Callable[[GatewayConfig], ConsumeEngine]


def create_app(
    config: GatewayConfig,
    *,
    engine_factory: EngineFactory | None = None,
    producer_factory: Callable[[GatewayConfig], Producer] | None = None,
    topic_offsets: TopicOffsets | None = None,
) -> FastAPI:
    """Build one gateway replica.

    Args:
        config: the validated configuration.
        engine_factory: builds the consume engine (default: the Redis/TubeMQ ``ConsumeService``).
        producer_factory: builds the SDK producer (default: one for ``produce_topics``).
        topic_offsets: reads a topic's partitions for ``GET /v1/topics/{topic}`` (default: from
            the cluster, :func:`~tubemq_aio.gateway.tubemq.topic_offsets.cluster_topic_offsets`).

    Returns:
        The ASGI app; its lifespan starts and closes the producer and the engine.
    """
    gateway = Gateway(
        config=config,
        replica=new_replica_id(),
        streams=StreamHub(config.stream),
        tokens=LeaseTokens(config.secret.encode(), config.token_cache_size),
        auth=Authenticator(
            config.keys,
            config.allow_anonymous,
            config.anonymous_grant(),
            cache_size=config.auth_cache_size,
        ),
        reach=MasterReach(
            parse_masters(config.masters), connect_timeout=config.master_probe_timeout
        ),
    )
    # Answers (a lease holder in lag) name the replica only by its opaque id; which host and
    # process it is, an operator reads here.
    log.info("gateway replica %s is %s:%d", gateway.replica, socket.gethostname(), os.getpid())
    if config.allow_anonymous:
        log.warning(
            "allow_anonymous: requests without an API key are served with scopes %s",
            list(config.anonymous_grant()) or "(none)",
        )
    make_producer = producer_factory or default_producer

    def make_engine() -> EngineParts:
        if engine_factory is not None:  # a stand-in engine: no Redis, so no housekeeper
            return EngineParts(engine_factory(config))
        dead_letters = DeadLetters(
            gateway.producer,
            {g.spec.name: g for g in config.groups},
            config.produce_timeout,
            lambda group, count: gateway.metrics.dead_lettered.labels(group).inc(count),
        )
        return default_engine_parts(config, gateway.replica, dead_letters)

    async def start(stack: contextlib.AsyncExitStack) -> None:
        gateway.topic_offsets = topic_offsets or cluster_topic_offsets(config)
        stack.callback(setattr, gateway, "topic_offsets", None)
        if gateway.reach is not None:
            stack.push_async_callback(gateway.reach.close)
        if config.produce_topics:
            producer = make_producer(config)
            await producer.start()
            stack.push_async_callback(producer.close)
            gateway.producer = producer
        if config.groups:
            parts = make_engine()
            await parts.start()
            stack.push_async_callback(parts.close)
            gateway.engine = parts.engine
            gateway.metrics.watch_engine(parts.engine.stats)
            if parts.housekeeper is not None:
                stack.callback(gateway.metrics.watch_housekeeper, None)
                gateway.metrics.watch_housekeeper(parts.housekeeper.collect)
            # closed before the engine: each stream releases its leases through it
            stack.push_async_callback(gateway.streams.close)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            try:
                await start(stack)
            except Exception as exc:
                gateway.start_error = exc
                hint = web_port_hint(exc)
                if hint is not None:  # uvicorn logs the traceback; this says what to fix
                    log.error("the gateway did not start: %s", hint)
                raise
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
    routers = (produce.router, consume.router, stream.router, admin.router, listing.router)
    for router in (*routers, ops.router):
        # the routes themselves, not the router: FastAPI resolves an included router's routes
        # on every request (a version walk and a second match); these carry their router's
        # tags and responses already and need no prefix
        app.router.routes.extend(router.routes)
    if config.noop_route:
        app.router.add_api_route(
            "/v1/noop",
            produce.noop,
            methods=["POST"],
            include_in_schema=False,
            route_class_override=DirectJsonRoute,
        )
    if config.ui:
        app.router.routes.extend(ui.router.routes)
    if config.docs:
        install_docs(app, title)
    _install_error_handlers(app, gateway)
    app.add_middleware(
        EdgeMiddleware,
        gateway=gateway,
        max_bytes=config.max_body_bytes,
        body_timeout=config.body_timeout,
    )
    install_cors(app, config.cors)  # outermost: error answers carry the CORS headers too
    return app


def new_replica_id() -> str:
    """A short random id for one replica (an app), opaque to clients: ``r-`` + 8 hex digits."""
    return f"r-{secrets.token_hex(4)}"


def default_producer(config: GatewayConfig) -> Producer:
    """The SDK producer for ``config.produce_topics``."""
    return Producer(
        config.masters,
        topics=config.produce_topics,
        send_timeout=config.produce_timeout,
        rpc_timeout=config.rpc_timeout,
        **config.tubemq.client_options(),
    )


class EngineParts:
    """A replica's consume engine and the housekeeper that works on its store and sessions,
    started and closed as one: the engine first (the housekeeper uses its store), the
    housekeeper first on close. :meth:`start` is idempotent, :meth:`close` too, and a closed
    one does not start again.

    Args:
        engine: the consume engine.
        housekeeper: its elected background jobs (None: a stand-in engine without a store).
    """

    __slots__ = ("_closed", "_started", "engine", "housekeeper")

    def __init__(self, engine: ConsumeEngine, housekeeper: Housekeeper | None = None) -> None:
        self.engine = engine
        self.housekeeper = housekeeper
        self._started = False
        self._closed = False

    async def start(self) -> None:
        """Start the engine, then the housekeeper (a failed start closes what started).

        Raises:
            ClientClosedError: :meth:`close` was called.
            TubeMQError: the engine did not start (Redis unreachable, state lost).
        """
        if self._closed:
            raise ClientClosedError("the consume engine is closed")
        if self._started:
            return
        await self.engine.start()
        try:
            if self.housekeeper is not None:
                await self.housekeeper.start()
        except BaseException:
            await self.engine.close()
            raise
        self._started = True

    async def close(self) -> None:
        """Close the housekeeper, then the engine (idempotent; each ends every task it owns)."""
        if self._closed:
            return
        self._closed = True
        if self.housekeeper is not None:
            await self.housekeeper.close()
        await self.engine.close()


def default_engine_parts(
    config: GatewayConfig, replica: str, dead_letters: DeadLetters | None = None
) -> EngineParts:
    """The Redis/TubeMQ engine for ``config.groups`` (poison batches to ``dead_letters``) with
    its housekeeper, which is handed the engine's lease store and TubeMQ sessions."""
    service = default_engine(config, dead_letters)
    keeper = Housekeeper(
        service.store,
        service.sessions,
        service.settings.groups,
        config.housekeeper,
        replica=replica,
        rpc_timeout=config.rpc_timeout,
    )
    return EngineParts(service, keeper)


def default_engine(
    config: GatewayConfig, dead_letters: DeadLetters | None = None
) -> ConsumeService:
    """The Redis/TubeMQ ``ConsumeService`` for ``config.groups``; poison batches go to
    ``dead_letters`` (default: nowhere)."""
    settings = ConsumeSettings.of(config, tuple(g.spec for g in config.groups))
    return ConsumeService(settings, dead_letters=dead_letters)


def _install_error_handlers(app: FastAPI, gateway: Gateway) -> None:
    async def answer(_request: Request, exc: Exception) -> Response:
        error = gateway.answer(exc)
        return json_response(error.body(), error.status, error.headers or None)

    for kind in (ApiError, TubeMQError, RequestValidationError, StarletteHTTPException):
        app.add_exception_handler(kind, answer)
    # Any other exception is a bug: answered as JSON (500 internal, logged and counted) like
    # every other error, not with Starlette's plain-text page. Starlette still re-raises it
    # after the answer went out, so the server logs it too.
    app.add_exception_handler(Exception, answer)


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of the gateway (independent of any configuration)."""
    placeholder = GatewayConfig(
        masters="127.0.0.1:8715",
        redis="redis://127.0.0.1:6379/0",
        secret="x" * 32,
        allow_anonymous=True,
    )
    return create_app(placeholder).openapi()
