"""The fidelity scenarios (``tests/support/fidelity.py``) on FakeCluster, set up like the real
test cluster (two brokers, three partitions per broker in one store, a 2 s balance cycle) but
with shorter member and registration timeouts; ``tests/integration/test_fidelity.py`` runs the
same scenarios on the real cluster."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.support import fidelity
from tubemq_aio.testing import FakeCluster

TOPICS = ("fa", "fb", "fc")
MEMBER_TIMEOUT = 6.0  # > the members' 2 s heartbeat, as 30 s is on the real cluster
REGISTRATION_TIMEOUT = 9.0  # the broker outlasts the master by 3 s (35 s vs 30 s for real)
BALANCE_PERIOD = 2.0
#: The fake's stand-in for the real broker's offset-file delay (seconds): commits older than
#: this survive a crash; the crash loses those of the last half of it.
OFFSETS_PERSISTED = 1.0
#: Seconds a member is watched for messages it must not get: the fake delivers within one
#: fetch round, well inside this even on a loaded machine.
QUIET_PERIOD = 3.0


@pytest_asyncio.fixture
async def target() -> AsyncIterator[fidelity.Target]:
    async with FakeCluster(
        topics=dict.fromkeys(TOPICS, 3),
        brokers=2,
        client_timeout=MEMBER_TIMEOUT,
        registration_timeout=REGISTRATION_TIMEOUT,
        balance_period=BALANCE_PERIOD,
    ) as cluster:

        async def restart(broker_id: int) -> None:
            await cluster.stop_broker(broker_id)
            await cluster.start_broker(broker_id)

        async def crash(broker_id: int) -> None:
            await cluster.stop_broker(broker_id)
            await cluster.start_broker(
                broker_id, lose_newest=10**6, lose_offsets=OFFSETS_PERSISTED / 2
            )

        yield fidelity.Target(
            master_addr=cluster.master_addr,
            brokers=2,
            partitions=3,
            restart_broker=restart,
            crash_broker=crash,
            offsets_persisted=OFFSETS_PERSISTED,
            registration_timeout=REGISTRATION_TIMEOUT,
            balance_period=BALANCE_PERIOD,
            name="fake",
            quiet_period=QUIET_PERIOD,
        )


async def test_scenarios_on_the_fake(
    target: fidelity.Target, caplog: pytest.LogCaptureFixture
) -> None:
    a, b, c = TOPICS

    async def cheap_ones() -> None:
        await fidelity.offsets_and_lag(target, b)
        await fidelity.consume_from_cases(target, c)
        await fidelity.filters(target, a)

    await asyncio.gather(fidelity.member_killed(target, a, caplog), cheap_ones())


async def test_broker_restart_on_the_fake(target: fidelity.Target) -> None:
    await fidelity.broker_restarted(target, TOPICS[0])


async def test_refused_commits_on_the_fake(target: fidelity.Target) -> None:
    await fidelity.commits_refused(target, TOPICS[0])


async def test_fetch_beyond_the_end_on_the_fake(target: fidelity.Target) -> None:
    await fidelity.fetch_beyond_end(target, TOPICS[0])


async def test_a_fresh_member_after_a_lost_tail_on_the_fake(target: fidelity.Target) -> None:
    await fidelity.fresh_member_after_lost_tail(target, TOPICS[0])


async def test_a_fresh_member_after_a_refilled_tail_on_the_fake(target: fidelity.Target) -> None:
    await fidelity.fresh_member_after_refilled_tail(target, TOPICS[0])
