"""RedisServer: a real redis-server child process (start, kill, restart with AOF, flush, stop)."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis
import redis.exceptions

from tubemq_aio.testing import RedisServer, RedisServerError, ToolNotFoundError
from tubemq_aio.testing._process import pid_alive


async def test_kill_restart_keeps_acknowledged_writes_and_flushall_loses_them() -> None:
    async with RedisServer() as server:
        assert server.running
        assert server.url == f"redis://127.0.0.1:{server.port}/0"
        client = aioredis.Redis.from_url(server.url)
        try:
            assert await client.set("k", "v")
            proc = server._proc
            assert proc is not None
            assert proc.pid is not None
            await server.kill()
            assert not server.running
            assert not pid_alive(proc.pid)
            with pytest.raises(redis.exceptions.ConnectionError):
                await client.get("k")
            port = server.port
            await server.restart()
            assert server.port == port
            assert await client.get("k") == b"v"  # appendfsync always: nothing lost
            await server.flushall()
            assert await client.get("k") is None
        finally:
            await client.aclose()
        data_dir = server.data_dir
    assert not server.running
    assert not data_dir.exists()
    await server.stop()  # idempotent


async def test_missing_binary_is_a_typed_error() -> None:
    with pytest.raises(ToolNotFoundError):
        async with RedisServer(binary="no-such-redis-server-binary"):
            pass


async def test_bad_option_fails_fast_with_log_tail() -> None:
    server = RedisServer(extra_args=("--no-such-option", "1"), start_timeout=10)
    with pytest.raises(RedisServerError) as info:
        await server.start()
    assert "exited" in str(info.value)
    assert not server.running
    await server.stop()


async def test_cancelled_start_leaves_no_process() -> None:
    server = RedisServer()
    task = asyncio.create_task(server.start())
    await asyncio.sleep(0)
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await server.stop()
    assert not server.running


def test_invalid_timeout() -> None:
    with pytest.raises(ValueError, match="start_timeout"):
        RedisServer(start_timeout=float("nan"))
