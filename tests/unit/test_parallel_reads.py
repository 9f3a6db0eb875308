"""Per-partition locks and the bounded concurrency of a time search (issue 34), no broker.

:class:`KeyedLocks` keeps calls on one key in turn and lets different keys run at once;
:func:`search_offsets` searches at most ``concurrency`` partitions at a time. Both are checked by
counting who is inside at once while each step yields to the loop, not by timing.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from tubemq_aio.consumer._cb_models import PositionedRead
from tubemq_aio.consumer._keyed_locks import KeyedLocks
from tubemq_aio.consumer._time import search_offsets
from tubemq_aio.consumer.config import ConsumerConfig
from tubemq_aio.errors import ConfigError, ServerError
from tubemq_aio.models import Message

WHEN = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


class Inside:
    """Counts the tasks inside a section and the most there at once."""

    def __init__(self) -> None:
        self.now = 0
        self.most = 0

    async def visit(self, steps: int = 5) -> None:
        self.now += 1
        self.most = max(self.most, self.now)
        try:
            for _ in range(steps):
                await asyncio.sleep(0)
        finally:
            self.now -= 1


async def test_one_key_in_turn_different_keys_at_once() -> None:
    locks: KeyedLocks[str] = KeyedLocks()
    same, apart = Inside(), Inside()

    async def on(key: str, inside: Inside) -> None:
        async with locks.hold(key):
            await inside.visit()

    await asyncio.gather(*(on("a", same) for _ in range(4)))
    await asyncio.gather(*(on(k, apart) for k in "abcd"))
    assert same.most == 1
    assert apart.most == 4
    assert len(locks) == 0  # dropped once nobody holds or waits


async def test_a_waiter_cancelled_leaves_the_lock_usable() -> None:
    locks: KeyedLocks[str] = KeyedLocks()
    gate = asyncio.Event()

    async def holder() -> None:
        async with locks.hold("k"):
            await gate.wait()

    first = asyncio.create_task(holder())
    await asyncio.sleep(0)
    waiter = asyncio.create_task(holder())
    await asyncio.sleep(0)
    assert locks.locked("k")
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    gate.set()
    await first
    assert len(locks) == 0
    assert not locks.locked("k")
    async with locks.hold("k"):  # still usable
        assert locks.locked("k")


class Reader:
    """A positioned reader whose every partition ends at offset 0 (one read per search)."""

    def __init__(self, fail: str | None = None) -> None:
        self.inside = Inside()
        self.read_keys: list[str] = []
        self.fail = fail

    async def read_at(self, partition_key: str, offset: int) -> PositionedRead:
        self.read_keys.append(partition_key)
        await self.inside.visit()
        if partition_key == self.fail:
            raise ServerError(500, f"refused {partition_key}")
        message: tuple[Message, ...] = ()
        return PositionedRead(partition_key, message, 0, 0, 0)

    async def read_next(self, partition_key: str, offset: int) -> PositionedRead:
        return await self.read_at(partition_key, offset)


@pytest.mark.parametrize(("concurrency", "most"), [(1, 1), (3, 3), (8, 5)])
async def test_a_search_reads_at_most_concurrency_partitions_at_once(
    concurrency: int, most: int
) -> None:
    reader = Reader()
    keys = [f"1:t:{i}" for i in range(5)]
    found = await search_offsets(reader, dict.fromkeys(keys, WHEN), UTC, 10.0, concurrency)
    assert reader.inside.most == most
    assert list(found) == keys  # in the order asked, whatever order they finished in
    assert sorted(reader.read_keys) == keys  # each partition searched once


async def test_the_first_failure_is_raised_and_the_other_searches_end() -> None:
    reader = Reader(fail="1:t:1")
    keys = [f"1:t:{i}" for i in range(6)]
    with pytest.raises(ServerError, match="refused 1:t:1"):
        await search_offsets(reader, dict.fromkeys(keys, WHEN), UTC, 10.0, 3)
    await asyncio.sleep(0)
    assert reader.inside.now == 0  # nothing still reading after the call returned
    assert len(reader.read_keys) < len(keys)


@pytest.mark.parametrize("bad", [0, -1, 1025, 2.5, True, "8", None])
def test_time_search_concurrency_is_checked(bad: object) -> None:
    fields: dict[str, Any] = {"masters": "127.0.0.1:8715", "group": "grp", "topics": ["t"]}
    with pytest.raises(ConfigError, match="time_search_concurrency"):
        ConsumerConfig(**fields, time_search_concurrency=bad)  # type: ignore[arg-type]
    assert ConsumerConfig(**fields).time_search_concurrency == 8
