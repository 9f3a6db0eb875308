"""RedisServer: a real redis-server child process (start, kill, restart with AOF, flush, stop)."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis
import redis.exceptions

from tubemq_aio.testing import RedisServer, RedisServerError, ToolNotFoundError
from tubemq_aio.testing import redis as redis_module
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


async def test_cancelled_start_leaves_no_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """A start cancelled while it waits for the server's first answer kills the process. The
    answer is held back, so the cancel finds the start still waiting however busy the machine
    (a cancel after a fixed sleep found the start finished on a loaded one)."""
    asked = asyncio.Event()

    async def unanswered(*args: object, **kwargs: object) -> None:
        asked.set()
        await asyncio.Event().wait()  # ended by the cancel below

    monkeypatch.setattr(redis_module, "command", unanswered)
    server = RedisServer()
    task = asyncio.create_task(server.start())
    await asyncio.wait_for(asked.wait(), 30)
    assert server._proc is not None
    pid = server._proc.pid
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not server.running
    assert pid is not None
    assert not pid_alive(pid)
    await server.stop()


def test_invalid_timeout() -> None:
    with pytest.raises(ValueError, match="start_timeout"):
        RedisServer(start_timeout=float("nan"))
    with pytest.raises(ValueError, match="start_timeout"):
        RedisServer(start_timeout="5")  # type: ignore[arg-type]  # a raw TypeError before


@pytest.mark.parametrize("bad", [5, "", "two words", "line\nbreak"], ids=repr)
def test_a_password_the_command_line_cannot_carry_is_refused(bad: object) -> None:
    # 5 failed the start with a raw TypeError; the others were taken, where a sentinel set
    # already refused them: one rule for both now.
    with pytest.raises(ValueError, match="password must be printable"):
        RedisServer(password=bad)  # type: ignore[arg-type]
