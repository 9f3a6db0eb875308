"""The wake listener cancelled at every step of its way (on a real redis-server) ends cancelled
and leaves nothing behind: no task, no subscription, no connection.

On Python 3.11 redis-py's command write awaits ``asyncio.wait_for``, which drops a cancel that
meets the write's completion (``gateway/leases/cancel_guard.py``); the listener awaits its
subscribe and each read through ``keeping_cancel``. A cancel it lost would leave the task
listening: the test cancels the task itself, without :meth:`Waker.close`'s stop flag, so only
the cancel can end it. Wake messages are published all along, so cancels also land while one is
read and handed on.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Literal

import pytest
import pytest_asyncio
import redis.asyncio as aioredis

from tubemq_aio.gateway.engine.waker import Waker
from tubemq_aio.gateway.leases.redis_client import open_redis, parse_redis_url
from tubemq_aio.gateway.leases.redis_keys import WAKE_CHANNEL
from tubemq_aio.supervisor import Supervisor
from tubemq_aio.testing import RedisServer

#: Loop turns after which the listener is cancelled: 0 (before its first await) to well after
#: it subscribed and read messages.
STEPS = 120
#: Seconds a cancelled listener may take to end; one that lost its cancel never does.
END_WITHIN = 5.0
#: The scope the published wake messages name.
KEY = "g|s"


@pytest_asyncio.fixture
async def admin(redis_server: RedisServer) -> AsyncIterator[aioredis.Redis]:
    """A plain client of the server that reads its subscriptions and client list (one call at a
    time: one connection)."""
    client = aioredis.Redis.from_url(redis_server.url)
    try:
        yield client
    finally:
        await client.aclose()


async def _publishing(url: str, stop: asyncio.Event) -> None:
    """Publish a wake message each loop turn or so on a client of its own, until ``stop`` is
    set (not until cancelled: redis-py's publish can lose the cancel too, and the loop would
    run on)."""
    client = aioredis.Redis.from_url(url)
    try:
        while not stop.is_set():
            await client.publish(WAKE_CHANNEL, KEY)
            await asyncio.sleep(0)
    finally:
        await client.aclose()


async def _eventually(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Wait up to :data:`END_WITHIN` seconds for ``check`` to hold (the server notices a
    closed connection on its own time)."""
    deadline = time.monotonic() + END_WITHIN
    while not await check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.005)


def _dead_url() -> str:
    """A redis URL on a loopback port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"redis://127.0.0.1:{port}/0"


async def _unsubscribed(admin: aioredis.Redis) -> bool:
    """Whether the server has no subscriber on the wake channel."""
    [(_, subscribers)] = await admin.pubsub_numsub(WAKE_CHANNEL)
    return bool(subscribers == 0)


async def _cancel_after(
    url: str, step: int, how: Literal["cancel", "close"], admin: aioredis.Redis | None = None
) -> Waker:
    """Start a listener on ``url``, let it run ``step`` loop turns, stop it ``how`` and check it
    ended cancelled with no task left and, with ``admin``, no subscription left (before its
    client closes the connections of its pool); returns it (its ``received`` count tells how
    far it got)."""
    client = open_redis(parse_redis_url(url), max_connections=4, timeout=5.0)
    tasks = Supervisor("waker-cancel")
    waker = Waker(client, max_waiters=8, tasks=tasks)
    try:
        await waker.start()
        [task] = tasks.tasks
        for _ in range(step):
            await asyncio.sleep(0)
        if how == "cancel":
            task.cancel()  # no stop flag: only the cancel can end the loop
            await asyncio.wait({task}, timeout=END_WITHIN)
        else:
            await waker.close()
        assert task.done(), f"the listener cancelled after {step} loop turns did not end"
        assert task.cancelled(), f"the listener stopped after {step} loop turns ran to its end"
        assert tasks.tasks == []
        if admin is not None:
            await _eventually(lambda: _unsubscribed(admin), f"subscribed after {step} turns")
        return waker
    finally:
        await tasks.close()
        await client.aclose()


@pytest.mark.parametrize("how", ["cancel", "close"])
async def test_a_listener_cancelled_at_any_step_ends_and_leaves_nothing(
    redis_server: RedisServer, admin: aioredis.Redis, how: Literal["cancel", "close"]
) -> None:
    async def clients() -> int:
        return len(await admin.client_list())

    baseline = await clients()  # the admin client alone
    stop = asyncio.Event()
    publisher = asyncio.ensure_future(_publishing(redis_server.url, stop))
    heard = 0
    try:
        for step in range(STEPS):
            waker = await _cancel_after(redis_server.url, step, how, admin)
            heard += waker.received > 0
    finally:
        stop.set()
        async with asyncio.timeout(END_WITHIN):
            await publisher

    # Some cancels came after the listener was subscribed and reading messages.
    assert heard > 0

    async def disconnected() -> bool:
        return await clients() == baseline

    await _eventually(disconnected, "a cancelled listener's connection is still open")


async def test_a_listener_retrying_a_dead_redis_ends_when_cancelled_at_any_step() -> None:
    url = _dead_url()
    for step in range(20):
        waker = await _cancel_after(url, step, "cancel")
        assert waker.received == 0
