"""Master calls go round the master list until their deadline (issue 30, fault 1).

During a master failover every master answers "standby" until one is elected; those answers take
milliseconds, so a register or heartbeat that tried each master once failed long before the
election ended. Now a register at start keeps trying for the time ``register_attempts`` Java-paced
attempts take, and a heartbeat for its ``rpc_timeout``.
"""

from __future__ import annotations

import asyncio

import pytest

from tubemq_aio import ClientBalancedConsumer, Consumer, Producer, StandbyMasterError
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault

STANDBY = Fault.exception("org.apache.inlong.tubemq.corerpc.exception.StandbyException", "standby")
ELECTION = 1.2

pytestmark = pytest.mark.timeout(60)


def _client(
    kind: str, addr: str, **options: object
) -> Producer | Consumer | ClientBalancedConsumer:
    if kind == "producer":
        return Producer(addr, topics=["demo"], **options)  # type: ignore[arg-type]
    if kind == "consumer":
        return Consumer(addr, group="grp", topics=["demo"], **options)  # type: ignore[arg-type]
    return ClientBalancedConsumer(addr, group="grp", topics=["demo"], **options)  # type: ignore[arg-type]


_REGISTER = {
    "producer": Method.MASTER_PRODUCER_REGISTER,
    "consumer": Method.MASTER_CONSUMER_REGISTER,
    "client-balanced": Method.MASTER_CONSUMER_REGISTER_V2,
}


@pytest.mark.parametrize("kind", sorted(_REGISTER))
async def test_start_waits_out_a_master_election(kind: str) -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        rule = cluster.inject(_REGISTER[kind], STANDBY, times=None)
        asyncio.get_running_loop().call_later(ELECTION, cluster.clear_faults)
        client = _client(kind, cluster.master_addr)
        loop = asyncio.get_running_loop()
        began = loop.time()
        try:
            await asyncio.wait_for(client.start(), 10)
            assert loop.time() - began >= ELECTION - 0.1
            assert 3 <= rule.hits <= 40  # paced rounds, not a spin and not one round
        finally:
            await client.close()


@pytest.mark.parametrize("kind", sorted(_REGISTER))
async def test_one_register_attempt_still_fails_at_once(kind: str) -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        cluster.inject(_REGISTER[kind], STANDBY, times=None)
        client = _client(kind, cluster.master_addr, register_attempts=1)
        loop = asyncio.get_running_loop()
        began = loop.time()
        try:
            with pytest.raises(StandbyMasterError):
                await asyncio.wait_for(client.start(), 10)
            assert loop.time() - began < 1.0
        finally:
            await client.close()


async def test_a_producer_heartbeat_waits_out_an_election() -> None:
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        Producer(cluster.master_addr, topics=["demo"]) as producer,
    ):
        session = producer._session
        assert session is not None
        cluster.inject(Method.MASTER_PRODUCER_HEARTBEAT, STANDBY, times=None)
        asyncio.get_running_loop().call_later(ELECTION, cluster.clear_faults)
        await asyncio.wait_for(session.heartbeat(), 10)
        assert session.heartbeats_failed == 0
