"""The one owner of a client's background tasks (style principle 5).

Every long-running task of a Producer, Consumer or ClientBalancedConsumer (heartbeats, fetch
loops, rebalance worker, pre-connects, ``send_nowait`` sends) is started through the client's
:class:`Supervisor`. It names each task after its client, logs a crash with its traceback and
keeps the first crash so the client can surface it on the next call, and :meth:`close` cancels
and awaits every task. Closing is resumable: cancelling a :meth:`close` half-way leaves every
task cancelled already, and a second :meth:`close` waits for them again.

It is not an :class:`asyncio.TaskGroup`: a task group must be entered and left in one task,
while a client is started by one call and closed by another (``start()``/``close()``), and a
crashed heartbeat must not cancel the fetch loops next to it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from tubemq_aio.errors import ClientClosedError

__all__ = ["Supervisor"]

log = logging.getLogger("tubemq_aio")

T = TypeVar("T")


class Supervisor:
    """Starts, watches and stops the background tasks of one client.

    Args:
        owner: the name prefix of the tasks (e.g. ``"tubemq-producer"``).
        on_crash: called with the task name and exception when an essential task crashes.
    """

    def __init__(
        self, owner: str, on_crash: Callable[[str, BaseException], object] | None = None
    ) -> None:
        self.owner = owner
        self._on_crash = on_crash
        self._tasks: set[asyncio.Task[Any]] = set()
        self._essential: set[asyncio.Task[Any]] = set()
        self._expected: dict[asyncio.Task[Any], tuple[type[BaseException], ...]] = {}
        self._closed = False
        #: ``(task name, exception)`` of the first essential task that crashed, or None.
        self.crash: tuple[str, BaseException] | None = None
        #: How many tasks ended with an unexpected exception.
        self.crashes = 0

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<Supervisor {self.owner} {state} tasks={len(self._tasks)} crashes={self.crashes}>"

    @property
    def tasks(self) -> list[asyncio.Task[Any]]:
        """The tasks still running (for tests and diagnostics)."""
        return [t for t in self._tasks if not t.done()]

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def spawn(
        self,
        coro: Coroutine[Any, Any, T],
        name: str,
        *,
        essential: bool = True,
        expected: tuple[type[BaseException], ...] = (),
    ) -> asyncio.Task[T]:
        """Start ``coro`` as a task named ``{owner}-{name}``.

        Args:
            coro: the coroutine to run.
            name: the task's role, e.g. ``"heartbeat"``.
            essential: a crash of this task breaks the client (it is recorded in :attr:`crash`
                and reported to ``on_crash``); a non-essential task's crash is only counted.
            expected: exceptions that are an outcome of the task for whoever awaits it (a
                connect's ``ConnectError``), not a crash: neither counted nor reported.

        Raises:
            ClientClosedError: the supervisor is closed (the coroutine is closed unstarted).
        """
        if self._closed:
            coro.close()
            raise ClientClosedError(f"{self.owner} is closed")
        task = asyncio.get_running_loop().create_task(coro, name=f"{self.owner}-{name}")
        self._tasks.add(task)
        if essential:
            self._essential.add(task)
        if expected:
            self._expected[task] = expected
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        essential = task in self._essential
        self._essential.discard(task)
        expected = self._expected.pop(task, ())
        if task.cancelled():
            return
        exc = task.exception()  # also marks it retrieved: no "never retrieved" warning
        if exc is None or isinstance(exc, expected):
            return
        self.crashes += 1
        if not essential:
            return
        log.error("background task %s crashed", task.get_name(), exc_info=exc)
        if self.crash is None and not self._closed:
            self.crash = (task.get_name(), exc)
            if self._on_crash is not None:
                self._on_crash(task.get_name(), exc)

    def raise_if_crashed(self) -> None:
        """Raise :class:`ClientClosedError` (caused by the crash) if an essential task crashed."""
        if self.crash is not None:
            name, exc = self.crash
            raise ClientClosedError(f"background task {name} crashed: {exc!r}") from exc

    def cancel(self) -> list[asyncio.Task[Any]]:
        """Close the supervisor and cancel every task now (no await); returns them."""
        self._closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        return tasks

    async def close(self) -> None:
        """Cancel every task and wait until all have ended. Safe to call again after a
        cancelled call: the tasks are cancelled already and this waits for them again."""
        tasks = self.cancel()
        if tasks:
            await asyncio.wait(tasks)
