"""Whether the TubeMQ cluster can be reached, so that a produce fails fast when it cannot.

The SDK producer retries a send until its deadline (``produce_timeout``, 10 s by default) and
then raises a generic network error. So a produce that has not finished after a short grace
asks this probe: a TCP connect to every master address at once, each within ``connect_timeout``.
When none answers, the produce is cancelled and answered 503 ``tube_unavailable`` (retriable)
at once; so is every produce while the last probe, at most ``ttl`` seconds old, found none. A
healthy broker answers a send in milliseconds, so a send still pending after the grace with no
master reachable has almost certainly written nothing; in the rare case a broker stored it, a
retry duplicates the message (the gateway's produce is at least once, like any retry after an
error).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from tubemq_aio.config import HostPort
from tubemq_aio.gateway.errors import TubeUnavailableError

__all__ = ["MasterReach"]

_T = TypeVar("_T")


class MasterReach:
    """A shared, cached probe of the master addresses.

    Args:
        masters: the master addresses.
        connect_timeout: seconds one TCP connect may take.
        ttl: seconds a probe's answer is reused (concurrent callers share one probe).
        clock: monotonic seconds (a parameter for tests).
    """

    def __init__(
        self,
        masters: Sequence[HostPort],
        *,
        connect_timeout: float = 1.0,
        ttl: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.masters = tuple(masters)
        self.connect_timeout = connect_timeout
        self.ttl = ttl
        self._clock = clock
        self._answer: tuple[float, bool] | None = None  # (when, reachable)
        self._probe: asyncio.Task[bool] | None = None

    def known_down(self) -> bool:
        """Whether the last probe, at most ``ttl`` old, reached no master."""
        return (
            self._answer is not None
            and not self._answer[1]
            and (self._clock() - self._answer[0] < self.ttl)
        )

    async def reachable(self) -> bool:
        """Whether any master accepts a TCP connection (a fresh probe unless one at most
        ``ttl`` old answered)."""
        if self._answer is not None and self._clock() - self._answer[0] < self.ttl:
            return self._answer[1]
        if self._probe is None or self._probe.done():
            self._probe = asyncio.create_task(self._connect_any())
        return await asyncio.shield(self._probe)

    async def close(self) -> None:
        """Cancel a probe still running (at most ``connect_timeout`` long anyway)."""
        if self._probe is not None and not self._probe.done():
            self._probe.cancel()
            await asyncio.gather(self._probe, return_exceptions=True)

    async def _connect_any(self) -> bool:
        results = await asyncio.gather(*(self._connect(m) for m in self.masters))
        answer = any(results)
        self._answer = (self._clock(), answer)
        return answer

    async def _connect(self, addr: HostPort) -> bool:
        try:
            async with asyncio.timeout(self.connect_timeout):
                _, writer = await asyncio.open_connection(addr.host, addr.port)
        except (OSError, TimeoutError):
            return False
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return True

    async def guard(self, work: Awaitable[_T], grace: float) -> _T:
        """``await work`` in the calling task, unless the masters are known to be down (then
        it is not started) or, ``grace`` seconds in, unreachable (then it is cancelled). Like
        ``asyncio.timeout``, a timer (not a task per call) starts the probe when the grace ends.

        Raises:
            TubeUnavailableError: no master reachable (503 ``tube_unavailable``).
            Exception: what ``work`` raised.
        """
        if self.known_down():
            if asyncio.iscoroutine(work):
                work.close()  # never started: nothing was sent
            raise TubeUnavailableError("no TubeMQ master is reachable (recent probe)")
        caller = asyncio.current_task()
        if caller is None:
            return await work
        cut = _Cut(self, caller)
        timer = asyncio.get_running_loop().call_later(grace, cut.start)
        try:
            return await work
        except asyncio.CancelledError:
            if cut.fired and caller.uncancel() == 0:
                raise TubeUnavailableError("no TubeMQ master is reachable") from None
            raise
        finally:
            timer.cancel()
            cut.stop()


class _Cut:
    """The probe of one guarded call: cancels the caller when no master answers."""

    def __init__(self, reach: MasterReach, caller: asyncio.Task[object]) -> None:
        self.reach = reach
        self.caller = caller
        self.probe: asyncio.Task[None] | None = None
        self.fired = False
        self.over = False

    def start(self) -> None:
        if not self.over:
            self.probe = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        if not await self.reach.reachable() and not self.over:
            self.fired = True
            self.caller.cancel()

    def stop(self) -> None:
        self.over = True
        if self.probe is not None and not self.probe.done():
            self.probe.cancel()  # the shared probe itself is shielded and finishes alone
