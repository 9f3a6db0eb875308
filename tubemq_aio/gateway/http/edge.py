"""The gateway's one ASGI layer around FastAPI: the request body limit and deadline, the JSON
media type and the request metrics.

Both used to be separate middlewares, each wrapping every request and every ``send``; one layer
does the same work with one wrapper. A body over the limit is refused with 413 from its
``Content-Length`` or, without one (chunked), after reading at most the limit. Every request is
counted by route template, method and status, and its latency observed by route template.
A request with a body whose ``Content-Type`` is not JSON (``application/json`` or
``application/<something>+json``; curl's ``-d`` alone sends a form type) is refused with 415
``unsupported_media_type`` saying to send JSON, instead of a 422 about the body's shape; so is
a JSON body declaring a ``charset`` other than UTF-8 (JSON on the wire is UTF-8, RFC 8259,
section 8.1: a Latin-1 body read as UTF-8 would be refused or, worse, stored with other
characters).
A body not complete within ``body_timeout`` seconds of the request's start is answered 408
``request_timeout`` with ``Connection: close`` (see :mod:`.body_deadline`), and the request ends.
"""

from __future__ import annotations

import time

from prometheus_client.metrics import Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tubemq_aio.gateway.errors import (
    BodyTimeoutError,
    RequestTooLargeError,
    UnsupportedMediaTypeError,
)
from tubemq_aio.gateway.http.body_deadline import BodyDeadline, BodyDeadlinePassed
from tubemq_aio.gateway.http.deps import Gateway, json_response

__all__ = ["EdgeMiddleware"]

#: Request methods counted under their own label; any other is counted as ``other``.
_KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_JSON_REFUSAL = "send the request body as JSON, with the header Content-Type: application/json"
_UTF8_REFUSAL = (
    "send the request body as JSON in UTF-8 (RFC 8259 section 8.1), with the header "
    "Content-Type: application/json and no charset, or charset=utf-8"
)
#: The ``charset`` values taken for a JSON body (lower case): UTF-8's name and its common alias.
_UTF8_NAMES = frozenset({b"utf-8", b"utf8"})
#: A late body's answer ends the connection: the rest of the body may still come, and nothing
#: else can be read on it before that (the server then closes it).
_CLOSE = {"connection": "close"}


def _media_refusal(scope: Scope) -> str | None:
    """Why the request's body is refused (415), or None: it has none, or it is JSON in UTF-8
    (the ``charset`` parameter, if any, names UTF-8, in any case, quoted or not)."""
    length = b""
    media = b""
    chunked = False
    for name, value in scope["headers"]:
        if name == b"content-length":
            length = value
        elif name == b"content-type":
            media = value
        elif name == b"transfer-encoding":
            chunked = True
    if not chunked and length.strip(b" 0") == b"":
        return None  # no body (or an empty one): nothing to misread
    kind, _, parameters = media.partition(b";")
    kind = kind.strip().lower()
    if kind != b"application/json" and not (
        kind.startswith(b"application/") and kind.endswith(b"+json")
    ):
        return _JSON_REFUSAL
    for parameter in parameters.split(b";") if parameters else ():
        key, _, value = parameter.partition(b"=")
        if key.strip().lower() == b"charset":
            charset = value.strip().strip(b'"').strip().lower()
            if charset not in _UTF8_NAMES:
                declared = charset.decode("latin-1")
                return f"the body declares charset {declared!r}: {_UTF8_REFUSAL}"
    return None


class EdgeMiddleware:
    """Refuses request bodies over ``max_bytes`` (413) or late (408) and records the request
    metrics.

    Args:
        app: the wrapped app.
        gateway: the replica: its metrics (``http_requests`` and ``http_request_seconds``) and its
            error answers (a refusal is logged and counted like any other).
        max_bytes: the largest request body accepted.
        body_timeout: seconds from a request's start within which its body must be complete
            (> 0; default 30, the config's).
    """

    def __init__(
        self, app: ASGIApp, gateway: Gateway, max_bytes: int, body_timeout: float = 30.0
    ) -> None:
        self.app = app
        self.gateway = gateway
        self.metrics = gateway.metrics
        self.max_bytes = max_bytes
        self.body_timeout = body_timeout
        # labelled children by (route, method, status): prometheus-client's labels() takes a
        # lock and builds a key each call; the label values are bounded (templates, methods,
        # statuses), so is this
        self._children: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry point."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0  # no response started yet; 500 if none is by the end

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            refusal = _media_refusal(scope)
            if refusal is not None:
                status = 415
                await self._refuse(send, UnsupportedMediaTypeError(refusal))
                return
            replay = await self._within_limit(scope, receive, started)
            if replay is None:
                status = 413
                await self._refuse(
                    send, RequestTooLargeError(f"request body over {self.max_bytes} bytes")
                )
            else:
                await self.app(scope, replay, send_wrapper)
        except* BodyDeadlinePassed:  # also out of a task group, in an exception group
            if not status:  # else the answer has begun: the request just ends
                status = 408
                late = BodyTimeoutError(
                    f"the request body was not complete within {self.body_timeout:g} seconds"
                )
                await self._refuse(send, late, _CLOSE)
        finally:
            self._record(scope, status or 500, time.perf_counter() - started)

    async def _within_limit(self, scope: Scope, receive: Receive, started: float) -> Receive | None:
        """The ``receive`` to hand on (timed while the body is not complete), or None when the
        body is over the limit.

        Raises:
            BodyDeadlinePassed: a body without ``Content-Length`` was not complete in time.
        """
        for name, value in scope["headers"]:
            if name == b"content-length":
                if not value.isdigit() or int(value) > self.max_bytes:
                    return None
                if not value.strip(b"0"):
                    return receive  # no body: its one empty message is already there
                return BodyDeadline(receive, started, self.body_timeout)
        # A body without Content-Length (chunked) is read here first, at most max_bytes of it:
        # FastAPI would read it all anyway, and refusing mid-parse would turn into a 400.
        receive = BodyDeadline(receive, started, self.body_timeout)
        chunks: list[Message] = []
        seen = 0
        while True:
            message = await receive()
            chunks.append(message)
            if message["type"] != "http.request":
                break
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                return None
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return chunks.pop(0) if chunks else await receive()

        return replay

    def _record(self, scope: Scope, status: int, seconds: float) -> None:
        route = scope.get("route")
        template = getattr(route, "path", None) or "unmatched"
        method = scope["method"]
        if method not in _KNOWN_METHODS:  # a made-up method must not make a new series
            method = "other"
        key = (template, method, status)
        children = self._children.get(key)
        if children is None:
            children = self._children[key] = (
                self.metrics.requests.labels(template, method, str(status)),
                self.metrics.latency.labels(template),
            )
        children[0].inc()
        children[1].observe(seconds)

    async def _refuse(
        self, send: Send, refusal: Exception, headers: dict[str, str] | None = None
    ) -> None:
        error = self.gateway.answer(refusal)
        response = json_response(error.body(), error.status, headers)
        await response({"type": "http"}, _no_receive, send)


async def _no_receive() -> Message:
    return {"type": "http.disconnect"}
