"""The request-body deadline: a request's body must be complete within ``body_timeout`` seconds
of the request's start.

uvicorn has no timeout for reading a request body: a client that sends ``Content-Length: 100``
and one byte, then nothing, would hold its connection and its request's coroutine forever (the
slowloris attack). :class:`BodyDeadline` wraps a request's ASGI ``receive`` so that, while the
body is not complete, a ``receive`` that has to wait for body bytes waits only until the
request's deadline; past it, :class:`BodyDeadlinePassed` is raised.

The deadline is for the whole body, counted from the request's start, not per chunk: a deadline
per chunk lets a client that sends one byte just before each deadline hold the request for
``max_body_bytes`` deadlines. A client on a slow link needs ``max_body_bytes / body_timeout``
bytes a second to send the largest body (8 MiB in 30 s: about 280 KiB/s).

Cost: a ``receive`` whose message is already there (a body that came with the headers, the
common case) runs with no timer and no task: the ``receive`` coroutine is stepped once, and only
when it suspends does the rest of it run under ``asyncio.timeout_at``. Once the body is complete
(a message with ``more_body`` false) or the client left (``http.disconnect``), ``receive`` is
passed through untimed: a streaming route awaits it to learn of a disconnect, for as long as
its stream lasts.
"""

from __future__ import annotations

import asyncio
import time
import types
from collections.abc import Awaitable, Coroutine, Generator
from typing import Any

from starlette.types import Message, Receive

__all__ = ["BodyDeadline", "BodyDeadlinePassed"]


class BodyDeadlinePassed(BaseException):
    """The body was not complete by the request's deadline.

    A ``BaseException`` on purpose: it is raised inside the app's ``receive`` and must reach
    the edge layer that owns the deadline unchanged. FastAPI turns any ``Exception`` raised
    while it reads a body into a 400, and its error layers answer any ``Exception``; this
    passes through them (their ``finally`` blocks run) as cancellation does.
    """


class BodyDeadline:
    """The ``receive`` of one request with a body, timed until the body is complete.

    Args:
        receive: the server's ``receive``.
        started: when the request started, ``time.perf_counter()`` seconds.
        seconds: ``body_timeout``: the whole body must arrive within this many seconds of
            ``started`` (> 0).

    Calling it returns the next ASGI message, as ``receive`` does.

    Raises:
        BodyDeadlinePassed: the body was not complete by the deadline (the waiting ``receive``
            was cancelled).
    """

    __slots__ = ("_done", "_receive", "_seconds", "_started")

    def __init__(self, receive: Receive, started: float, seconds: float) -> None:
        self._receive = receive
        self._started = started
        self._seconds = seconds
        self._done = False

    @property
    def done(self) -> bool:
        """Whether the body is complete or the client left (``receive`` is untimed now)."""
        return self._done

    async def __call__(self) -> Message:
        """The next ASGI message (see the class)."""
        if self._done:
            return await self._receive()
        waiting = self._receive()
        if isinstance(waiting, types.CoroutineType):
            try:
                pending = waiting.send(None)
            except StopIteration as ready:  # the message was there: no timer
                message: Message = ready.value
            else:
                message = await self._timed(_resumed(waiting, pending))
        else:  # another kind of awaitable: no step to take, time all of it
            message = await self._timed(waiting)
        if message["type"] != "http.request" or not message.get("more_body", False):
            self._done = True
        return message

    async def _timed(self, waiting: Awaitable[Message]) -> Message:
        left = self._seconds - (time.perf_counter() - self._started)
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout_at(loop.time() + left):
                return await waiting
        except TimeoutError:
            raise BodyDeadlinePassed from None


@types.coroutine
def _resumed(coro: Coroutine[Any, Any, Message], pending: Any) -> Generator[Any, Any, Message]:
    """The rest of ``await coro`` for a coroutine that was stepped once and suspended on
    ``pending`` (what ``yield from`` does after its first step, PEP 380): each value the task
    sends or throws in goes on to ``coro``, each it yields goes up to the task."""
    while True:
        try:
            sent = yield pending
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # handed on to coro, as yield from does
            try:
                pending = coro.throw(exc)
            except StopIteration as done:
                result: Message = done.value
                return result
        else:
            try:
                pending = coro.send(sent)
            except StopIteration as done:
                result = done.value
                return result
