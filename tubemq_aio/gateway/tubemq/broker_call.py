"""A fetch attempt's broker call, and whether a request of it may still reach the broker.

The broker keeps one batch in flight per group and partition, whoever read it
(``docs/protocol/consumer.md`` §4.2): a GetMessage (or a register, a CommitOffset) that a lease's
holder sent and stopped waiting for may still land inside the next holder's read and move the
cursor past messages nobody gets. So a holder whose request may still arrive must not give its
lease back: it lets the lease lapse at its expiry (``docs/gateway.md``, "Read-ahead off the
critical path"). :class:`BrokerCall` runs an attempt's broker calls (one at a time) so that the
attempt can tell, when it gives up, whether it may release: a call that returned, or ended with
an error that proves the broker answered it or never got it, leaves nothing on the way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from tubemq_aio.protocol.call_outcome import may_still_arrive

__all__ = ["BrokerCall"]

_T = TypeVar("_T")

#: How long (seconds) a call cancelled at its deadline is given to end.
_STOPPED_S = 1.0


class BrokerCall:
    """The broker calls of one fetch attempt, run one after the other (:meth:`run`).

    Each call runs as a task of its own, awaited through a shield: when the fetch is cancelled
    the call goes on, and the attempt may hand it over (:meth:`wait`) to learn whether it is
    answered before its lease is given back.
    """

    __slots__ = ("_task",)

    def __init__(self) -> None:
        self._task: asyncio.Future[Any] | None = None

    async def run(self, call: Coroutine[Any, Any, _T]) -> _T:
        """Send ``call`` and return its answer (or raise its error).

        Raises:
            RuntimeError: a call of the attempt is still running.
            asyncio.CancelledError: the caller was cancelled; the call goes on (see
                :attr:`pending`).
        """
        if self.pending:
            call.close()
            raise RuntimeError("a broker call of this attempt is still running")
        task: asyncio.Future[_T] = asyncio.ensure_future(call)
        self._task = task
        return await asyncio.shield(task)

    @property
    def pending(self) -> bool:
        """A call is still running (its caller stopped waiting: cancelled, or out of time)."""
        return self._task is not None and not self._task.done()

    @property
    def astray(self) -> bool:
        """A request of the attempt may still reach the broker: its last call is running, was
        cancelled, or ended without proof that it was answered or never sent
        (:func:`~tubemq_aio.protocol.call_outcome.may_still_arrive`).
        False when no call was made."""
        task = self._task
        if task is None:
            return False
        if not task.done() or task.cancelled():
            return True
        error = task.exception()
        return error is not None and may_still_arrive(error)

    def stop(self) -> None:
        """Cancel a call that is still running (its request, if written, may still arrive:
        :attr:`astray` stays True)."""
        task = self._task
        if task is not None and not task.done():
            task.cancel()
        elif task is not None and not task.cancelled():
            task.exception()  # seen: an error nobody awaited is not logged as lost

    async def wait(self, until: float) -> bool:
        """Wait for a running call until ``until`` (``loop.time()``), cancel it if it is still
        running then (or when this wait is cancelled); whether it is answered now (not
        :attr:`astray`)."""
        task = self._task
        if task is not None and not task.done():
            delay = max(0.0, until - asyncio.get_running_loop().time())
            try:
                await asyncio.wait({task}, timeout=delay)
            finally:
                self.stop()
            await asyncio.wait({task}, timeout=_STOPPED_S)  # its cancel is not raised here
        return not self.astray
