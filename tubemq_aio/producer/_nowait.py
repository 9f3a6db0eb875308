"""The sends of ``Producer.send_nowait``: each runs in a task the producer's supervisor owns and
ends in a future handed back at once; ``flush`` waits for the ones not ended yet.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from tubemq_aio._supervisor import Supervisor
from tubemq_aio.checks import Checks
from tubemq_aio.errors import ClientClosedError, FlushTimeoutError, SendWindowFullError
from tubemq_aio.producer._attempts import Failed
from tubemq_aio.producer._outgoing import Outgoing
from tubemq_aio.producer._window import SendWindow
from tubemq_aio.protocol.producer_send import SendResult

__all__ = ["NowaitSends"]

#: What ``send_nowait`` calls when a send's future is done.
Callback = Callable[[asyncio.Future[SendResult]], object]


class NowaitSends:
    """The fire-and-forget sends of one producer.

    Args:
        supervisor: owns each send's task (closed, and so ended, by the producer's ``close()``).
        window: the producer's send window; each send holds a slot from :meth:`start` on.
        send_one: the producer's send of a message already holding its slot:
            ``send_one(message, None)``; it releases the slot.
        closed: whether the producer's ``close()`` has begun.
    """

    def __init__(
        self,
        supervisor: Supervisor,
        window: SendWindow,
        send_one: Callable[[Outgoing, Failed | None], Awaitable[SendResult]],
        closed: Callable[[], bool],
    ) -> None:
        self._supervisor = supervisor
        self._window = window
        self._send_one = send_one
        self._closed = closed
        #: The futures not ended yet (what :meth:`flush` waits for).
        self._pending: set[asyncio.Future[SendResult]] = set()

    def start(self, message: Outgoing, callback: Callback | None) -> asyncio.Future[SendResult]:
        """Take a window slot, start the send in a task and return its future (cancelling the
        future cancels the send; ``callback`` is added to it).

        Raises:
            SendWindowFullError: every slot of the window is taken (nothing was sent).
        """
        window = self._window
        if not window.try_acquire():
            raise SendWindowFullError(
                f"all {window.limit} send slots are taken; await send() to wait for one"
            )
        future: asyncio.Future[SendResult] = asyncio.get_running_loop().create_future()
        try:
            task = self._supervisor.spawn(self._run(future, message), "send", essential=False)
        except BaseException:
            window.release()
            raise
        future.add_done_callback(lambda f: task.cancel() if f.cancelled() else None)
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)
        if callback is not None:
            future.add_done_callback(callback)
        return future

    async def flush(self, timeout: float | None) -> None:
        """Wait until every send started before this call has ended (see ``Producer.flush``).

        Raises:
            ConfigError: ``timeout`` is not None nor a number of seconds in (0, 86 400].
            FlushTimeoutError: sends were still pending when ``timeout`` passed (they go on).
        """
        checks = Checks("flush")
        checks.optional_seconds("timeout", timeout)
        checks.done()
        pending = set(self._pending)
        if not pending:
            return
        _, left = await asyncio.wait(pending, timeout=timeout)
        if left:
            raise FlushTimeoutError(
                f"{len(left)} of {len(pending)} send_nowait sends still pending after {timeout} s"
            )

    async def _run(self, future: asyncio.Future[SendResult], message: Outgoing) -> None:
        try:
            result = await self._send_one(message, None)
        except asyncio.CancelledError:
            if not future.done():
                self._fail_at_close(
                    future, ClientClosedError("the producer was closed before this send finished")
                )
        except ClientClosedError as exc:
            if not future.done():
                self._fail_at_close(future, exc)
        except Exception as exc:
            if not future.done():
                future.set_exception(exc)
        else:
            if not future.done():
                future.set_result(result)

    def _fail_at_close(self, future: asyncio.Future[SendResult], exc: ClientClosedError) -> None:
        """End a future that ``close()`` cut short. It counts as retrieved: ``close()`` logs how
        many it cut short once, where asyncio would log each future nobody kept (a
        fire-and-forget send's) as "exception was never retrieved"."""
        future.set_exception(exc)
        if self._closed():
            future.exception()
