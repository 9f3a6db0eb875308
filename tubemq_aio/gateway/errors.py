"""Every error of the gateway: the consume engine's and the HTTP layer's, under one base.

All subclass :class:`GatewayError` (a :class:`~tubemq_aio.errors.TubeMQError`). ``retriable``
says whether the same call may succeed later unchanged. Each class has exactly one HTTP meaning,
given by the one table in :mod:`tubemq_aio.gateway.http.api_errors`; the status in each
docstring is that table's.
"""

from __future__ import annotations

from typing import ClassVar

from tubemq_aio.errors import ConfigError, TubeMQError

__all__ = [
    "AuthError",
    "BodyTimeoutError",
    "ForbiddenScopeError",
    "GatewayError",
    "InvalidBodyError",
    "InvalidRequestError",
    "LeaseConflictError",
    "LeaseStaleError",
    "NotReadyError",
    "RateLimitedError",
    "RequestTooLargeError",
    "StateLostError",
    "StoreUnavailableError",
    "TokenError",
    "TooManyClientsError",
    "TooManyWaitersError",
    "TubeUnavailableError",
    "UnknownGroupError",
    "UnknownTopicError",
    "UnsupportedMediaTypeError",
]


class GatewayError(TubeMQError):
    """Base of the gateway's errors."""

    retriable: ClassVar[bool] = False


# ---- the consume engine ------------------------------------------------------------------------


class UnknownGroupError(GatewayError):
    """The group is not configured on this gateway (HTTP 404)."""


class InvalidRequestError(GatewayError, ConfigError):
    """A request argument is invalid, e.g. client_id missing in broadcast (HTTP 422)."""


class LeaseStaleError(GatewayError):
    """The lease is no longer this token's: taken over after expiry, or reset (409)."""


class LeaseConflictError(GatewayError):
    """The committed offset moved under the lease (an offset reset); nothing committed (409)."""


class StateLostError(GatewayError):
    """Redis lost the gateway's state (boot marker missing); an admin must reset (503)."""


class StoreUnavailableError(GatewayError):
    """Redis cannot be reached or did not answer in time (503)."""

    retriable = True


class TubeUnavailableError(GatewayError):
    """The TubeMQ master or broker for this fetch is unreachable or refused (503)."""

    retriable = True


class TooManyClientsError(GatewayError):
    """A new broadcast ``client_id`` beyond the group's ``max_clients`` (409)."""


class TooManyWaitersError(GatewayError):
    """This replica already holds its maximum of long-poll waiters (503)."""

    retriable = True


# ---- requests and callers ----------------------------------------------------------------------


class AuthError(GatewayError):
    """No key, a malformed header or an unknown key (HTTP 401)."""


class ForbiddenScopeError(GatewayError):
    """The key is valid but lacks the scope for this resource (HTTP 403)."""


class TokenError(GatewayError):
    """A lease token is malformed, forged or altered (HTTP 400)."""


class UnknownTopicError(GatewayError):
    """The gateway may not publish to this topic, or the TubeMQ master says a topic is not
    deployed on the cluster (HTTP 404, not retriable)."""


class NotReadyError(GatewayError):
    """The producer or the consume engine of this replica is not running (yet) (HTTP 503)."""

    retriable = True


class InvalidBodyError(GatewayError, ConfigError):
    """A request body (or a value in it) is invalid (HTTP 422 ``invalid``)."""


class RequestTooLargeError(GatewayError, ConfigError):
    """A request body or batch over the configured limit (HTTP 413)."""


class BodyTimeoutError(GatewayError):
    """A request body not complete within ``body_timeout`` seconds of the request's start
    (HTTP 408 ``request_timeout``; the connection is closed). Retriable: the same request sent
    at a usual pace is served."""

    retriable = True


class UnsupportedMediaTypeError(GatewayError, ConfigError):
    """A request body not sent as ``Content-Type: application/json`` (HTTP 415)."""


class RateLimitedError(GatewayError):
    """The group is over its consume rate (HTTP 429 with ``Retry-After``).

    Args:
        message: what the client reads.
        retry_after_ms: when the next fetch may pass, or None (one second).
    """

    retriable = True

    def __init__(self, message: str, retry_after_ms: int | None = None) -> None:
        super().__init__(message)
        self.retry_after_ms = retry_after_ms
