"""One seam that turns every exception the gateway meets into an HTTP error.

Errors are answered as ``{"error": {"code", "message", "retriable"}}`` with a real status code.
A client mistake or a normal state never becomes a 500; only a bug does.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

from tubemq_aio.errors import (
    ClientClosedError,
    ConfigError,
    NetworkError,
    RemoteRpcError,
    RequestTimeoutError,
    SendOutcomeUnknownError,
    ServerError,
    TopicUnavailableError,
)
from tubemq_aio.gateway.engine.tokens import TokenError
from tubemq_aio.gateway.errors import (
    GatewayError,
    InvalidRequestError,
    LeaseConflictError,
    LeaseStaleError,
    StateLostError,
    StoreUnavailableError,
    TooManyClientsError,
    TooManyWaitersError,
    TubeUnavailableError,
    UnknownGroupError,
)
from tubemq_aio.gateway.http.auth import AuthError, ForbiddenScopeError

__all__ = ["ApiError", "api_error_for"]

log = logging.getLogger("tubemq_aio.gateway")


@dataclass(slots=True)
class ApiError(Exception):
    """An error answer: status, stable code, message, whether retrying may help."""

    status: int
    code: str
    message: str
    retriable: bool = False
    headers: dict[str, str] = field(default_factory=dict)

    def body(self) -> dict[str, object]:
        """The JSON body ``{"error": {...}}``."""
        return {"error": {"code": self.code, "message": self.message, "retriable": self.retriable}}


def throttled(retry_after_ms: int | None, message: str) -> ApiError:
    """A 429 with ``Retry-After`` in whole seconds (at least 1)."""
    seconds = max(1, math.ceil((retry_after_ms or 1000) / 1000))
    return ApiError(429, "rate_limited", message, True, {"Retry-After": str(seconds)})


# The consume engine's errors: this table is the only place that gives them HTTP meaning
# (status and code; ``retriable`` comes from the error class).
_ENGINE_ERRORS: dict[type[GatewayError], tuple[int, str]] = {
    UnknownGroupError: (404, "unknown_group"),
    LeaseStaleError: (409, "lease_stale"),
    LeaseConflictError: (409, "lease_conflict"),
    StateLostError: (503, "state_lost"),
    StoreUnavailableError: (503, "store_unavailable"),
    TubeUnavailableError: (503, "tube_unavailable"),
    TooManyWaitersError: (503, "too_many_waiters"),
    TooManyClientsError: (409, "too_many_clients"),
    InvalidRequestError: (422, "invalid_request"),
}


# What a client reads for an outage or an unknown name: no internal address, no echo of its
# own (possibly huge) text; the details go to the log.
_GENERIC_TEXTS: dict[str, str] = {
    "unknown_group": "no such consumer group is configured",
    "state_lost": "the gateway state of this group is missing in Redis; an admin must reset "
    "the group's offsets",
    "store_unavailable": "the gateway's Redis store is unavailable",
    "tube_unavailable": "the TubeMQ cluster is unavailable",
    "topic_unavailable": "the topic is unavailable",
    "unavailable": "a backend is unavailable",
    "broker_busy": "the broker is busy; retry later",
}


def _generic(status: int, code: str, exc: BaseException, retriable: bool) -> ApiError:
    log.info("HTTP %d %s: %s", status, code, exc)
    return ApiError(status, code, _GENERIC_TEXTS[code], retriable)


def api_error_for(exc: BaseException) -> ApiError | None:
    """The HTTP error for ``exc``, or None when it is not an expected failure (a bug → 500)."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, GatewayError):
        status, code = next(
            (v for cls, v in _ENGINE_ERRORS.items() if isinstance(exc, cls)), (503, "unavailable")
        )
        if code in _GENERIC_TEXTS:
            return _generic(status, code, exc, exc.retriable)
        return ApiError(status, code, str(exc) or code, exc.retriable)
    text = str(exc) or type(exc).__name__
    if isinstance(exc, TokenError):
        return ApiError(400, "bad_token", text)
    if isinstance(exc, AuthError):
        return ApiError(401, "unauthorized", text, headers={"WWW-Authenticate": "Bearer"})
    if isinstance(exc, ForbiddenScopeError):
        return ApiError(403, "forbidden", text)
    if isinstance(exc, SendOutcomeUnknownError):
        return ApiError(
            504,
            "outcome_unknown",
            "the broker did not answer in time: the message may or may not be stored; "
            "a retry may create a duplicate",
            True,
        )
    if isinstance(exc, RequestTimeoutError):
        return ApiError(504, "timeout", text, True)
    if isinstance(exc, ConfigError):
        too_big = "exceeds max" in text
        return ApiError(413 if too_big else 422, "too_large" if too_big else "invalid", text)
    if isinstance(exc, TopicUnavailableError):
        return _generic(503, "topic_unavailable", exc, True)
    if isinstance(exc, NetworkError | ClientClosedError):
        return _generic(503, "unavailable", exc, True)
    if isinstance(exc, ServerError | RemoteRpcError):
        if exc.retriable:
            return _generic(503, "broker_busy", exc, True)
        return ApiError(502, "broker_refused", text)
    return None
