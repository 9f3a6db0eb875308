"""Stop serving a request whose HTTP client went away (the long poll of a fetch).

uvicorn does not cancel a request's task when the client disconnects: a fetch waiting up to
30 s would keep its long-poll registration, and a batch leased for nobody would block its
partition until the lease expires. Once the body is read, the ASGI ``receive`` callable blocks
until the server sees the connection close and then answers ``http.disconnect`` (uvicorn,
Starlette's test client and httpx's ASGI transport all do), so a task awaiting it is told at
once, without polling.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from starlette.types import Receive

__all__ = ["run_unless_disconnected"]

_T = TypeVar("_T")
#: ``receive`` answers that are not ``http.disconnect`` tolerated before the watch gives up
#: (a server that keeps answering something else must not turn the watch into a busy loop).
_MAX_OTHER_MESSAGES = 8


async def _disconnected(receive: Receive) -> bool:
    """True once the client disconnected; False if the server will not say (watch ends)."""
    for _ in range(_MAX_OTHER_MESSAGES):
        message = await receive()
        if message["type"] == "http.disconnect":
            return True
    return False


def _said_gone(watch: asyncio.Future[bool]) -> bool:
    return watch.done() and not watch.cancelled() and watch.exception() is None and watch.result()


async def _drain(job: asyncio.Future[_T], abandon: Callable[[_T], Awaitable[None]]) -> None:
    """Wait for the cancelled ``job``; hand a result it returned anyway to ``abandon``."""
    await asyncio.wait({job})
    if job.cancelled() or job.exception() is not None:
        return  # an error nobody will read (e.g. a failed release on cancel)
    with contextlib.suppress(Exception):
        await abandon(job.result())


async def run_unless_disconnected(
    receive: Receive,
    work: Coroutine[Any, Any, _T],
    abandon: Callable[[_T], Awaitable[None]],
) -> tuple[_T | None, bool]:
    """Run ``work`` while watching the client; cancel it when the client disconnects first.

    Args:
        receive: the request's ASGI ``receive`` (its body must have been read already).
        work: the coroutine serving the request.
        abandon: called with ``work``'s result when the result has nobody to go to: the
            client left, or this request was cancelled, after ``work`` had finished (e.g. to
            release a lease it took). Cancellation does not interrupt it.

    Returns:
        ``(result, False)`` when ``work`` finished first; ``(None, True)`` when the client
        left first (``work`` was cancelled and has finished its own cleanup).

    Raises:
        Exception: whatever ``work`` raised while the client was still there.
    """
    job = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_disconnected(receive))
    try:
        await asyncio.wait({job, watch}, return_when=asyncio.FIRST_COMPLETED)
        gone = _said_gone(watch)
        if gone:
            job.cancel()  # a no-op when it finished at the same time
        await asyncio.wait({job})
    except asyncio.CancelledError:  # this request itself is cancelled: nobody reads the result
        job.cancel()
        await asyncio.shield(_drain(job, abandon))
        raise
    finally:
        watch.cancel()
    if gone:
        await asyncio.shield(_drain(job, abandon))
        return None, True
    return job.result(), False
