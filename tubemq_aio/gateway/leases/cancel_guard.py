"""Awaiting a library call without losing a cancel it swallowed.

On Python 3.11, ``asyncio.wait_for`` returns the inner result, and drops the cancel, when the
task is cancelled in the same loop turn as the inner call completes (fixed in 3.12, where it
is built on ``asyncio.timeout``). A library that awaits ``wait_for`` inside a call (redis-py's
command write does) can therefore return normally from a cancelled task, and the task runs on
as if nobody had asked it to stop. The task's count of cancel requests still shows it:
:func:`keeping_cancel` compares it before and after the call and raises the lost cancel.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["keeping_cancel"]

_T = TypeVar("_T")


async def keeping_cancel(call: Awaitable[_T]) -> _T:
    """Await ``call``; if this task was cancelled meanwhile and ``call`` returned anyway, raise
    the cancel it swallowed.

    Inside ``asyncio.timeout``, the timeout's own cancel counts too: a swallowed expiry is
    raised as ``CancelledError`` and the timeout turns it into ``TimeoutError``, as it would
    have without the swallow.

    Returns:
        What ``call`` returned, when no cancel arrived while it ran.

    Raises:
        asyncio.CancelledError: the task was cancelled while ``call`` ran (whether or not
            ``call`` passed the cancel on).
        Exception: whatever ``call`` raised.
    """
    task = asyncio.current_task()
    before = 0 if task is None else task.cancelling()
    result = await call
    if task is not None and task.cancelling() > before:
        raise asyncio.CancelledError
    return result
