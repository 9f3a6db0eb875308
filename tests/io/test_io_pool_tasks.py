"""The pool's tasks belong to its Supervisor: connects, the sweeper and the reaper are named
under it, closing (also a cancelled close) leaves none behind, and a crash of the sweeper or
the reaper breaks the pool loudly instead of leaving calls without deadlines."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.support.echo_server import FakeServer, request_payload, unanswered_port
from tubemq_aio._io.pool import Address, ConnectionPool
from tubemq_aio._io.settings import TransportSettings
from tubemq_aio._io.sweeper import DeadlineSweeper
from tubemq_aio._supervisor import Supervisor
from tubemq_aio.errors import ClientClosedError, ConnectError, ConnectionLostError
from tubemq_aio.testing import wait_until

pytestmark = pytest.mark.timeout(30)


def pool_tasks(pool: ConnectionPool) -> list[asyncio.Task[Any]]:
    """Every task on the loop named after the pool's supervisor, still running."""
    prefix = pool.supervisor.owner + "-"
    return [t for t in asyncio.all_tasks() if t.get_name().startswith(prefix) and not t.done()]


async def test_connect_sweeper_and_reaper_run_under_the_pools_supervisor(
    server: FakeServer,
) -> None:
    pool = ConnectionPool(TransportSettings(connect_timeout=5.0, sweep_interval=0.01))
    with unanswered_port() as port:
        hanging = asyncio.create_task(pool.connection(Address("127.0.0.1", port)))
        await wait_until(lambda: len(pool.background_tasks) == 1, 5, "the connect task runs")
        names = sorted(t.get_name() for t in pool.background_tasks)
        assert names == [f"{pool.supervisor.owner}-connect-127.0.0.1:{port}"]
        await pool.connection(Address("127.0.0.1", server.port))
        names = sorted(t.get_name().rpartition("-")[2] for t in pool.background_tasks)
        assert names == ["127.0.0.1:" + str(port), "reaper", "sweeper"]
        assert sorted(pool_tasks(pool), key=id) == sorted(pool.background_tasks, key=id)
        await pool.close()
        with pytest.raises(ClientClosedError):
            await hanging
    assert pool_tasks(pool) == []


async def test_a_cancelled_close_leaves_no_task_behind(server: FakeServer) -> None:
    server.knobs.drop = True  # calls stay pending: the close has connections to fail
    pool = ConnectionPool(TransportSettings(connect_timeout=5.0, sweep_interval=0.01))
    conn = await pool.connection(Address("127.0.0.1", server.port))
    call = asyncio.create_task(conn.call(request_payload(b"p"), 30.0))
    with unanswered_port() as port:
        hanging = asyncio.create_task(pool.connection(Address("127.0.0.1", port)))
        await wait_until(lambda: len(pool.background_tasks) == 3, 5, "connect, sweeper, reaper")
        closing = asyncio.create_task(pool.close())
        await asyncio.sleep(0)  # the close has started and cancelled its tasks
        closing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await closing
        assert pool_tasks(pool) == []
        assert pool.background_tasks == []
        results = await asyncio.gather(call, hanging, return_exceptions=True)
    assert all(isinstance(r, ClientClosedError | ConnectionLostError) for r in results), results
    await pool.close()  # finishes what the cancelled close left (nothing but bookkeeping)
    assert pool.connections == {}
    assert pool_tasks(pool) == []


async def test_a_failed_connect_is_not_a_crash(settings: TransportSettings) -> None:
    """A refused connect is a ConnectError to the caller, and no crash of the pool's tasks."""
    probe = await FakeServer().start()
    port = probe.port
    await probe.stop()
    pool = ConnectionPool(settings)
    with pytest.raises(ConnectError):
        await pool.connection(Address("127.0.0.1", port))
    assert pool.supervisor.crashes == 0
    assert pool.supervisor.crash is None
    await pool.close()


async def test_a_crashed_reaper_breaks_the_pool_loudly(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    server.knobs.drop = True
    pool = ConnectionPool(TransportSettings(idle_timeout=0.05, sweep_interval=0.01))

    async def broken_reap(now: float) -> list[Address]:
        raise RuntimeError("reaper bug")

    monkeypatch.setattr(pool, "reap", broken_reap)
    conn = await pool.connection(Address("127.0.0.1", server.port))
    call = asyncio.create_task(conn.call(request_payload(b"p"), 30.0))
    await wait_until(lambda: pool.supervisor.crash is not None, 10, "the reaper crashed")
    name, exc = pool.supervisor.crash or ("", None)
    assert name.endswith("-reaper")
    assert isinstance(exc, RuntimeError)
    assert "crashed" in caplog.text
    with pytest.raises(ClientClosedError):  # pending calls fail at once, not at 30 s
        await call
    with pytest.raises(ClientClosedError, match="reaper bug") as info:
        await pool.connection(Address("127.0.0.1", server.port))
    assert info.value.__cause__ is exc
    await pool.close()
    assert pool_tasks(pool) == []


async def test_a_crashed_sweeper_is_recorded_by_its_supervisor() -> None:
    class Broken:
        next_deadline = 0.0

        def expire(self, now: float) -> None:
            raise RuntimeError("sweeper bug")

    supervisor = Supervisor("tubemq-test")
    sweeper = DeadlineSweeper(0.01, supervisor)
    sweeper.add(Broken())
    await wait_until(lambda: supervisor.crash is not None, 10, "the sweeper crashed")
    with pytest.raises(ClientClosedError, match="tubemq-test-sweeper crashed"):
        supervisor.raise_if_crashed()
    assert not sweeper.running
    await supervisor.close()
    with pytest.raises(ClientClosedError):
        DeadlineSweeper(0.01, supervisor).add(Broken())  # a closed owner starts nothing


async def test_a_shared_pool_keeps_its_tasks_until_the_last_client_lets_go(
    server: FakeServer,
) -> None:
    settings = TransportSettings(sweep_interval=0.01)
    first = ConnectionPool.shared(settings)
    second = ConnectionPool.shared(settings)
    assert first is second
    await first.connection(Address("127.0.0.1", server.port))
    await first.close()
    assert len(pool_tasks(first)) == 2  # the other client still holds it
    await second.close()
    assert pool_tasks(first) == []


async def test_a_connect_finishing_after_a_crash_is_not_handed_out(server: FakeServer) -> None:
    pool = ConnectionPool(TransportSettings(sweep_interval=0.01))
    waiter = asyncio.create_task(pool.connection(Address("127.0.0.1", server.port)))
    await asyncio.sleep(0)  # connection() has started the connect; a TCP connect takes longer
    assert [t.get_name().rpartition("-")[2] for t in pool.background_tasks] == [
        f"127.0.0.1:{server.port}"
    ]
    # What a crashed sweeper records, set while the connect is still on its way.
    pool.supervisor.crash = ("tubemq-pool-test-sweeper", RuntimeError("sweeper bug"))
    with pytest.raises(ClientClosedError, match="sweeper bug"):
        await waiter
    assert pool.connections == {}
    await pool.close()
    assert pool_tasks(pool) == []
