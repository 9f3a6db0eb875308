"""The gateway's shared TubeMQ session reopens after a failed start (e.g. a 425 at the master)
instead of answering "this consumer is closed" for ever."""

from __future__ import annotations

import asyncio

import pytest

from tubemq_aio import ConnectError, ServerError
from tubemq_aio.gateway.tubemq import tube_group
from tubemq_aio.gateway.tubemq.tube_group import TubeGroup, TubeReach
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault


async def test_session_reopens_after_a_refused_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tube_group, "_RESTART_MIN", 0.2)
    async with FakeCluster(topics={"t": 2}) as cluster:
        tube = TubeGroup(TubeReach(cluster.master_addr, "d"), group="gw-g", topics=["t"])
        try:
            rule = cluster.inject(
                Method.MASTER_CONSUMER_REGISTER_V2,
                Fault.error(425, "Inconsistency subscribe"),
                times=None,
            )
            with pytest.raises(ServerError) as first:
                await tube.start()
            assert first.value.err_code == 425
            hits = rule.hits
            # Within the backoff: the same error at once, no new register at the master.
            with pytest.raises(ServerError) as again:
                await tube.start()
            assert again.value is first.value
            assert rule.hits == hits
            cluster.clear_faults()
            await asyncio.sleep(0.3)  # past the 0.2 s backoff: a new session registers
            await tube.start()
            assert tube.started
            assert await tube.partitions(force=True)
        finally:
            await tube.close()


async def test_a_register_at_a_broker_that_stays_away_is_tried_once_after_the_first() -> None:
    """While a broker is down, the SDK tries a register that cannot reach it again until
    ``rpc_timeout``, so each fetch of its partitions waited that long (5 s by default) for its
    503. The first still waits (a broker restarting costs time, not an error); the next ones
    make one attempt and fail at once, until the broker is back."""
    async with FakeCluster(topics={"t": 1}) as cluster:
        tube = TubeGroup(
            TubeReach(cluster.master_addr, "d", rpc_timeout=3.0), group="gw-g", topics=["t"]
        )
        try:
            await tube.start()
            (key,) = await tube.partitions(force=True)
            await tube.register(key, 0)
            loop = asyncio.get_running_loop()
            broker_id = cluster.brokers[0].broker_id
            await cluster.stop_broker(broker_id)
            began = loop.time()
            with pytest.raises(ConnectError):
                await tube.register(key, 0)
            assert loop.time() - began >= 2.5  # tried again until rpc_timeout (3 s)
            for _ in range(3):
                began = loop.time()
                with pytest.raises(ConnectError):
                    await tube.register(key, 0)
                assert loop.time() - began < 2.5  # one attempt: at once, not rpc_timeout (3 s)
            await cluster.start_broker(broker_id)
            # Back: a register connects again once the pool's connect backoff allows.
            async with asyncio.timeout(15):
                while True:
                    try:
                        assert await tube.register(key, 0)
                        break
                    except ConnectError:
                        await asyncio.sleep(0.2)
        finally:
            await tube.close()


async def test_partition_metadata_while_the_masters_stay_away_answers_from_the_cache() -> None:
    """A metadata refresh that reaches no master tries them in rounds until ``rpc_timeout``
    and then answers from the cache; every fetch that refreshed while the cluster was down
    waited that long. After the first, one round over the masters, then the cache at once."""
    async with FakeCluster(topics={"t": 2}) as cluster:
        tube = TubeGroup(
            TubeReach(cluster.master_addr, "d", rpc_timeout=3.0), group="gw-m", topics=["t"]
        )
        try:
            await tube.start()
            keys = await tube.partitions(force=True)
            assert len(keys) == 2
            await cluster.stop()
            loop = asyncio.get_running_loop()
            began = loop.time()
            assert await tube.partitions(force=True) == keys
            assert loop.time() - began >= 2.5  # rounds until rpc_timeout (3 s)
            assert not tube.master_ok
            for _ in range(3):
                began = loop.time()
                assert await tube.partitions(force=True) == keys
                assert loop.time() - began < 2.5  # one round: at once, not rpc_timeout (3 s)
        finally:
            await tube.close()
