"""Shared pieces of the consume-engine tests on a fake or real cluster: a started service,
two broadcast clients reading at once (each must get every message), the lag once the
trailing index records were scanned, and the wait for the engine tasks that give the leases of
cancelled fetches back."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.engine.data import ConsumeSettings, FetchQuery, LagReport
from tubemq_aio.gateway.engine.fetch_attempt import ANSWER_TASK
from tubemq_aio.gateway.engine.service import ConsumeService


@contextlib.asynccontextmanager
async def running_service(
    masters: str, redis_url: str, *groups: GroupSpec, **settings: Any
) -> AsyncIterator[ConsumeService]:
    """A started :class:`ConsumeService` on an initialised store, closed after."""
    service = ConsumeService(
        ConsumeSettings(
            masters=masters, redis=redis_url, groups=groups, allow_init=True, **settings
        )
    )
    await service.start()
    try:
        yield service
    finally:
        await service.close()


async def drain(
    service: ConsumeService, group: str, client_id: str, want: set[str], got: set[str]
) -> set[str]:
    """Fetch and ack as ``client_id`` into ``got`` until every value of ``want`` came (or 200
    fetches); a body is its value, optionally padded with dots."""
    for _ in range(200):
        if want <= got:
            break
        outcome = await service.fetch(
            FetchQuery(group, client_id=client_id, wait_ms=500, lease_ms=60_000, max_messages=10)
        )
        if outcome.status != "ok":
            continue
        assert outcome.lease is not None
        got |= {m.body.decode().split(".")[0] for m in outcome.messages}  # padding cut off
        assert await service.settle(outcome.lease.key, "ack") == "acked"
    return got


async def two_clients(service: ConsumeService, group: str, values: list[str]) -> None:
    """Client B reads the first two thirds alone, then A and B read at once (B ahead, so a
    commit answer of B's read would move A's booking past messages A never got); each must
    have seen every value."""
    b: set[str] = set()
    await drain(service, group, "B", set(values[: 2 * len(values) // 3]), b)
    want = set(values)
    a, _ = await asyncio.gather(
        drain(service, group, "A", want, set()), drain(service, group, "B", want, b)
    )
    assert sorted(want - a) == [], "client A lost messages"
    assert sorted(want - b) == [], "client B lost messages"


async def drained_lag(service: ConsumeService, group: str, timeout: float = 30.0) -> LagReport:
    """The lag of ``group`` once it is 0, fetching (nothing is left to deliver) meanwhile.

    The partitions of a broker store share one index, so a partition read to its last message
    still lags by the records of the store's other partitions appended after it, until a fetch
    scans them (an empty scan commits at once): on a real broker and on ``FakeCluster`` alike.

    Raises:
        AssertionError: a fetch delivered messages, or the lag stayed above 0 for ``timeout`` s.
    """
    async with asyncio.timeout(timeout):
        while (lag := await service.lag(group)).total_lag_bytes:
            out = await service.fetch(FetchQuery(group, client_id=None, wait_ms=200))
            assert out.status != "ok", out
    return lag


async def cancelled_fetch(service: ConsumeService, query: FetchQuery, turns: int) -> None:
    """A fetch of ``query`` cancelled after ``turns`` loop turns; a lease it still returned is
    released (its batch comes again).

    Raises:
        AssertionError: the cancelled fetch did not end within 10 s.
    """
    task = asyncio.ensure_future(service.fetch(query))
    for _ in range(turns):
        await asyncio.sleep(0)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=10)
    assert done, f"a fetch cancelled after {turns} loop turns did not end in 10 s"
    if not task.cancelled() and (lease := task.result().lease) is not None:
        await service.settle(lease.key, "release")


def answer_tasks(service: ConsumeService) -> list[asyncio.Task[Any]]:
    """The engine tasks that wait for a cancelled fetch's broker call and then give its lease
    back (:data:`~tubemq_aio.gateway.engine.fetch_attempt.ANSWER_TASK`); their leases show as
    held until they end."""
    return [t for t in service.tasks.tasks if t.get_name().endswith(f"-{ANSWER_TASK}")]


async def answers_settled(service: ConsumeService, timeout: float = 10.0) -> None:
    """Wait until every :func:`answer_tasks` task of ``service`` ended (its lease given back,
    or left to lapse), at most ``timeout`` s. Call it once no fetch runs (a fetch cancelled
    from now on may start another).

    Raises:
        AssertionError: one still ran after ``timeout`` s.
    """
    waiting = answer_tasks(service)
    if waiting:
        _, late = await asyncio.wait(waiting, timeout=timeout)
        assert not late, f"{len(late)} cancelled fetch(es) still wait for the broker"
