"""Waiting in a test for a condition that no event reports, instead of sleeping a fixed time.

A fixed sleep is either too short on a busy machine (a flaky test) or too long on an idle one
(a slow suite). :func:`wait_until` polls a check until it holds, so the test waits exactly as
long as the system under test needs, up to a deadline that fails the test with a clear message.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Awaitable, Callable
from typing import TypeVar, overload

from tubemq_aio.errors import ConfigError

__all__ = ["wait_until"]

_T = TypeVar("_T")


def check_seconds(what: str, name: str, value: object) -> None:
    """Check that ``value`` is a duration a wait can use: a finite number of seconds > 0.

    Raises:
        ConfigError: it is not (the message names ``what`` and ``name``).
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{what}: {name} must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{what}: {name} must be finite and > 0, got {value!r}")


@overload
async def wait_until(
    check: Callable[[], Awaitable[_T]], timeout: float, what: str, *, interval: float = ...
) -> _T: ...


@overload
async def wait_until(
    check: Callable[[], _T], timeout: float, what: str, *, interval: float = ...
) -> _T: ...


async def wait_until(
    check: Callable[[], object],
    timeout: float,
    what: str,
    *,
    interval: float = 0.05,
) -> object:
    """Call ``check`` every ``interval`` seconds until it returns a truthy value; return that value.

    Args:
        check: A plain or ``async`` function without arguments; the wait ends on its first
            truthy result. An exception it raises ends the wait and propagates.
        timeout: Seconds to wait at most (finite, > 0).
        what: The awaited condition in words; the failure message names it.
        interval: Seconds between two checks (finite, > 0).

    Returns:
        The first truthy result of ``check``.

    Raises:
        AssertionError: ``check`` did not hold within ``timeout`` seconds (a test failure).
        ConfigError: ``timeout`` or ``interval`` is not a finite number > 0.
    """
    for name, value in (("timeout", timeout), ("interval", interval)):
        check_seconds("wait_until", name, value)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        got = check()
        if inspect.isawaitable(got):
            got = await got
        if got:
            return got
        if loop.time() >= deadline:
            raise AssertionError(f"not within {timeout} s: {what} (last check gave {got!r})")
        await asyncio.sleep(interval)
