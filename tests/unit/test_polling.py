"""The one polling helper of the tests: ``wait_until`` without a cluster."""

from __future__ import annotations

import asyncio
import itertools
import math

import pytest

from tubemq_aio.errors import ConfigError
from tubemq_aio.testing import wait_until


async def test_returns_the_first_truthy_result_of_a_plain_check() -> None:
    calls = itertools.count(1)
    assert await wait_until(lambda: max(0, next(calls) - 2), 5, "a third call", interval=0.001) == 1


async def test_awaits_an_async_check() -> None:
    seen: list[int] = []

    async def check() -> list[int]:
        seen.append(1)
        return seen if len(seen) >= 3 else []

    assert await wait_until(check, 5, "three checks", interval=0.001) == [1, 1, 1]


async def test_fails_as_an_assertion_naming_the_condition() -> None:
    with pytest.raises(AssertionError, match=r"not within 0.05 s: the moon \(last check gave 0\)"):
        await wait_until(lambda: 0, 0.05, "the moon", interval=0.01)


async def test_an_error_of_the_check_propagates() -> None:
    def check() -> bool:
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        await wait_until(check, 5, "never")


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, "1", True, None])
async def test_a_bad_timeout_or_interval_is_a_config_error(bad: object) -> None:
    with pytest.raises(ConfigError, match="timeout"):
        await wait_until(lambda: True, bad, "x")  # type: ignore[call-overload]
    with pytest.raises(ConfigError, match="interval"):
        await wait_until(lambda: True, 1, "x", interval=bad)  # type: ignore[call-overload]


async def test_cancelling_the_wait_ends_it() -> None:
    waiting = asyncio.ensure_future(wait_until(lambda: False, 60, "never", interval=0.001))
    await asyncio.sleep(0.01)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
