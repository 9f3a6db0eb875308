"""``GET /v1/groups/{group}/stream``: consume as Server-Sent Events.

Each ``batch`` event is what a fetch answers (``lease`` with its token, ``messages``); the client
acks it through ``POST /v1/leases/{token}/ack`` like a fetched batch. At most ``window`` batches
are unacked at once; the stream waits for acks (or for leases to run out) before it fetches more.
When the client disconnects, the stream ends and its unacked leases are released for
redelivery at once. Events: ``batch``, ``failure`` (an error body; the stream goes on after a
retriable one) and ``end`` (``reason``: ``max_seconds``, ``shutdown``, ``lease_expired``: a
delivered batch ran out of its lease unacked, ``error``); comment lines keep an idle
stream alive.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

import orjson
from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response
from starlette.types import Receive, Scope, Send

from tubemq_aio.gateway.config.stream_config import MAX_STREAM_WINDOW
from tubemq_aio.gateway.config.tables import ApiKey
from tubemq_aio.gateway.engine.arguments import MAX_MESSAGES_LIMIT, checked_lease_ms, scope_of
from tubemq_aio.gateway.engine.data import FetchOutcome, FetchQuery
from tubemq_aio.gateway.engine.streams import BatchStream, StreamEvent
from tubemq_aio.gateway.errors import InvalidRequestError, TooManyWaitersError
from tubemq_aio.gateway.http.api_errors import api_error_for
from tubemq_aio.gateway.http.deps import ConsumeGroup, Gateway, GatewayDep, messages_fragment
from tubemq_aio.gateway.http.disconnect import client_disconnected
from tubemq_aio.gateway.http.known_query import KnownQueryRoute
from tubemq_aio.gateway.http.routes.admin import ClientIdQuery
from tubemq_aio.gateway.http.routes.consume import lease_json
from tubemq_aio.gateway.http.schemas import error_responses

__all__ = ["EventStreamResponse", "StreamQuery", "router", "stream_query"]

router = APIRouter(tags=["consume"], route_class=KnownQueryRoute)
_STREAM_ERRORS = (400, 401, 403, 404, 422, 503)
_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
#: A write the client has not taken after this many heartbeats ends the stream.
_STALLED_HEARTBEATS = 4
log = logging.getLogger("tubemq_aio.gateway")


def _sse(event: str, data: object) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def retriable(exc: Exception) -> bool | None:
    """Whether a stream goes on after ``exc``: as retriable as the answer a fetch would get
    (None: not an expected failure, a bug, which ends the stream)."""
    answer = api_error_for(exc)
    return None if answer is None else answer.retriable


class EventStreamResponse(Response):
    """Runs one :class:`BatchStream` and writes its events as ``text/event-stream`` until the
    stream ends or the client leaves (told by ASGI ``receive``, at once, without a write);
    either way the stream's task is cancelled and releases its unacked leases.

    Args:
        gateway: the replica.
        stream: the stream to run (not started yet).
        principal: the API key (its long-poll share is held while the stream runs).
        base64: send every value base64-encoded.
        status_code: of the answer (200).
    """

    media_type = "text/event-stream"

    def __init__(
        self,
        gateway: Gateway,
        stream: BatchStream,
        principal: ApiKey,
        base64: bool,
        status_code: int = 200,  # read by FastAPI for the OpenAPI document
    ) -> None:
        self.status_code = status_code
        self.background = None
        # no Content-Length: the body is written as it comes (chunked)
        self.raw_headers = [(b"content-type", b"text/event-stream; charset=utf-8")] + [
            (k.lower().encode(), v.encode()) for k, v in _HEADERS.items()
        ]
        self.gateway, self.stream, self.principal, self.base64 = gateway, stream, principal, base64

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry point."""
        gateway = self.gateway
        with contextlib.ExitStack() as held:
            try:
                held.enter_context(gateway.long_poll_slot(self.principal.name, 1))
                task = gateway.streams.open(self.stream, retriable)
            except TooManyWaitersError as exc:
                error = gateway.answer(exc)
                await Response(
                    orjson.dumps(error.body()), error.status, media_type="application/json"
                )(scope, receive, send)
                return
            try:
                await send(
                    {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
                )
                await self._write(receive, send, task)
            except OSError:
                pass  # the client left while we wrote (uvicorn's ClientDisconnected)
            except TimeoutError:
                # the response stays unfinished: the server closes the connection
                log.info(
                    "a stream of group %r ended: its client took nothing for %d heartbeats",
                    self.stream.group,
                    _STALLED_HEARTBEATS,
                )
            finally:
                gateway.streams.stop(task)  # it releases its unacked leases (owned by the hub)

    async def _write(self, receive: Receive, send: Send, task: asyncio.Task[None]) -> None:
        heartbeat = self.gateway.config.stream.heartbeat_seconds

        async def body(chunk: bytes, more: bool = True) -> None:
            # a client that takes no bytes for this long (its socket buffers full) is gone
            async with asyncio.timeout(_STALLED_HEARTBEATS * heartbeat):
                await send({"type": "http.response.body", "body": chunk, "more_body": more})

        watch = asyncio.ensure_future(client_disconnected(receive))
        get: asyncio.Future[StreamEvent] | None = None
        try:
            await body(b"retry: 1000\n: stream open\n\n")
            while True:
                get = get or asyncio.ensure_future(self.stream.events.get())
                waiting: set[asyncio.Future[Any]] = {get, watch, task}
                done, _ = await asyncio.wait(
                    waiting, timeout=heartbeat, return_when=asyncio.FIRST_COMPLETED
                )
                if watch in done and watch.result():
                    return  # the client left: nothing more is written
                if get in done:
                    event, get = get.result(), None
                    await body(self._encode(event))
                    if event.kind == "end":
                        break
                elif task in done:  # stopped by a shutdown, else a bug (logged by the hub)
                    reason = "shutdown" if self.gateway.streams.closed else "error"
                    await body(_sse("end", {"reason": reason}))
                    break
                elif not done:
                    await body(b": keepalive\n\n")
            await body(b"", more=False)
        finally:
            watch.cancel()
            if get is not None:
                get.cancel()

    def _encode(self, event: StreamEvent) -> bytes:
        if event.kind == "batch":
            outcome = event.outcome
            assert outcome is not None
            assert outcome.lease is not None
            self.gateway.metrics.messages_delivered.labels(self.stream.group).inc(
                len(outcome.messages)
            )
            return _sse(
                "batch",
                {
                    "lease": lease_json(outcome.lease, self.gateway.tokens),
                    "messages": messages_fragment(outcome.messages, self.base64),
                },
            )
        if event.kind == "error":
            assert event.error is not None
            return _sse("failure", self.gateway.answer(event.error).body())
        return _sse("end", {"reason": event.reason})


@dataclass(frozen=True, slots=True)
class StreamQuery:
    """The query parameters of ``GET /v1/groups/{group}/stream``, as :func:`stream_query`
    gathers them (each one query parameter of the OpenAPI document, validated by FastAPI, 422
    otherwise).

    Attributes:
        client_id: the member of a broadcast group (its own offsets); None for a shared group.
        window: unacked batches at most, 1..``MAX_STREAM_WINDOW``; None: ``stream.window``
            (a value over ``stream.max_window`` is refused with 400 by the route).
        lease_ms: each fetch's lease in milliseconds (>= 1); None: the group's default.
        max_messages: messages per batch at most, 1..``MAX_MESSAGES_LIMIT``; None: the
            group's default.
        value_encoding: ``base64`` sends every value base64-encoded; ``auto`` (default) sends
            text values as text.
    """

    client_id: str | None = None
    window: int | None = None
    lease_ms: int | None = None
    max_messages: int | None = None
    value_encoding: Literal["auto", "base64"] = "auto"


async def stream_query(
    client_id: ClientIdQuery = None,
    window: Annotated[int | None, Query(ge=1, le=MAX_STREAM_WINDOW)] = None,
    lease_ms: Annotated[int | None, Query(ge=1)] = None,
    max_messages: Annotated[int | None, Query(ge=1, le=MAX_MESSAGES_LIMIT)] = None,
    value_encoding: Literal["auto", "base64"] = "auto",
) -> StreamQuery:
    """The stream route's query parameters as one :class:`StreamQuery` (a FastAPI dependency;
    a coroutine, so that FastAPI calls it on the event loop rather than in a worker thread, as
    it would a class). A parameter the stream does not take is refused by its route
    (:class:`~tubemq_aio.gateway.http.known_query.KnownQueryRoute`)."""
    return StreamQuery(client_id, window, lease_ms, max_messages, value_encoding)


@router.get(
    "/v1/groups/{group}/stream",
    operation_id="stream",
    response_class=EventStreamResponse,
    responses={
        **error_responses(_STREAM_ERRORS),
        200: {"content": {"text/event-stream": {}}, "description": "Server-Sent Events"},
    },
)
async def stream(
    group: str,
    gateway: GatewayDep,
    access: ConsumeGroup,
    query: Annotated[StreamQuery, Depends(stream_query)],
) -> Response:
    """Consume ``group`` as Server-Sent Events (``text/event-stream``).

    Each ``batch`` event carries ``lease`` (``token`` for the ack route) and ``messages``, as a
    fetch answers them. ``window`` (default ``stream.window``) bounds the unacked batches;
    ``lease_ms`` and ``max_messages`` are those of each fetch. A disconnect releases the unacked
    leases for redelivery. 503 when the replica serves ``stream.max_streams`` streams or the
    key holds its share of long polls.
    """
    principal, config = access.principal, access.group
    engine = gateway.require_engine()
    settings = gateway.config.stream
    client_id, max_messages = query.client_id, query.max_messages
    window = settings.window if query.window is None else query.window
    if window > settings.max_window:
        raise InvalidRequestError(f"window must be at most {settings.max_window}")
    scope_of(config, client_id)  # refused here (400), not in the stream's first fetch
    lease = checked_lease_ms(config, query.lease_ms)
    if gateway.streams.running >= settings.max_streams:
        raise TooManyWaitersError("this replica serves as many streams as it may")
    holder = f"{gateway.replica}/stream-{gateway.streams.next_id()}"

    fetch_query = FetchQuery(
        group,
        client_id,
        lease_ms=lease,
        max_messages=max_messages,
        holder=holder,
        owner=principal.name,
    )

    async def fetch(wait_ms: int) -> FetchOutcome:
        return await engine.fetch(replace(fetch_query, wait_ms=wait_ms))

    batches = BatchStream(engine, fetch, group, client_id, holder, window, lease, settings)
    return EventStreamResponse(gateway, batches, principal, query.value_encoding == "base64")
