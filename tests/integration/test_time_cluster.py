"""Consuming from a point in time on the real cluster (docs/protocol/time.md): three bursts of
messages two ``msg_time`` minutes apart; starting at each pause yields exactly the later
bursts, through every SDK entry point."""

from __future__ import annotations

import asyncio
import time

from tests.support.time_bursts import produce_bursts, read_to_end
from tubemq_aio import ClientBalancedConsumer, Consumer
from tubemq_aio.testing import LocalCluster

HEARTBEAT = 2.0


async def test_time_entry_points_yield_exactly_the_later_bursts(
    cluster: LocalCluster, topic: str
) -> None:
    bursts = await produce_bursts(cluster.master_addr, topic)
    kw = {"topics": [topic], "heartbeat_interval": HEARTBEAT}
    async with ClientBalancedConsumer(cluster.master_addr, group="time_cb", **kw) as c:  # type: ignore[arg-type]
        keys = [m.partition_key for m in await c.partitions()]
        for when, later in ((bursts.before, -1), (bursts.pauses[0], 0), (bursts.pauses[1], 1)):
            started = time.monotonic()
            offsets = await c.offsets_for_times(dict.fromkeys(keys, when))
            took = time.monotonic() - started
            got: list[bytes] = []
            for key, offset in offsets.items():
                assert offset is not None, key
                got.extend(await read_to_end(c, key, offset))
            assert sorted(got) == sorted(bursts.later(later)), when
            assert took < 10, took
        after = await c.offsets_for_times(dict.fromkeys(keys, bursts.after))
        assert set(after.values()) == {None}
    # consume_from=datetime: the client-balanced consumer connects at the time ...
    async with ClientBalancedConsumer(
        cluster.master_addr,
        group="time_cb2",
        consume_from=bursts.pauses[0],
        **kw,  # type: ignore[arg-type]
    ) as c:
        for key in keys:
            await c.connect(key)
        want = bursts.later(0)
        got = []
        while len(got) < len(want):
            batch = await asyncio.wait_for(c.getmany(timeout=1.0), 10)
            async with batch:
                got.extend(m.body for m in batch)
        assert sorted(got) == sorted(want)
    # ... and the server-balanced consumer starts each partition there.
    async with Consumer(
        cluster.master_addr,
        group="time_g",
        consume_from=bursts.pauses[1],
        **kw,  # type: ignore[arg-type]
    ) as g:
        want = bursts.later(1)
        got = []
        async with asyncio.timeout(30):
            while len(got) < len(want):
                batch = await g.getmany(timeout=1.0)
                async with batch:
                    got.extend(m.body for m in batch)
        assert sorted(got) == sorted(want)
