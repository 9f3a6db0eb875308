"""RedisSentinelSet and RedisClusterSet: real replicated Redis on loopback, failed over by a
SIGKILL of a primary; a write acknowledged before the kill and replicated survives it. Their
``wait_failover`` ends in a typed timeout, stops at once when cancelled and serves two waiters."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.sentinel import Sentinel

from tests.support.leak_checks import live_tasks, open_fds, wait_released
from tubemq_aio.errors import ConfigError
from tubemq_aio.testing import (
    RedisClusterSet,
    RedisSentinelSet,
    RedisServer,
    RedisServerError,
    redis_cluster,
    redis_sentinel,
    wait_until,
)
from tubemq_aio.testing._process import pid_alive

#: Kills Redis primaries or replicas: run by `make test`, left out of `make unit` (see Makefile).
pytestmark = pytest.mark.failover


async def test_sentinel_set_promotes_the_replica_after_a_primary_crash() -> None:
    async with RedisSentinelSet() as redis_set:
        assert redis_set.url.startswith("redis+sentinel://127.0.0.1:")
        assert redis_set.url.endswith("/mymaster/0")
        old = await redis_set.primary()
        assert await redis_set.sentinel_primary_port() == old.port
        sentinel = Sentinel([("127.0.0.1", p) for p in redis_set.sentinel_ports])  # type: ignore[no-untyped-call]
        client = sentinel.master_for("mymaster")
        try:
            assert await client.set("k", "v")
            assert await client.execute_command("WAIT", 1, 5000) == 1  # the replica has it
            killed = await redis_set.kill_primary()
            assert killed is old
            assert not old.running
            # two waiters at once (two tasks) see the same failover
            new, same = await asyncio.gather(
                redis_set.wait_failover(old), redis_set.wait_failover(old)
            )
            assert new is not old
            assert same is new
            assert await redis_set.sentinel_primary_port() == new.port

            async def readable() -> bool:
                try:
                    return bool(await client.get("k") == b"v")
                except Exception:
                    return False

            await wait_until(readable, timeout=30, what="the promoted primary serving the key")
        finally:
            await client.aclose()
            for sentinel_client in sentinel.sentinels:  # not closed by the client's aclose
                await sentinel_client.aclose()
        root = redis_set.data_dir
    assert not root.exists()  # a clean exit removes the directory


async def test_cluster_set_serves_hash_tags_and_fails_a_slot_over() -> None:
    key = "tgw:{g:orders}:cfg"
    async with RedisClusterSet() as cluster:
        assert cluster.url.startswith("redis+cluster://127.0.0.1:")
        assert len(await cluster.primaries()) == 3
        assert await cluster.slot_of(key) == await cluster.slot_of("tgw:{g:orders}:c:st")
        client = RedisCluster(host="127.0.0.1", port=cluster.servers[0].port)
        try:
            await client.hset(key, "boot", "1")
            owner = await cluster.owner_of(key)
            plain = aioredis.Redis(port=owner.port)
            try:
                assert await plain.execute_command("WAIT", 1, 5000) == 1  # type: ignore[no-untyped-call]
            finally:
                await plain.aclose()
            killed = await cluster.kill_primary_of(key)
            assert killed is owner
            assert not killed.running
            new, same = await asyncio.gather(
                cluster.wait_failover(key, killed), cluster.wait_failover(key, killed)
            )
            assert new is not killed
            assert same is new

            async def readable() -> bool:
                try:
                    return bool(await client.hget(key, "boot") == b"1")
                except Exception:
                    return False

            await wait_until(readable, timeout=30, what="the new owner serving the slot")
        finally:
            await client.aclose()


class CountedQueries:
    """Counts the Redis queries a set's module sends (each a connection of its own)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, module: Any) -> None:
        """Wrap ``module.query``."""
        self.sent = 0
        real = module.query

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.sent += 1
            return await real(*args, **kwargs)

        monkeypatch.setattr(module, "query", counted)


async def check_a_wait_without_failover(
    wait: Callable[[float], Coroutine[Any, Any, RedisServer]], queries: CountedQueries
) -> None:
    """With no failover under way, ``wait`` ends in its typed timeout; cancelled while it polls,
    it ends at once and leaves no task and no connection behind; a bad timeout is typed."""
    with pytest.raises(RedisServerError, match=r"failover did not happen within 0\.3 s"):
        await wait(0.3)
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(ConfigError, match="timeout"):
            await wait(bad)
    fds_before, tasks_before = open_fds(), live_tasks()
    waiting = asyncio.create_task(wait(60.0))
    polled = queries.sent + 3
    await wait_until(lambda: queries.sent >= polled, 10, "the wait polled a few times")
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await wait_released(fds_before, tasks_before)


async def test_sentinel_wait_failover_times_out_typed_and_stops_when_cancelled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    queries = CountedQueries(monkeypatch, redis_sentinel)
    async with RedisSentinelSet() as redis_set:
        primary = await redis_set.primary()
        await check_a_wait_without_failover(
            lambda timeout: redis_set.wait_failover(primary, timeout), queries
        )
        assert await redis_set.primary() is primary  # nothing changed under the waits


async def test_cluster_wait_failover_times_out_typed_and_stops_when_cancelled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = "tgw:{g:orders}:cfg"
    queries = CountedQueries(monkeypatch, redis_cluster)
    async with RedisClusterSet() as cluster:
        owner = await cluster.owner_of(key)
        await check_a_wait_without_failover(
            lambda timeout: cluster.wait_failover(key, owner, timeout), queries
        )
        assert await cluster.owner_of(key) is owner


def spawned_pids(redis_set: RedisSentinelSet | RedisClusterSet) -> list[int]:
    """The process ids of every Redis node (and sentinel) the set has spawned so far."""
    procs = [s._proc for s in redis_set.servers]
    if isinstance(redis_set, RedisSentinelSet):
        procs += redis_set._sentinels
    return [p.pid for p in procs if p is not None and p.pid is not None]


@pytest.mark.parametrize("kind", [RedisSentinelSet, RedisClusterSet])
async def test_a_start_cancelled_half_way_leaves_no_process(
    kind: type[RedisSentinelSet] | type[RedisClusterSet],
) -> None:
    """``async with`` entered and cancelled once the first node runs: every node spawned so
    far is stopped and the set's directory removed."""
    redis_set = kind()

    async def enter() -> None:
        async with redis_set:
            raise AssertionError("the start was to be cancelled")

    starting = asyncio.create_task(enter())
    await wait_until(
        lambda: any(s.running for s in redis_set.servers), 60, "the set's first node running"
    )
    root = redis_set.data_dir
    pids = spawned_pids(redis_set)
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    assert pids
    assert not any(pid_alive(pid) for pid in pids)
    assert redis_set.servers == []
    assert not root.exists()


PIDS: list[int] = []


async def fail_inside(redis_set: RedisSentinelSet) -> None:
    """Start the set, note its server pids, and fail inside the ``async with``."""
    async with redis_set:
        PIDS.extend(s._proc.pid for s in redis_set.servers if s._proc and s._proc.pid)
        raise RuntimeError("boom")


async def test_a_failing_body_keeps_the_logs_and_bad_settings_are_typed() -> None:
    with pytest.raises(ValueError, match="down_after_ms"):
        RedisSentinelSet(down_after_ms=5)
    with pytest.raises(ValueError, match="node_timeout_ms"):
        RedisClusterSet(node_timeout_ms=0)
    for bad in ("", "two words", "line\nbreak"):  # it goes into the sentinels' config file
        with pytest.raises(ValueError, match="printable, without spaces"):
            RedisSentinelSet(sentinel_password=bad)
    with pytest.raises(RedisServerError, match="never started"):
        _ = RedisSentinelSet().url
    redis_set = RedisSentinelSet()
    with pytest.raises(RuntimeError, match="boom"):
        await fail_inside(redis_set)
    kept = redis_set.kept_dir
    assert kept is not None
    assert (kept / "sentinel-0" / "sentinel.log").exists()
    assert all(not pid_alive(pid) for pid in PIDS)
    shutil.rmtree(kept)
