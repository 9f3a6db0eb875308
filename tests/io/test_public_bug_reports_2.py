"""Public bug reports against redis-py's asyncio client, tried against the gateway's Redis store
on a real redis-server (the FakeCluster ones of this sweep are in
``tests/fake/test_public_bug_reports_2.py``).

Looked at and judged not applicable here:

* redis/redis-py#2517 and aio-libs-abandoned/aioredis-py#1113 (a full pool raising "Too many
  connections" at once instead of waiting): the gateway's pools are ``BlockingConnectionPool``
  (a caller waits up to the store timeout for a free connection).
* redis/redis-py#3135 (the async cluster client failing at once when its pool is full): on a
  cluster the gateway's ``RoundTrips`` holds its round trips in flight below the per-node
  pool's size (``max_inflight``, a semaphore callers wait on), so the pool is never full.
* redis/redis-py#4128 (RESP3 with hiredis, the gateway's own setup, not recovering from a
  stale pooled connection: the next command failed): not redis-py's to recover here, the
  store's round trip sends a call again after a lost connection; the restart test below runs
  on that setup.
* fastapi/fastapi#1342, Kludex/starlette#854 and kennethreitz/responder#423 (a streaming
  response going on after its client left): the gateway's stream is its own ASGI response
  that watches ``receive`` for ``http.disconnect`` and stops its fetch task in a ``finally``
  (tests/io/test_gateway_stream.py, test_gateway_stream_abuse.py); a long poll likewise
  (tests/io/test_gateway_disconnect_uvicorn.py).
* sysid/sse-starlette#156 (a client gone before the generator's first step skipped the
  generator's ``finally``): the stream's clean-up is not in a generator; the response's own
  ``finally`` runs once the stream task is opened, whatever comes first.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import pytest
import redis.asyncio as aioredis

from tubemq_aio.gateway.engine.waker import Waker
from tubemq_aio.gateway.leases.lease_store import LeaseStore
from tubemq_aio.gateway.leases.redis_client import open_redis, parse_redis_url
from tubemq_aio.gateway.leases.redis_keys import WAKE_CHANNEL
from tubemq_aio.supervisor import Supervisor
from tubemq_aio.testing import RedisServer, wait_until

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(60)]

#: Cancels in a row, each of which would pin the pool's only connection if its release were cut.
ROUNDS = 3


def _calls(store: LeaseStore) -> dict[str, Callable[[], Awaitable[object]]]:
    """One store call per way the gateway takes a pooled connection: a script call it packs
    itself, a plain redis-py command, a redis-py pipeline."""
    return {
        "packed": lambda: store.set_rate("g", 0.0, 0),
        "command": store.booted,
        "pipeline": lambda: store.dump("g", "s"),
    }


@pytest.mark.parametrize("path", ["packed", "command", "pipeline"])
async def test_a_cancel_while_a_connection_goes_back_to_the_pool_does_not_lose_it(
    redis_server: RedisServer, path: str
) -> None:
    """redis/redis-py#4121 (fixed by #4123; #2995 is the same symptom): a task cancelled while
    it gave its connection back to a ``BlockingConnectionPool`` skipped the release, so the
    connection stayed "in use" forever and, after as many cancels as the pool had
    connections, every caller got "No connection available.". The release waits for the
    pool's lock when another caller holds it; a cancel arriving then (a gateway client that
    disconnects, a round trip's deadline) cut it. Here the test holds that lock while a store
    call on a pool of one connection has its answer, cancels the call, and lets go: the pool
    still serves, ``ROUNDS`` times over, for each way the gateway takes a connection. Before
    the fix the packed script call and the plain command lost the connection in the first
    round (the pipeline's reset already shields its release in redis-py 8)."""
    client = open_redis(parse_redis_url(redis_server.url), max_connections=1, timeout=5.0)
    store = LeaseStore(client, timeout=5.0)
    assert isinstance(client, aioredis.Redis)
    pool = client.connection_pool
    assert isinstance(pool, aioredis.BlockingConnectionPool)
    try:
        await store.boot(["g"], allow_init=True)
        call = _calls(store)[path]
        assert await call() is not None  # the scripts loaded, the pool's connection made
        for _ in range(ROUNDS):
            task = asyncio.ensure_future(call())
            # redis-py's own state: the call has taken the connection and not given it back.
            while not pool._in_use_connections:
                assert not task.done()
                await asyncio.sleep(0)
            async with pool._condition:  # the lock a release waits for
                await asyncio.sleep(0.05)  # the answer arrives; the call waits for the lock
                task.cancel()
                await asyncio.wait([task])
            with contextlib.suppress(asyncio.CancelledError):
                await task
            assert await store.ping(), f"the pool lost its connection ({path})"
        await wait_until(lambda: not pool._in_use_connections, 5, "the connection back in the pool")
    finally:
        await client.aclose()


#: A script that answers its argument after about 50 ms of work on the server.
_SLOW_ECHO = """
local t = redis.call('TIME')
local start = t[1] * 1000000 + t[2]
repeat
  t = redis.call('TIME')
until t[1] * 1000000 + t[2] - start > 50000
return ARGV[1]
"""


async def test_a_packed_call_cancelled_before_its_answer_does_not_shift_later_answers(
    redis_server: RedisServer,
) -> None:
    """redis/redis-py#2624 and #2665 (a command cancelled after it was written left its answer
    on the connection, and the next command on that connection read it: another caller's
    data), tried on the gateway's own packed script path (it writes and reads on a pooled
    connection itself, beside redis-py's command path that those reports fixed). A call
    cancelled while the server works on it, on a pool of one connection: the next call gets
    its own answer, each of ``ROUNDS`` times."""
    client = open_redis(parse_redis_url(redis_server.url), max_connections=1, timeout=5.0)
    store = LeaseStore(client, timeout=5.0)
    packed = store.packed
    assert packed is not None  # a single server's client takes the packed path
    try:
        sha = str(await client.script_load(_SLOW_ECHO))
        for i in range(ROUNDS):
            slow = asyncio.ensure_future(packed.call_one(sha, (), [f"cancelled-{i}"]))
            await asyncio.sleep(0.02)  # written; the server is working on it
            assert not slow.done()
            slow.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await slow
            assert await packed.call_one(sha, (), [f"next-{i}"]) == f"next-{i}".encode()
    finally:
        await client.aclose()


async def test_every_store_call_succeeds_right_after_a_redis_restart() -> None:
    """redis/redis-py#3034 (a ``BlockingConnectionPool`` did not recover after Redis was
    stopped and started) and aegra/aegra#505 (the first requests after the pooled connections
    went stale failed, on redis-py 8.1): a Redis restart leaves the pool's connections dead and
    the server without the gateway's scripts. The first attempt of a call met a dead
    connection and its one retry met ``NOSCRIPT``, which then counted as the retry's failure:
    the gateway answered "Redis lost the gateway scripts" (a non-retriable error) for every
    script call of the burst. Now each cause has its own retry; a burst of every kind of call
    right after the restart succeeds (this failed before, for the script calls)."""
    async with RedisServer() as server:
        client = open_redis(parse_redis_url(server.url), max_connections=4, timeout=5.0)
        store = LeaseStore(client, timeout=5.0)
        try:
            await store.boot(["g"], allow_init=True)

            async def burst() -> list[object]:
                calls = [c for c in _calls(store).values() for _ in range(4)]
                return await asyncio.gather(*(c() for c in calls), return_exceptions=True)

            assert not [o for o in await burst() if isinstance(o, BaseException)]
            await server.restart()
            failed = [o for o in await burst() if isinstance(o, BaseException)]
            assert not failed, failed
        finally:
            await client.aclose()


async def test_the_wake_listener_hears_wake_ups_again_after_a_redis_restart() -> None:
    """redis/redis-py#1572 and #1573, aio-libs-abandoned/aioredis-py#1130 (a pub/sub reader did
    not resubscribe after Redis was restarted: ``publish`` worked again, the subscriber heard
    nothing more) and redis/redis-py#1627 (a subscriber that silently stopped receiving): the
    gateway's wake listener, after a Redis restart, subscribes again, and a waiting long poll
    is woken by a published wake-up, not by its own timer."""
    async with RedisServer() as server:
        client = open_redis(parse_redis_url(server.url), max_connections=4, timeout=5.0)
        tasks = Supervisor("waker-restart")
        waker = Waker(client, max_waiters=8, tasks=tasks)
        try:
            await waker.start()

            async def woken_by_a_publish(key: str) -> int:
                """Wake-ups heard while a long poll on ``key`` waited, until it was woken (by
                them: its own timer is a minute away)."""
                waiting = asyncio.ensure_future(waker.wait(key, 60_000))
                heard = waker.received
                async with asyncio.timeout(20):
                    while waker.received == heard:  # published until the listener hears one
                        await client.publish(WAKE_CHANNEL, key)
                        await asyncio.sleep(0.1)
                    await waiting
                return waker.received - heard

            assert await woken_by_a_publish("g|before") >= 1
            await server.restart()
            with contextlib.suppress(Exception):  # the first publish may meet a dead connection
                await client.publish(WAKE_CHANNEL, "g|none")
            assert await woken_by_a_publish("g|after") >= 1
        finally:
            await waker.close()
            await tasks.close()
            await client.aclose()
