"""A killed group member on FakeCluster: the survivor takes its partitions over without a storm.

The master forgets the dead member after ``client_timeout`` while the broker keeps its partition
registrations until ``registration_timeout``: in between, the master offers the dead member's
partitions to the survivor and the broker refuses them (410). The fake master hands a member at
most one event per balance period, as the real master's balance cycle does, and the consumer
starts at most one event per ``rebalance_min_interval`` whatever the master does; together they
keep the survivor's heartbeats and broker registers to a handful a second.
"""

from __future__ import annotations

import time

import pytest

from tests.support.fake_helpers import group_consumer
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, wait_until
from tubemq_aio.testing._fake_master import Member
from tubemq_aio.testing._fake_store import Registration

HEARTBEAT = Method.MASTER_CONSUMER_HEARTBEAT
BROKER_REGISTER = Method.BROKER_CONSUMER_REGISTER
CLIENT_TIMEOUT = 2.5  # seconds the master keeps a silent member (the survivor beats every 1 s)
WINDOW = 3.0  # seconds between the master forgetting the dead member and the broker doing so
DEAD = "dead-member"


def _plant_dead_member(cluster: FakeCluster, group: str, partitions: list[int]) -> None:
    """A member that registered and then died: known to the master and holding ``partitions``
    at broker 1, never heard from again."""
    now = time.monotonic()
    held = {(1, "demo", p) for p in partitions}
    cluster.master.groups.setdefault(group, {})[DEAD] = Member(
        DEAD, frozenset({"demo"}), now, held=held
    )
    broker = cluster.brokers[0]
    for p in partitions:
        broker.registrations[(group, "demo", p)] = Registration(DEAD, now)


@pytest.mark.parametrize(
    ("balance_period", "min_interval", "most_per_second"),
    [
        (1.0, 0.0, 3.0),  # the master's pacing alone
        (0.0, 0.5, 5.0),  # a master that never paces: the client's bound alone
    ],
)
async def test_a_killed_member_causes_no_heartbeat_storm(
    balance_period: float, min_interval: float, most_per_second: float
) -> None:
    async with FakeCluster(
        topics={"demo": 4},
        client_timeout=CLIENT_TIMEOUT,
        registration_timeout=CLIENT_TIMEOUT + WINDOW,
        balance_period=balance_period,
    ) as cluster:
        _plant_dead_member(cluster, "g1", [1, 3])
        async with group_consumer(cluster, "g1", rebalance_min_interval=min_interval) as survivor:
            # The dead member sorts first and holds what the balancer gives the survivor: the
            # survivor gets its half once the master forgot the dead member, then the broker
            # refuses it the other half (410) for the window.
            await wait_until(lambda: len(survivor.assignment()) == 2, 10, "the free half")
            beats, registers = cluster.requests(HEARTBEAT), cluster.requests(BROKER_REGISTER)
            started = time.monotonic()
            await wait_until(lambda: len(survivor.assignment()) == 4, 20, "the takeover")
            took = time.monotonic() - started
            beats = cluster.requests(HEARTBEAT) - beats
            registers = cluster.requests(BROKER_REGISTER) - registers
        assert took > WINDOW - 1.5  # the broker held the partitions for the window
        assert beats / took < most_per_second, (beats, took)
        assert registers / took < 2 * most_per_second, (registers, took)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_a_bad_balance_period_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="balance_period"):
        FakeCluster(topics={"demo": 1}, balance_period=bad)
