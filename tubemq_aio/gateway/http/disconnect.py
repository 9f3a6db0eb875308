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

__all__ = ["client_disconnected", "run_unless_disconnected"]

_T = TypeVar("_T")
#: ``receive`` answers that are not ``http.disconnect`` tolerated before the watch gives up
#: (a server that keeps answering something else must not turn the watch into a busy loop).
_MAX_OTHER_MESSAGES = 8


async def client_disconnected(receive: Receive) -> bool:
    """True once the client disconnected; False if the server will not say (watch ends)."""
    for _ in range(_MAX_OTHER_MESSAGES):
        message = await receive()
        if message["type"] == "http.disconnect":
            return True
    return False


def _said_gone(watch: asyncio.Future[bool]) -> bool:
    return not watch.cancelled() and watch.exception() is None and watch.result()


def _cancelling() -> bool:
    """Whether this request's own task is being cancelled (e.g. the server shuts down)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def _abandon(abandon: Callable[[_T], Awaitable[None]], result: _T) -> None:
    with contextlib.suppress(Exception):
        await asyncio.shield(abandon(result))


async def run_unless_disconnected(
    receive: Receive,
    work: Coroutine[Any, Any, _T],
    abandon: Callable[[_T], Awaitable[None]],
) -> tuple[_T | None, bool]:
    """Run ``work`` while watching the client; cancel it when the client disconnects first.

    The watch is one task blocked in ``receive`` and a done-callback (no polling, no extra
    wait per request): the fast path costs one task next to the work's own.

    Args:
        receive: the request's ASGI ``receive`` (its body must have been read already).
        work: the coroutine serving the request.
        abandon: called with ``work``'s result when the result has nobody to go to: the
            client left, or this request was cancelled, while ``work`` was finishing anyway
            (e.g. to release a lease it took). Cancellation does not interrupt it.

    Returns:
        ``(result, False)`` when ``work`` finished while the client was there; ``(None, True)``
        when the client left (``work`` was cancelled and has finished its own cleanup).

    Raises:
        Exception: whatever ``work`` raised while the client was still there.
        asyncio.CancelledError: this request was cancelled (``work`` was cancelled with it).
    """
    job = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(client_disconnected(receive))
    gone = False

    def client_left(done: asyncio.Future[bool]) -> None:
        nonlocal gone
        if _said_gone(done):
            gone = True
            job.cancel()  # a no-op once it finished: its result is abandoned below

    watch.add_done_callback(client_left)
    try:
        result = await job  # a cancel of this request is passed on to the job
    except asyncio.CancelledError:
        if gone and not _cancelling():
            return None, True
        raise
    except Exception:
        if gone:  # an error nobody will read (e.g. a failed release on the way out)
            return None, True
        raise
    finally:
        watch.remove_done_callback(client_left)
        watch.cancel()
    gone = gone or (watch.done() and _said_gone(watch))  # it left as the work finished
    if gone or _cancelling():
        await _abandon(abandon, result)
        if not gone:
            raise asyncio.CancelledError
        return None, True
    return result, False
