"""Leak check: 1 000 start/close cycles of each client against the fake cluster (``make unit``:
a share of them, tests/support/examples.py), half of them with a cancellation injected at a
random await of ``start()`` and of ``close()``; afterwards the process has exactly the tasks and
file descriptors it had before."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable

import pytest

from tests.support.examples import examples
from tests.support.leak_checks import live_tasks, open_fds, wait_released
from tubemq_aio import ClientBalancedConsumer, Consumer, Producer, TubeMQError
from tubemq_aio.testing import FakeCluster

CYCLES = examples(1_000)
Client = Producer | Consumer | ClientBalancedConsumer


async def _steps(rng: random.Random) -> None:
    """Let the client run for a random while: a few loop iterations, or a few milliseconds
    (long enough for some round trips to the fake cluster)."""
    if rng.random() < 0.5:
        for _ in range(rng.randrange(8)):
            await asyncio.sleep(0)
    else:
        await asyncio.sleep(rng.uniform(0, 0.005))


async def _cancelled_cycle(client: Client, rng: random.Random) -> bool:
    """One cycle with both calls cancelled part-way; True if ``start()`` got to finish."""
    start = asyncio.ensure_future(client.start())
    await _steps(rng)
    start.cancel()
    started = False
    with contextlib.suppress(asyncio.CancelledError, TubeMQError):
        await start
        started = True
    close = asyncio.ensure_future(client.close())
    await _steps(rng)
    close.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await close
    await client.close()  # a cancelled close is finished by the next one
    return started


CLIENTS: dict[str, Callable[[str], Client]] = {
    "producer": lambda m: Producer(m, topics=["demo"]),
    "consumer": lambda m: Consumer(m, group="leak", topics=["demo"]),
    "client-balanced consumer": lambda m: ClientBalancedConsumer(
        m, group="leakcb", topics=["demo"], source_count=1, node_id=0
    ),
}


@pytest.mark.parametrize("name", sorted(CLIENTS))
async def test_start_close_cycles_leave_nothing_behind(name: str) -> None:
    rng = random.Random(name)
    async with FakeCluster(topics={"demo": 2}) as cluster:
        make = CLIENTS[name]
        # One warm-up cycle: imports, caches and the loop's own lazily created state.
        client = make(cluster.master_addr)
        await client.start()
        await client.close()
        await asyncio.sleep(0.1)
        tasks_before, fds_before = live_tasks(), open_fds()
        completed = 0
        for i in range(CYCLES):
            client = make(cluster.master_addr)
            if i % 2:
                completed += await _cancelled_cycle(client, rng)
            else:
                await client.start()
                await client.close()
        await wait_released(fds_before, tasks_before, timeout=10)
        # The cancellations hit both before and after start() could finish.
        assert 0 < completed < CYCLES // 2
        registers = sum(cluster.requests(m) for m in (1, 4, 20))
        assert registers > CYCLES // 2
