"""Waiting until a consumer holds partitions (Java ``isPartitionsReady``).

The Java client polls its held set every ``pullConsumeReadyChkSliceMs`` (10 ms) until a
deadline and answers true or false; here the wait raises a typed error at its deadline instead,
and ends at once when the consumer is closed or one of its tasks crashed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from tubemq_aio.checks import Checks
from tubemq_aio.errors import AssignmentTimeoutError

__all__ = ["READY_POLL", "wait_for_partitions"]

#: Seconds between two looks at the held set while waiting (Java polls every 10 ms).
READY_POLL = 0.01


async def wait_for_partitions(
    held: Callable[[], list[str]],
    check_running: Callable[[], None],
    timeout: float,
) -> list[str]:
    """Wait until ``held()`` is not empty and return it.

    Args:
        held: the sorted partition keys held now.
        check_running: raises (``ClientClosedError``, a crash) when the consumer is unusable;
            called before every look.
        timeout: seconds to wait at most (finite, >= 0; 0 looks once).

    Returns:
        The partition keys held when the wait ended.

    Raises:
        ConfigError: ``timeout`` is not a finite number >= 0.
        AssignmentTimeoutError: no partition was held within ``timeout``.
        ClientClosedError: the consumer is not started or was closed meanwhile.
    """
    checks = Checks("wait_for_assignment")
    checks.seconds("timeout", timeout, low_open=False)
    checks.done()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        check_running()
        keys = held()
        if keys:
            return keys
        left = deadline - loop.time()
        if left <= 0:
            raise AssignmentTimeoutError(f"no partition was assigned within {timeout} s")
        await asyncio.sleep(min(READY_POLL, left))
