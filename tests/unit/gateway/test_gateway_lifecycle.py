"""One lifecycle for the consume engine and its housekeeper: start once, close once, and a
closed part (the pair, the housekeeper, the wake listener) never starts again."""

from __future__ import annotations

import pytest

from tests.support.gateway_fakes import FakeEngine
from tubemq_aio.errors import ClientClosedError
from tubemq_aio.gateway.app import EngineParts
from tubemq_aio.gateway.config.tables import GroupSpec, HousekeeperConfig
from tubemq_aio.gateway.engine.data import ConsumeSettings
from tubemq_aio.gateway.engine.service import ConsumeService
from tubemq_aio.gateway.engine.waker import Waker
from tubemq_aio.gateway.housekeeper.jobs import Housekeeper
from tubemq_aio.gateway.leases.redis_client import open_redis, parse_redis_url
from tubemq_aio.supervisor import Supervisor

NOWHERE = "redis://127.0.0.1:1/0"  # never connected: nothing here makes a round trip


class CountingEngine(FakeEngine):
    def __init__(self) -> None:
        super().__init__({"g1": "clustering"})
        self.starts = self.closes = 0

    async def start(self) -> None:
        self.starts += 1

    async def close(self) -> None:
        self.closes += 1


class FailingKeeper:
    def __init__(self) -> None:
        self.closed = False

    async def start(self) -> None:
        raise RuntimeError("no store")

    async def close(self) -> None:
        self.closed = True


async def test_the_engine_and_its_housekeeper_start_and_close_once() -> None:
    engine = CountingEngine()
    parts = EngineParts(engine)
    await parts.start()
    await parts.start()
    assert engine.starts == 1
    await parts.close()
    await parts.close()
    assert engine.closes == 1
    with pytest.raises(ClientClosedError):
        await parts.start()
    assert engine.starts == 1


async def test_a_housekeeper_that_fails_to_start_closes_the_engine_again() -> None:
    engine = CountingEngine()
    parts = EngineParts(engine, FailingKeeper())  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="no store"):
        await parts.start()
    assert (engine.starts, engine.closes) == (1, 1)


async def test_a_closed_housekeeper_and_wake_listener_do_not_start_again() -> None:
    group = GroupSpec(name="gg", topics=("t",))
    service = ConsumeService(ConsumeSettings(masters="127.0.0.1:1", redis=NOWHERE, groups=(group,)))
    keeper = Housekeeper(
        service.store, service.sessions, (group,), HousekeeperConfig(), replica="r", rpc_timeout=3
    )
    await keeper.close()
    with pytest.raises(ClientClosedError):
        await keeper.start()
    assert keeper.tasks.tasks == []
    client = open_redis(parse_redis_url(NOWHERE), max_connections=2, timeout=3.0)
    tasks = Supervisor("test-waker")
    waker = Waker(client, max_waiters=1, tasks=tasks)
    await waker.close()
    with pytest.raises(ClientClosedError):
        await waker.start()
    assert tasks.tasks == []
    await client.aclose()
    await service.close()
