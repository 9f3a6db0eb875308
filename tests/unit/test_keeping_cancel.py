"""``keeping_cancel`` raises a cancel that an awaited call swallowed, as Python 3.11's
``asyncio.wait_for`` does when the cancel meets the inner call's completion (redis-py awaits it
on every command write), and changes nothing otherwise."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from tubemq_aio.gateway.leases.cancel_guard import keeping_cancel


async def _swallowing(started: asyncio.Event) -> str:
    """Wait until cancelled, then return as if the inner call had completed (the 3.11 race)."""
    started.set()
    try:
        await asyncio.get_running_loop().create_future()
    except asyncio.CancelledError:
        return "swallowed"
    return "unreachable"


async def test_a_swallowed_cancel_is_raised() -> None:
    started = asyncio.Event()
    task = asyncio.ensure_future(keeping_cancel(_swallowing(started)))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()


async def test_without_the_guard_the_cancel_is_lost() -> None:
    """The fault the guard exists for: the task returns normally although it was cancelled."""
    started = asyncio.Event()
    task = asyncio.ensure_future(_swallowing(started))
    await started.wait()
    task.cancel()
    assert await task == "swallowed"


async def test_a_swallowed_timeout_expiry_is_still_a_timeout() -> None:
    async def bounded() -> str:
        async with asyncio.timeout(0.01):
            return await keeping_cancel(_swallowing(asyncio.Event()))

    with pytest.raises(TimeoutError):
        await bounded()


async def test_a_result_and_an_error_pass_through_untouched() -> None:
    async def answer() -> int:
        await asyncio.sleep(0)
        return 7

    async def fail() -> None:
        await asyncio.sleep(0)
        raise ValueError("boom")

    assert await keeping_cancel(answer()) == 7
    with pytest.raises(ValueError, match="boom"):
        await keeping_cancel(fail())


async def test_a_cancel_from_before_the_call_does_not_count() -> None:
    """A task that had a cancel turned into a timeout earlier still gets results."""

    async def run() -> int:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0):
                await asyncio.sleep(1)
        task = asyncio.current_task()
        assert task is not None
        task.cancel()  # a cancel this task then swallows itself, before the guarded call
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(1)
        return await keeping_cancel(asyncio.sleep(0, result=3))

    assert await run() == 3
