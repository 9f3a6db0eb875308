"""Run the async client from Spark's synchronous calls, through anyio blocking portals.

A blocking portal (:func:`anyio.from_thread.start_blocking_portal`) is an event loop in a thread
of its own that synchronous code hands coroutines to. Every shape below owns one portal and
stops it when it is done, so no loop or thread outlives its user:

* **One call** (:func:`run_async`): a short-lived portal runs one coroutine under a timeout.
* **Executors** (:func:`iterate_async`): ``read(partition)`` is a synchronous generator run by a
  Python worker; each item of an async iterator is pulled through the generator's portal under
  a timeout, and the iterator is closed and the portal stopped when the generator ends, fails
  or is dropped by Spark. The client's background tasks (heartbeats) keep running between
  items, because the portal's loop never stops in between.
* **Driver** (:class:`PortalThread`): the stream reader lives for the whole query; it keeps a
  portal open, submits coroutines to it with a timeout, and stops it in ``stop()``.

The client itself stays on asyncio (the portal runs the asyncio backend).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from typing import TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal

from tubemq_aio.errors import ClientClosedError, RequestTimeoutError

__all__ = ["PortalThread", "iterate_async", "run_async"]

T = TypeVar("T")


def _wait(future: concurrent.futures.Future[T], timeout: float) -> T:
    """The result of a portal call, cancelling the call when ``timeout`` passes first."""
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise RequestTimeoutError(f"no result within {timeout:g} s") from None


def _call(portal: BlockingPortal, factory: Callable[[], Awaitable[T]], timeout: float) -> T:
    async def wrapped() -> T:
        return await factory()

    return _wait(portal.start_task_soon(wrapped), timeout)


def run_async(factory: Callable[[], Awaitable[T]], timeout: float) -> T:
    """Run one coroutine to completion on a portal of its own.

    Raises:
        RequestTimeoutError: it did not finish within ``timeout`` seconds (it is cancelled).
    """
    with start_blocking_portal("asyncio", name="tubemq-spark-call") as portal:
        return _call(portal, factory, timeout)


def iterate_async(
    factory: Callable[[], AsyncIterator[T]], timeout: float
) -> Generator[T, None, None]:
    """Drain an async iterator from synchronous code, through a portal owned by this generator.

    Args:
        factory: builds the async iterator (called inside the portal's loop).
        timeout: seconds allowed for each item.

    Yields:
        The items, in order.

    Raises:
        RequestTimeoutError: one item took longer than ``timeout``.
    """
    with start_blocking_portal("asyncio", name="tubemq-spark-read") as portal:

        async def build() -> AsyncIterator[T]:
            return factory()

        agen = _call(portal, build, timeout)
        try:
            while True:
                try:
                    item = _call(portal, agen.__anext__, timeout)
                except StopAsyncIteration:
                    return
                yield item
        finally:
            close = getattr(agen, "aclose", None)
            if close is not None:
                _call(portal, close, timeout)


class PortalThread:
    """A blocking portal kept open by the driver-side stream reader.

    Args:
        name: the name of the portal's thread.
    """

    def __init__(self, name: str) -> None:
        self._stack = contextlib.ExitStack()
        self._portal = self._stack.enter_context(start_blocking_portal("asyncio", name=name))
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._closed

    def call(self, factory: Callable[[], Awaitable[T]], timeout: float) -> T:
        """Run a coroutine on the portal and wait for its result.

        Raises:
            ClientClosedError: the portal was stopped.
            RequestTimeoutError: no result within ``timeout`` seconds (the coroutine is
                cancelled).
        """
        if self._closed:
            raise ClientClosedError("the driver event loop is stopped")
        return _call(self._portal, factory, timeout)

    def stop(self, cleanup: Callable[[], Awaitable[None]] | None, timeout: float) -> None:
        """Run ``cleanup`` on the portal (bounded by ``timeout``), then stop the portal (its
        loop cancels what is left and its thread ends). Idempotent."""
        if self._closed:
            return
        try:
            if cleanup is not None:
                self.call(cleanup, timeout)
        finally:
            self._closed = True
            self._stack.close()
