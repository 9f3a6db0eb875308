"""The gateway's shared TubeMQ session reopens after a failed start (e.g. a 425 at the master)
instead of answering "this consumer is closed" for ever."""

from __future__ import annotations

import asyncio

import pytest

from tubemq_aio import ServerError
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
