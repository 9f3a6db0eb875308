"""Run the async client from Spark's synchronous calls.

Two shapes, one per side of a query:

* **Executors** (:func:`iterate_async`): ``read(partition)`` is a synchronous generator run by a
  Python worker. It gets an event loop of its own on the calling thread; each item of an async
  generator is pulled with ``run_until_complete`` under a timeout, and the generator, the
  loop's pending tasks and the loop itself are closed when the generator ends, fails or is
  dropped by Spark. (The client's background tasks run only while an item is being pulled;
  reads are short, so heartbeats are not starved.)
* **Driver** (:class:`LoopThread`): the stream reader lives for the whole query in one Python
  worker; it owns a daemon thread running an event loop, submits coroutines to it with a
  timeout, and stops it in ``stop()``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TypeVar

from tubemq_aio.errors import ClientClosedError, RequestTimeoutError

__all__ = ["LoopThread", "iterate_async", "run_async"]

T = TypeVar("T")


def _finish(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is left on ``loop``, let it unwind, and close the loop."""
    try:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()


def run_async(factory: Callable[[], Awaitable[T]], timeout: float) -> T:
    """Run one coroutine to completion on a fresh event loop of the calling thread.

    Raises:
        RequestTimeoutError: it did not finish within ``timeout`` seconds.
    """
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(_bounded(factory(), timeout))
    finally:
        _finish(loop)


async def _bounded(awaitable: Awaitable[T], timeout: float) -> T:
    try:
        async with asyncio.timeout(timeout):
            return await awaitable
    except TimeoutError:
        raise RequestTimeoutError(f"no result within {timeout:g} s") from None


def iterate_async(factory: Callable[[], AsyncIterator[T]], timeout: float) -> Iterator[T]:
    """Drain an async iterator from synchronous code, on an event loop owned by this generator.

    Args:
        factory: builds the async iterator (called inside the loop).
        timeout: seconds allowed for each item.

    Yields:
        The items, in order.

    Raises:
        RequestTimeoutError: one item took longer than ``timeout``.
    """
    loop = asyncio.new_event_loop()
    agen: AsyncIterator[T] | None = None
    try:

        async def build() -> AsyncIterator[T]:
            return factory()

        agen = loop.run_until_complete(build())
        while True:
            try:
                item = loop.run_until_complete(_bounded(agen.__anext__(), timeout))
            except StopAsyncIteration:
                return
            yield item
    finally:
        close = getattr(agen, "aclose", None)
        if close is not None:
            try:
                loop.run_until_complete(_bounded(close(), timeout))
            finally:
                _finish(loop)
        else:
            _finish(loop)


class LoopThread:
    """An event loop in a daemon thread, owned by the driver-side stream reader.

    Args:
        name: the thread's name.
    """

    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._closed = False
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    @property
    def closed(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._closed

    def call(self, factory: Callable[[], Awaitable[T]], timeout: float) -> T:
        """Run a coroutine on the loop thread and wait for its result.

        Raises:
            ClientClosedError: the loop was stopped.
            RequestTimeoutError: no result within ``timeout`` seconds (the coroutine is
                cancelled).
        """
        if self._closed:
            raise ClientClosedError("the driver event loop is stopped")

        async def wrapped() -> T:
            return await factory()

        future = asyncio.run_coroutine_threadsafe(wrapped(), self._loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise RequestTimeoutError(f"no result within {timeout:g} s") from None

    def stop(self, cleanup: Callable[[], Awaitable[None]] | None, timeout: float) -> None:
        """Run ``cleanup`` on the loop (bounded by ``timeout``), then stop and join the thread.

        Idempotent.
        """
        if self._closed:
            return
        try:
            if cleanup is not None:
                self.call(cleanup, timeout)
        finally:
            self._closed = True

            async def drain() -> None:
                tasks = [
                    t
                    for t in asyncio.all_tasks()
                    if t is not asyncio.current_task() and not t.done()
                ]
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

            with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
                asyncio.run_coroutine_threadsafe(drain(), self._loop).result(timeout)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)
            if not self._thread.is_alive():
                self._loop.close()
