"""The fidelity scenarios (``tests/support/fidelity.py``) on the real cluster; the same ones run
on FakeCluster in ``tests/fake/test_fake_fidelity.py``, so a difference between the two shows
up as one of them failing.

The member-kill scenario waits for the broker's registration timeout (35 s on the test
cluster); the cheap scenarios run meanwhile on topics of their own, so the file adds about
that much to the run. The broker restart runs last, alone (it would end the dead member's
registrations early).
"""

from __future__ import annotations

import asyncio

import pytest

from tests.support import fidelity
from tubemq_aio.testing import LocalCluster

#: The test cluster's broker and master settings (``tubemq_aio.testing._config``).
REGISTRATION_TIMEOUT = 35.0
BALANCE_PERIOD = 2.0
#: Seconds after which a broker has written a group's committed offsets to its offset file
#: (2.4.0: every 5 s to the file cache, ``offsetStgCacheFlushMs``, then a file sync every 6 s,
#: ``offsetStgFileSyncMs``), with a margin.
OFFSETS_PERSISTED = 11.5


def _target(cluster: LocalCluster) -> fidelity.Target:
    async def restart(broker_id: int) -> None:
        node = next(b for b in cluster.brokers if b.broker_id == broker_id)
        await node.kill()
        await node.start()

    return fidelity.Target(
        master_addr=cluster.master_addr,
        brokers=len(cluster.brokers),
        partitions=3,
        restart_broker=restart,
        crash_broker=restart,  # a SIGKILL; the topic is new, so nothing was flushed yet
        offsets_persisted=OFFSETS_PERSISTED,
        registration_timeout=REGISTRATION_TIMEOUT,
        balance_period=BALANCE_PERIOD,
        name="real",
    )


async def test_scenarios_on_the_real_cluster(
    cluster: LocalCluster,
    topic: str,
    second_topic: str,
    third_topic: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    target = _target(cluster)

    async def cheap_ones() -> None:
        await fidelity.offsets_and_lag(target, second_topic)
        await fidelity.consume_from_cases(target, third_topic)
        await fidelity.filters(target, topic)  # its messages are unfiltered noise to the kill

    await asyncio.gather(fidelity.member_killed(target, topic, caplog), cheap_ones())


async def test_broker_restart_on_the_real_cluster(cluster: LocalCluster, topic: str) -> None:
    await fidelity.broker_restarted(_target(cluster), topic)


async def test_refused_commits_on_the_real_cluster(cluster: LocalCluster, topic: str) -> None:
    await fidelity.commits_refused(_target(cluster), topic)


async def test_fetch_beyond_the_end_on_the_real_cluster(cluster: LocalCluster, topic: str) -> None:
    await fidelity.fetch_beyond_end(_target(cluster), topic)


async def test_a_fresh_member_after_a_lost_tail_on_the_real_cluster(
    cluster: LocalCluster, topic: str
) -> None:
    await fidelity.fresh_member_after_lost_tail(_target(cluster), topic)


async def test_a_fresh_member_after_a_refilled_tail_on_the_real_cluster(
    cluster: LocalCluster, topic: str
) -> None:
    await fidelity.fresh_member_after_refilled_tail(_target(cluster), topic)
