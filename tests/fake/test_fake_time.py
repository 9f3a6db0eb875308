"""Consuming from a point in time against FakeCluster (the real-cluster twin is
tests/integration/test_time_cluster.py)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from tests.support.fake_helpers import HEARTBEAT, drain
from tests.support.time_bursts import Bursts, produce_bursts, read_to_end
from tubemq_aio import ClientBalancedConsumer, Consumer
from tubemq_aio.errors import ConfigError, ConsumerConfigError, PartitionAlreadyConnectedError
from tubemq_aio.testing import FakeCluster


def _cb(cluster: FakeCluster, group: str, **kw: object) -> ClientBalancedConsumer:
    return ClientBalancedConsumer(
        cluster.master_addr,
        group=group,
        topics=["demo"],
        heartbeat_interval=HEARTBEAT,
        **kw,  # type: ignore[arg-type]
    )


async def _from_offsets(
    c: ClientBalancedConsumer, when: datetime
) -> tuple[list[bytes], dict[str, int | None]]:
    keys = [m.partition_key for m in await c.partitions()]
    offsets = await c.offsets_for_times(dict.fromkeys(keys, when))
    got: list[bytes] = []
    for key, offset in offsets.items():
        if offset is not None:
            got.extend(await read_to_end(c, key, offset))
    return got, offsets


async def test_offsets_for_times_yield_exactly_the_later_bursts() -> None:
    async with FakeCluster(topics={"demo": 3}) as cluster:
        bursts = await produce_bursts(cluster.master_addr, "demo")
        async with _cb(cluster, "t1") as c:
            for pause in (0, 1):
                got, _ = await _from_offsets(c, bursts.pauses[pause])
                assert sorted(got) == sorted(bursts.later(pause))
            got, offsets = await _from_offsets(c, bursts.before)
            assert sorted(got) == sorted(bursts.later(-1))
            _, offsets = await _from_offsets(c, bursts.after)
            assert set(offsets.values()) == {None}
            # The searched partitions were released again: connecting works.
            key = next(iter(offsets))
            await c.connect(key)
            with pytest.raises(PartitionAlreadyConnectedError):
                await c.offsets_for_times({key: bursts.before})


async def test_consume_from_time_both_consumers() -> None:
    async with FakeCluster(topics={"demo": 3}) as cluster:
        bursts: Bursts = await produce_bursts(cluster.master_addr, "demo")
        want = bursts.later(0)
        async with _cb(cluster, "t2", consume_from=bursts.pauses[0]) as c:
            for meta in await c.partitions():
                await c.connect(meta.partition_key)
            got = await drain(c, len(want), timeout=10)
        assert sorted(got) == sorted(want)
        async with Consumer(
            cluster.master_addr,
            group="t3",
            topics=["demo"],
            consume_from=bursts.pauses[1],
            heartbeat_interval=HEARTBEAT,
        ) as g:
            got = await drain(g, len(bursts.later(1)), timeout=15)
            assert sorted(got) == sorted(bursts.later(1))
            offsets = await g.offsets_for_times(dict.fromkeys(g.assignment(), bursts.pauses[0]))
            assert all(isinstance(v, int) for v in offsets.values())


async def test_a_group_too_long_for_its_planner_is_refused_naming_its_length() -> None:
    """A group of 920–927 characters is a valid group, but its time searches read with
    ``<group>_planner``, past the 927 of a consumer's group: they failed with an error about a
    group the user never named (and ``consume_from`` a time only at start). Now the user's
    group's length and the limit, before any request; 919 characters still searches."""
    when = datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(ConsumerConfigError, match=r"group name of 920 characters .* at most 919"):
        Consumer("127.0.0.1:1", group="g" * 920, topics=["t"], consume_from=when)
    async with FakeCluster(topics={"demo": 1}) as cluster:
        key = f"{cluster.brokers[0].broker_id}:demo:0"
        async with Consumer(cluster.master_addr, group="g" * 927, topics=["demo"]) as c:
            with pytest.raises(ConsumerConfigError, match="927 characters") as info:
                await c.offsets_for_times({key: when})
            assert "g" * 100 not in str(info.value)
        async with Consumer(cluster.master_addr, group="g" * 919, topics=["demo"]) as c:
            assert await c.offsets_for_times({key: when}) == {key: None}


@pytest.mark.parametrize("bad", [datetime(2026, 1, 1), "2026-01-01", 5])
async def test_naive_or_wrong_times_are_config_errors(bad: object) -> None:
    with pytest.raises(ConsumerConfigError):
        Consumer("127.0.0.1:1", group="gg", topics=["t"], consume_from=bad)  # type: ignore[arg-type]
    async with FakeCluster(topics={"demo": 1}) as cluster, _cb(cluster, "t4") as c:
        key = (await c.partitions())[0].partition_key
        with pytest.raises(ConfigError):
            await c.offsets_for_times({key: bad})  # type: ignore[dict-item]
        with pytest.raises(ConfigError):
            await c.offsets_for_times([key])  # type: ignore[arg-type]
        with pytest.raises(ConfigError):
            await c.offsets_for_times({key: datetime.now(UTC)}, timeout=float("nan"))


async def test_empty_request_cancelled_search_and_two_searches_at_once() -> None:
    async with FakeCluster(topics={"demo": 3}) as cluster:
        bursts = await produce_bursts(cluster.master_addr, "demo")
        async with _cb(cluster, "t5") as c:
            assert await c.offsets_for_times({}) == {}
            keys = [m.partition_key for m in await c.partitions()]
            task = asyncio.create_task(c.offsets_for_times(dict.fromkeys(keys, bursts.pauses[0])))
            await asyncio.sleep(0)  # cancelled at its first await
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # Two searches at once over the same partitions answer like one alone.
            one, two = await asyncio.gather(
                c.offsets_for_times(dict.fromkeys(keys, bursts.pauses[0])),
                c.offsets_for_times(dict.fromkeys(keys, bursts.pauses[1])),
            )
            alone = await c.offsets_for_times(dict.fromkeys(keys, bursts.pauses[1]))
            assert two == alone
            got: list[bytes] = []
            for key, offset in one.items():
                assert offset is not None
                got.extend(await read_to_end(c, key, offset))
            assert sorted(got) == sorted(bursts.later(0))
            # The partitions read stay usable: each connects for fetching.
            for key in keys:
                await c.connect(key)
