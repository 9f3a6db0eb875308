"""Shared pieces of the gateway's Redis failover tests: numbered messages, consumers that
spread their calls over several replicas and keep count, and 503 answers checked as retriable."""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from tubemq_aio import Producer
from tubemq_aio.gateway.engine.data import FetchQuery
from tubemq_aio.gateway.engine.service import ConsumeService
from tubemq_aio.gateway.errors import LeaseStaleError, StoreUnavailableError
from tubemq_aio.gateway.http.api_errors import api_error_for
from tubemq_aio.testing import wait_until


async def produce_numbered(masters: str, topic: str, count: int, start: int = 0) -> list[str]:
    """Send ``m<i>`` for i in [start, start + count) and return the bodies."""
    bodies = [f"m{i}" for i in range(start, start + count)]
    async with Producer(masters, topics=[topic]) as producer:
        for body in bodies:
            await producer.send(topic, body.encode())
    return bodies


def assert_retriable_503(exc: StoreUnavailableError) -> None:
    """What a client gets for ``exc``: 503 ``store_unavailable``, retriable."""
    mapped = api_error_for(exc)
    assert mapped is not None
    assert (mapped.status, mapped.code, mapped.retriable) == (503, "store_unavailable", True)


@dataclass
class Tally:
    """What consumers saw: deliveries per body, acks, 503s, stale acks, redelivered batches."""

    deliveries: Counter[str] = field(default_factory=Counter)
    acked: int = 0
    unavailable: int = 0
    stale: int = 0
    redelivered_batches: int = 0
    at_crash: int | None = None  # bodies delivered when the crash began

    @property
    def duplicates(self) -> int:
        """Deliveries beyond the first of each body."""
        return sum(n - 1 for n in self.deliveries.values())

    def skipped(self, bodies: Sequence[str]) -> list[str]:
        """The bodies never delivered."""
        return [b for b in bodies if b not in self.deliveries]


async def consume_until(
    replicas: Sequence[ConsumeService],
    group: str,
    bodies: Sequence[str],
    tally: Tally,
    *,
    offset: int = 0,
    max_messages: int = 10,
    lease_ms: int = 2000,
    deadline: float = 60.0,
    work_s: float = 0.0,
) -> None:
    """Fetch and ack, each call through the next replica, until every body was delivered;
    ``work_s`` is how long a client works on a batch before its ack.

    A 503 ``store_unavailable`` (Redis failing over) is checked as retriable and retried
    after a short pause; a 409 on an ack (the lease was lost with the old primary and granted
    again) is counted: the batch comes back.
    """
    want = set(bodies)
    turn = itertools.count(offset)
    async with asyncio.timeout(deadline):
        while not want <= set(tally.deliveries):
            service = replicas[next(turn) % len(replicas)]
            try:
                got = await service.fetch(
                    FetchQuery(
                        group,
                        client_id=None,
                        wait_ms=200,
                        lease_ms=lease_ms,
                        max_messages=max_messages,
                    )
                )
                if got.status != "ok" or got.lease is None:
                    await asyncio.sleep(0.02)
                    continue
                tally.deliveries.update(m.body.decode() for m in got.messages)
                if got.lease.redelivery:
                    tally.redelivered_batches += 1
                await asyncio.sleep(work_s)
                service = replicas[next(turn) % len(replicas)]
                await service.settle(got.lease.key, "ack")
                tally.acked += 1
            except StoreUnavailableError as exc:
                assert_retriable_503(exc)
                tally.unavailable += 1
                await asyncio.sleep(0.1)
            except LeaseStaleError:
                tally.stale += 1


async def consume_through_crash(
    replicas: Sequence[ConsumeService],
    group: str,
    bodies: Sequence[str],
    crash: Callable[[], Awaitable[object]],
    *,
    lease_ms: int,
    consumers: int = 3,
) -> Tally:
    """``consumers`` clients consume ``bodies`` through ``replicas`` (50 ms of work per
    batch, so the run outlasts the crash); once a third was delivered, ``crash()`` runs (kill a
    Redis primary, wait for the failover). Returns the tally once every body was delivered
    and the group's backlog is zero again (acks the failover lost were redelivered and acked).
    """
    tally = Tally()
    tasks = [
        asyncio.create_task(
            consume_until(replicas, group, bodies, tally, offset=i, lease_ms=lease_ms, work_s=0.05)
        )
        for i in range(consumers)
    ]
    await crash_mid_run(tasks, tally, bodies, crash)
    await drain_backlog(replicas[0], group, tally, lease_ms=lease_ms)
    return tally


async def crash_mid_run(
    tasks: Sequence[asyncio.Task[None]],
    tally: Tally,
    bodies: Sequence[str],
    crash: Callable[[], Awaitable[object]],
) -> None:
    """Once ``tasks`` (consumers counting into ``tally``) delivered a third of ``bodies``, run
    ``crash()`` and wait for the tasks to end (each bounds its own run); they are cancelled if
    anything fails."""
    try:
        await wait_until(lambda: len(tally.deliveries) >= len(bodies) // 3, 60, "a third delivered")
        tally.at_crash = len(tally.deliveries)
        await crash()
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def drain_backlog(
    service: ConsumeService, group: str, tally: Tally, *, lease_ms: int, deadline: float = 60.0
) -> None:
    """Fetch and ack until the group's backlog is zero: what a lost ack left behind comes
    back (once its lease expired) and is counted as a duplicate delivery."""
    async with asyncio.timeout(deadline):
        while (await service.lag(group)).total_lag_bytes:
            got = await service.fetch(
                FetchQuery(group, client_id=None, wait_ms=500, lease_ms=lease_ms)
            )
            if got.status == "ok" and got.lease is not None:
                tally.deliveries.update(m.body.decode() for m in got.messages)
                tally.redelivered_batches += bool(got.lease.redelivery)
                await service.settle(got.lease.key, "ack")
