"""Consuming from a point in time on the real cluster (docs/protocol/time.md): three bursts of
messages two ``msg_time`` minutes apart; starting at each pause yields exactly the later
bursts, through every entry point: both consumers, the CLI and the gateway's reset (the Spark
source's starting time is in test_spark_source.py)."""

from __future__ import annotations

import asyncio
import json
import shlex
import time
import uuid

from tests.support.cli_run import run_cli
from tests.support.time_bursts import produce_bursts, read_to_end
from tubemq_aio import ClientBalancedConsumer, Consumer
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.engine.data import ConsumeSettings, FetchQuery
from tubemq_aio.gateway.engine.service import ConsumeService
from tubemq_aio.testing import LocalCluster, RedisServer

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


async def test_cli_offset_from_and_reset_to_time(cluster: LocalCluster, topic: str) -> None:
    bursts = await produce_bursts(cluster.master_addr, topic, tag="cli")
    pause = bursts.pauses[0].isoformat()

    async def consumed(*args: str) -> list[bytes]:
        got = await asyncio.to_thread(
            run_cli,
            *shlex.split(f"consume --master {cluster.master_addr} --topic {topic}"),
            *args,
            "-e",
            "-q",
        )
        assert got.returncode == 0, got.stderr
        return [json.loads(line)["body"].encode() for line in got.stdout.splitlines()]

    assert sorted(await consumed("--partition", "all", "--offset", f"@{pause}")) == sorted(
        bursts.later(0)
    )
    # --from @TIME: a new group starts every partition at the time (-e: ends at the end).
    assert sorted(await consumed("--group", "time_from", "--from", f"@{pause}")) == sorted(
        bursts.later(0)
    )
    group = "time_reset"
    done = await asyncio.to_thread(
        run_cli,
        *shlex.split(
            f"reset --master {cluster.master_addr} --topic {topic} --group {group} --to-time"
        ),
        bursts.pauses[1].isoformat(),
        "-q",
    )
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.decode().splitlines()[1:]]
    assert len(rows) == len({r[0] for r in rows}) > 0
    # The group now starts at the third burst: read it back with the SDK.
    async with ClientBalancedConsumer(
        cluster.master_addr, group=group, topics=[topic], heartbeat_interval=HEARTBEAT
    ) as c:
        read: list[bytes] = []
        for row in rows:
            position = await c.connect(row[0])
            assert position.current_offset == int(row[3])
            await c.disconnect(row[0])
            read.extend(await read_to_end(c, row[0], int(row[3])))
    assert sorted(read) == sorted(bursts.later(1))


async def test_gateway_reset_to_time(cluster: LocalCluster, topic: str, redis: RedisServer) -> None:
    bursts = await produce_bursts(cluster.master_addr, topic, tag="gw")
    spec = GroupSpec(
        name=f"gw_{uuid.uuid4().hex[:10]}",
        topics=(topic,),
        mode="clustering",
        start="earliest",
        lease_ms=3000,
        lease_ms_min=500,
    )
    service = ConsumeService(
        ConsumeSettings(
            masters=cluster.master_addr,
            redis=redis.url,
            deployment=f"it-{uuid.uuid4().hex[:8]}",
            groups=(spec,),
            not_found_wait_ms=200,
            sync_interval=2.0,
            allow_init=True,
        )
    )
    await service.start()
    try:
        entries = await service.reset(spec.name, bursts.pauses[0])
        assert entries
        assert all(isinstance(e.new, int) for e in entries)
        want = bursts.later(0)
        got: list[bytes] = []
        async with asyncio.timeout(30):
            while len(got) < len(want):
                out = await service.fetch(FetchQuery(spec.name, client_id=None, wait_ms=500))
                if out.status == "ok" and out.lease is not None:
                    got.extend(m.body for m in out.messages)
                    assert await service.settle(out.lease.key, "ack") == "acked"
        assert sorted(got) == sorted(want)
    finally:
        await service.close()
