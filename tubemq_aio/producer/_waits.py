"""A send's waits before its first attempt (the topic's publish, a window slot), bounded by the
send's own deadline: ``timeout`` is what the whole send may take (issue 30, fault 1)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from tubemq_aio._io.decisions import wire_timeout_ms
from tubemq_aio.errors import SendWindowFullError, TopicUnavailableError, TubeMQError
from tubemq_aio.producer._session import ProducerSession
from tubemq_aio.producer._window import SendWindow

__all__ = ["attempt_left", "slot_by", "window_stayed_full", "writable_by"]

#: Seconds the first attempt gets at least when the waits before it ended at the deadline.
MIN_ATTEMPT = 0.001


def attempt_left(deadline: float) -> tuple[float, int]:
    """What a wait left of a send for its next attempt: seconds (at least
    :data:`MIN_ATTEMPT`) and the matching ``RequestBody.timeout`` in ms."""
    left = max(deadline - time.monotonic(), MIN_ATTEMPT)
    return left, wire_timeout_ms(left)


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


async def writable_by(
    session: ProducerSession, topic: str, deadline: float, timeout: float
) -> None:
    """Wait for a writable partition of ``topic`` (publishing it on first use:
    :meth:`ProducerSession.ensure_writable`) until ``deadline`` (``time.monotonic`` seconds)
    of a send of ``timeout`` seconds.

    Raises:
        TopicUnavailableError: none came by the deadline (or ``publish_timeout``): nothing sent.
        TopicNotDeployedError: the master says the topic is not deployed.
        ClientClosedError: the producer closed meanwhile.
    """
    await until_deadline(
        session.ensure_writable(topic),
        deadline,
        lambda: TopicUnavailableError(
            f"topic {topic!r} had no writable partition within the send's timeout "
            f"({timeout} s); nothing was sent"
        ),
    )


async def slot_by(window: SendWindow, deadline: float, timeout: float) -> None:
    """Take a slot of ``window`` (waiting in turn) until ``deadline`` (``time.monotonic``
    seconds) of a send of ``timeout`` seconds.

    Raises:
        SendWindowFullError: no slot came free by the deadline (nothing taken, nothing sent).
    """
    await until_deadline(
        window.acquire(), deadline, lambda: window_stayed_full(window.limit, timeout)
    )


def window_stayed_full(limit: int, timeout: float) -> SendWindowFullError:
    """The error of a send that found no free slot of the ``limit`` within its ``timeout``."""
    return SendWindowFullError(
        f"all {limit} send slots stayed taken by other sends for the send's whole timeout "
        f"({timeout} s); nothing was sent"
    )
