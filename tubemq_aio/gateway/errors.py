"""Errors of the gateway's consume engine; the HTTP layer maps each to one status code.

All subclass :class:`~tubemq_aio.errors.TubeMQError`. ``retriable`` says whether the same call
may succeed later unchanged.
"""

from __future__ import annotations

from typing import ClassVar

from tubemq_aio.errors import ConfigError, TubeMQError

__all__ = [
    "GatewayError",
    "InvalidRequestError",
    "LeaseConflictError",
    "LeaseStaleError",
    "StateLostError",
    "StoreUnavailableError",
    "TooManyWaitersError",
    "TubeUnavailableError",
    "UnknownGroupError",
]


class GatewayError(TubeMQError):
    """Base of the consume engine's errors."""

    retriable: ClassVar[bool] = False


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
