"""The consumers' partition callbacks (``on_assigned`` / ``on_revoked``): checked, then run.

A callback is a plain function or an ``async def``; a coroutine it returns is awaited. Every
call is bounded by ``ConsumerConfig.callback_timeout`` and isolated: an exception or a timeout
is logged and the consumer carries on (a callback cannot stall a rebalance or ``close()`` for
longer than that). Cancellation of the caller (``close()`` ending the rebalance worker)
reaches an awaited callback as ``CancelledError``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tubemq_aio.checks import Checks

__all__ = ["PartitionListeners", "PartitionsCallback", "check_callbacks", "notify"]

log = logging.getLogger("tubemq_aio.consumer")

#: ``on_assigned`` / ``on_revoked``: called with partition keys (``brokerId:topic:partitionId``);
#: a coroutine function is awaited.
PartitionsCallback = Callable[[list[str]], Awaitable[None] | None]


@dataclass(frozen=True, slots=True)
class PartitionListeners:
    """A consumer's two partition callbacks, as its constructor received them (unchecked:
    the consumer checks them, naming itself in the error).

    Attributes:
        on_assigned: called with the partition keys the consumer took over; None for none.
        on_revoked: called with the partition keys about to be released; None for none.
    """

    on_assigned: PartitionsCallback | None = None
    on_revoked: PartitionsCallback | None = None


def check_callbacks(checks: Checks, **callbacks: object) -> None:
    """Record a problem in ``checks`` for each callback that is neither None nor callable."""
    for name, value in callbacks.items():
        if value is not None and not callable(value):
            checks.problem(f"{name} must be a callable or None, got {type(value).__name__}")


async def notify(
    callback: PartitionsCallback | None, keys: list[str], *, what: str, timeout: float
) -> None:
    """Run ``callback(keys)`` (awaiting a coroutine it returns) for at most ``timeout`` seconds.

    An exception from the callback or the timeout is logged, never raised: a failing listener
    must not end the rebalance worker or leave partitions registered on close.

    Args:
        callback: the user's callback, or None (nothing to do).
        keys: the partition keys to pass.
        what: ``"on_assigned"`` or ``"on_revoked"`` (for the log).
        timeout: seconds the call may take.
    """
    if callback is None:
        return
    scope: asyncio.Timeout | None = None
    try:
        result = callback(keys)
        if inspect.isawaitable(result):
            async with asyncio.timeout(timeout) as scope:
                await result
    except Exception as exc:
        if isinstance(exc, TimeoutError) and scope is not None and scope.expired():
            log.warning(
                "%s callback %r did not finish within %.1f s; abandoned", what, callback, timeout
            )
        else:
            log.exception("%s callback %r failed", what, callback)
