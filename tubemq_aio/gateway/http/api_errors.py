"""The one place that turns an exception into an HTTP error answer.

Errors are answered as ``{"error": {"code", "message", "retriable"}}`` with a real status code.
A client mistake or a normal state never becomes a 500; only a bug does. Every :class:`ApiError`
is built here: the rest of the gateway raises typed errors (:mod:`tubemq_aio.gateway.errors`,
the SDK's) and :func:`answer_for` maps them. An answer never carries internal details (a
backend's host:port, an exception's text): those go to the log, and every error answer is
counted in ``tubemq_gateway_error_answers_total`` by code and a bounded cause class.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from tubemq_aio.errors import (
    ClientClosedError,
    ConfigError,
    MessageTooLargeError,
    NetworkError,
    RemoteRpcError,
    RequestTimeoutError,
    SendOutcomeUnknownError,
    SendWindowFullError,
    ServerError,
    TopicNotDeployedError,
    TopicUnavailableError,
)
from tubemq_aio.gateway.errors import (
    AuthError,
    BodyTimeoutError,
    ForbiddenScopeError,
    GatewayError,
    InvalidBodyError,
    InvalidRequestError,
    LeaseConflictError,
    LeaseStaleError,
    NotReadyError,
    RateLimitedError,
    RequestTooLargeError,
    StateLostError,
    StoreUnavailableError,
    TokenError,
    TooManyClientsError,
    TooManyWaitersError,
    TubeUnavailableError,
    UnknownGroupError,
    UnknownTopicError,
    UnsupportedMediaTypeError,
)
from tubemq_aio.gateway.metrics import GatewayMetrics
from tubemq_aio.gateway.tubemq.web_port import web_port_hint

__all__ = ["ApiError", "answer_for", "api_error_for", "cause_class"]

log = logging.getLogger("tubemq_aio.gateway")


@dataclass(slots=True)
class ApiError(Exception):
    """An error answer: status, stable code, message, whether retrying may help.

    ``cause`` (a bounded class name) labels the error metric; ``detail`` is what the log gets
    when the message withholds it (empty: the message says it all); ``retry_after_ms`` (a
    429's wait in ms, which ``Retry-After`` rounds up to whole seconds) goes in the body too.
    """

    status: int
    code: str
    message: str
    retriable: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    cause: str = "other"
    detail: str = ""
    retry_after_ms: int | None = None

    def body(self) -> dict[str, object]:
        """The JSON body ``{"error": {...}}``."""
        error: dict[str, object] = {
            "code": self.code,
            "message": self.message,
            "retriable": self.retriable,
        }
        if self.retry_after_ms is not None:
            error["retry_after_ms"] = self.retry_after_ms
        return {"error": error}


# The gateway's errors: this table is the only place that gives them HTTP meaning (status and
# code; ``retriable`` comes from the error class). A class not listed takes its nearest listed
# base class's entry.
_GATEWAY_ERRORS: dict[type[GatewayError], tuple[int, str]] = {
    UnknownGroupError: (404, "unknown_group"),
    LeaseStaleError: (409, "lease_stale"),
    LeaseConflictError: (409, "lease_conflict"),
    StateLostError: (503, "state_lost"),
    StoreUnavailableError: (503, "store_unavailable"),
    TubeUnavailableError: (503, "tube_unavailable"),
    TooManyWaitersError: (503, "too_many_waiters"),
    TooManyClientsError: (409, "too_many_clients"),
    InvalidRequestError: (422, "invalid_request"),
    AuthError: (401, "unauthorized"),
    ForbiddenScopeError: (403, "forbidden"),
    TokenError: (400, "bad_token"),
    UnknownTopicError: (404, "unknown_topic"),
    NotReadyError: (503, "not_ready"),
    InvalidBodyError: (422, "invalid"),
    RequestTooLargeError: (413, "too_large"),
    BodyTimeoutError: (408, "request_timeout"),
    UnsupportedMediaTypeError: (415, "unsupported_media_type"),
    RateLimitedError: (429, "rate_limited"),
    GatewayError: (503, "unavailable"),
}
_HEADERS: dict[type[GatewayError], dict[str, str]] = {AuthError: {"WWW-Authenticate": "Bearer"}}

# What a client reads for an outage, a backend's refusal or an unknown name: no internal
# address, no echo of its own (possibly huge) text; the details go to the log.
_GENERIC_TEXTS: dict[str, str] = {
    "unknown_group": "no such consumer group is configured",
    "state_lost": "the gateway state of this group is missing in Redis; an admin must reset "
    "the group's offsets",
    "store_unavailable": "the gateway's Redis store is unavailable",
    "tube_unavailable": "the TubeMQ cluster is unavailable",
    "topic_unavailable": "the topic is unavailable",
    "unavailable": "a backend is unavailable",
    "broker_busy": "the broker is busy; retry later",
    "producer_busy": "the gateway has as many sends outstanding as it allows; nothing was "
    "sent; retry later",
    "broker_refused": "the broker refused the request",
    "timeout": "the TubeMQ cluster did not answer in time",
    "outcome_unknown": "the broker did not answer in time: the message may or may not be "
    "stored; a retry may create a duplicate",
    "internal": "internal error",
}
_STATUS_CODES = {404: "not_found", 405: "method_not_allowed", 413: "too_large"}
#: Top-level packages whose exception classes may name a cause label (a bounded set); any
#: other class is counted as ``other``.
_CAUSE_PACKAGES = frozenset(
    {"tubemq_aio", "redis", "builtins", "asyncio", "ssl", "fastapi", "starlette", "pydantic"}
)


def cause_class(exc: BaseException) -> str:
    """The metric label of ``exc``: the class name of its root cause (``raise ... from``),
    if that class is ours or of a known library, else ``other``."""
    root = exc
    for _ in range(8):  # a chain this deep says nothing more
        if root.__cause__ is None:
            break
        root = root.__cause__
    cls = type(root)
    return cls.__name__ if cls.__module__.split(".")[0] in _CAUSE_PACKAGES else "other"


def _error(
    status: int,
    code: str,
    exc: BaseException,
    retriable: bool,
    message: str | None = None,
    headers: dict[str, str] | None = None,
) -> ApiError:
    """An answer with ``message``, or the code's generic text (the exception's text withheld)
    when ``message`` is None."""
    text = str(exc) or type(exc).__name__
    if message is None:
        return ApiError(
            status,
            code,
            _GENERIC_TEXTS[code],
            retriable,
            dict(headers or {}),
            cause_class(exc),
            text,
        )
    return ApiError(status, code, message, retriable, dict(headers or {}), cause_class(exc))


def _gateway_error(exc: GatewayError) -> ApiError:
    cls = next(c for c in type(exc).__mro__ if c in _GATEWAY_ERRORS)
    status, code = _GATEWAY_ERRORS[cls]
    headers = _HEADERS.get(cls, {})
    message = None if code in _GENERIC_TEXTS else (str(exc) or code)
    if isinstance(exc, RateLimitedError):
        wait_ms = max(1, exc.retry_after_ms or 1000)
        headers = {"Retry-After": str(math.ceil(wait_ms / 1000))}
        answer = _error(status, code, exc, exc.retriable, message, headers)
        answer.retry_after_ms = wait_ms  # exact: a script can read it without CORS's expose
        return answer
    return _error(status, code, exc, exc.retriable, message, headers)


#: A union member's tag in an error's location (``literal['earliest','latest']``, ``dict[…]``).
_UNION_MEMBER = re.compile(r"[a-z][a-z0-9_-]*\[")


def _validation_text(errors: Sequence[Any]) -> str:
    """``where: what`` of the error that says most. Each member of a union reports an error
    (``to`` is ``"earliest"``, ``"latest"`` or ``{partition: offset}``); the one that got
    furthest into the value (the longest location) is the one the client meant, not the first
    member listed, and the members' tags are left out of the location."""
    if not errors:
        return "invalid request"
    best = max(errors, key=lambda e: len(e.get("loc", ())))
    loc = tuple(best.get("loc", ()))
    if best.get("type") == "missing" and loc == ("body",):
        return "body: none was sent; send a JSON object ({} for every default)"
    if best.get("type") == "json_invalid" and loc[:1] == ("body",):
        reason = (best.get("ctx") or {}).get("error", "unreadable")
        at = f" at character {loc[1]}" if len(loc) > 1 else ""
        return f"body: not valid JSON{at} ({reason})"
    where = ".".join(
        str(p) for p in best.get("loc", ()) if not (isinstance(p, str) and _UNION_MEMBER.match(p))
    )
    return f"{where}: {best.get('msg', 'invalid request')}" if where else "invalid request"


def _framework_error(exc: RequestValidationError | StarletteHTTPException) -> ApiError:
    if isinstance(exc, RequestValidationError):
        return _error(422, "invalid", exc, False, _validation_text(exc.errors()))
    if exc.status_code == 400 and isinstance(exc.__cause__, ValueError | RecursionError):
        # FastAPI's answer to a body json.loads refuses with something other than a
        # JSONDecodeError, e.g. a number over Python's 4300-digit limit or arrays nested a few
        # thousand deep: a client mistake like any other unparseable body, so the same 422
        if isinstance(exc.__cause__, RecursionError):
            reason = "JSON nested too deeply"
        else:
            reason = str(exc.__cause__).split(";")[0][:200]
        return _error(422, "invalid", exc, False, f"body: {reason}")
    code = _STATUS_CODES.get(exc.status_code, "http_error")
    headers = dict(exc.headers or {})
    return _error(exc.status_code, code, exc, False, str(exc.detail), headers)


def _not_deployed(exc: TopicNotDeployedError) -> str:
    names = ", ".join(repr(t) for t in exc.topics)
    return f"topic {names} is not deployed on the TubeMQ cluster"


def api_error_for(exc: BaseException) -> ApiError | None:
    """The HTTP error for ``exc``, or None when it is not an expected failure (a bug → 500)."""
    if isinstance(exc, ApiError):
        return exc
    hint = web_port_hint(exc)
    if hint is not None:  # a configuration mistake: say what it is, not "unavailable"
        return _error(503, "tube_unavailable", exc, True, hint)
    if isinstance(exc, GatewayError):
        return _gateway_error(exc)
    if isinstance(exc, RequestValidationError | StarletteHTTPException):
        return _framework_error(exc)
    if isinstance(exc, SendOutcomeUnknownError):
        return _error(504, "outcome_unknown", exc, True)
    if isinstance(exc, RequestTimeoutError):
        return _error(504, "timeout", exc, True)
    if isinstance(exc, MessageTooLargeError):
        return _error(413, "too_large", exc, False, str(exc))
    if isinstance(exc, ConfigError):
        return _error(422, "invalid", exc, False, str(exc) or type(exc).__name__)
    if isinstance(exc, SendWindowFullError):  # nothing was sent: safe to retry
        return _error(503, "producer_busy", exc, True)
    if isinstance(exc, TopicNotDeployedError):  # the master's word: no retry will find it
        return _error(404, "unknown_topic", exc, False, _not_deployed(exc))
    if isinstance(exc, TopicUnavailableError):
        return _error(503, "topic_unavailable", exc, True)
    if isinstance(exc, NetworkError):  # the cluster's hosts, not the gateway's own state
        return _error(503, "tube_unavailable", exc, True)
    if isinstance(exc, ClientClosedError):
        return _error(503, "unavailable", exc, True)
    if isinstance(exc, ServerError | RemoteRpcError):
        if exc.retriable:
            return _error(503, "broker_busy", exc, True)
        return _error(502, "broker_refused", exc, False)
    return None


def answer_for(exc: BaseException, metrics: GatewayMetrics) -> ApiError:
    """The answer for ``exc`` (a 500 for a bug), with its details logged and the answer counted.

    An :class:`ApiError` is returned as it is: it was logged and counted when it was built.
    """
    if isinstance(exc, ApiError):
        return exc
    error = api_error_for(exc)
    if error is None:  # an unexpected library error: a bug of ours, say so
        log.error("HTTP 500 internal: unexpected error", exc_info=exc)
        error = _error(500, "internal", exc, True)
    elif error.detail:
        log.info("HTTP %d %s (%s): %s", error.status, error.code, error.cause, error.detail)
    metrics.error_answers.labels(error.code, error.cause).inc()
    return error
