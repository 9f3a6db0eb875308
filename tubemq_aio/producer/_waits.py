"""A send's waits before its first attempt (the topic's publish, a window slot), bounded by the
send's own deadline: ``timeout`` is what the whole send may take (issue 30, fault 1)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from tubemq_aio.errors import SendWindowFullError, TopicUnavailableError, TubeMQError

__all__ = ["MIN_ATTEMPT", "no_partition_in_time", "until_deadline", "window_stayed_full"]

#: Seconds the first attempt gets at least when the waits before it ended at the deadline.
MIN_ATTEMPT = 0.001


async def until_deadline(
    wait: Awaitable[None], deadline: float, error: Callable[[], TubeMQError]
) -> None:
    """Await ``wait`` until ``deadline`` (``time.monotonic`` seconds).

    Raises:
        TubeMQError: ``error()`` when the deadline passes first (``wait`` is cancelled; the
            awaitables given here give back what they took when cancelled).
    """
    scope = asyncio.timeout(deadline - time.monotonic())
    try:
        async with scope:
            await wait
    except TimeoutError:
        if scope.expired():
            raise error() from None
        raise  # the wait's own error


def no_partition_in_time(topic: str, timeout: float) -> TopicUnavailableError:
    """The error of a send whose topic got no writable partition within its ``timeout``."""
    return TopicUnavailableError(
        f"topic {topic!r} had no writable partition within the send's timeout ({timeout} s); "
        "nothing was sent"
    )


def window_stayed_full(limit: int, timeout: float) -> SendWindowFullError:
    """The error of a send that found no free slot of the ``limit`` within its ``timeout``."""
    return SendWindowFullError(
        f"all {limit} send slots stayed taken by other sends for the send's whole timeout "
        f"({timeout} s); nothing was sent"
    )
