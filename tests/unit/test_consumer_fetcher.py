"""FetchEngine against an in-memory broker: backpressure, batch splitting, ack/nack, errors."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from tubemq_aio.consumer import Consumer
from tubemq_aio.consumer._astray import AstrayCalls
from tubemq_aio.consumer._broker import BrokerRpc
from tubemq_aio.consumer._fetcher import FetchEngine
from tubemq_aio.consumer._iterator import MessageStream
from tubemq_aio.consumer.batch import ConsumerStats
from tubemq_aio.consumer.config import ConsumerConfig
from tubemq_aio.errors import ClientClosedError
from tubemq_aio.protocol.consumer_meta import BrokerInfo, Partition
from tubemq_aio.protocol.consumer_replies import GetMessageResponse, OffsetResponse, RawMessage
from tubemq_aio.protocol.flow_control import FlowControlState
from tubemq_aio.protocol.message import checksum
from tubemq_aio.protocol.partitions import PartitionLeases

BROKER = BrokerInfo(1, "127.0.0.1", 8123)


def raw(i: int, *, bad_crc: bool = False, crc_delta: int = 1) -> RawMessage:
    """A message without attributes whose body is ``m{i}`` (``bad_crc``: its checksum is off
    by ``crc_delta``)."""
    body = f"m{i}".encode()
    return RawMessage(i, checksum(body) ^ (crc_delta if bad_crc else 0), body, 0)


def ok(messages: list[RawMessage]) -> GetMessageResponse:
    """A successful GetMessage answer."""
    return GetMessageResponse(True, 200, "OK", tuple(messages), 0, 280, 0, 0, False, False)


def error(code: int) -> GetMessageResponse:
    """A failed GetMessage answer."""
    return GetMessageResponse(False, code, "err", (), -1, -2, -1, None, False, False)


class FakeBroker:
    """Answers GetMessage from a script (default: 3 fresh messages) and records commits."""

    def __init__(self) -> None:
        self.astray = AstrayCalls(1.0)  # no call fails here: nothing is noted
        self.fetches: list[tuple[str, bool]] = []
        self.commits: list[tuple[str, bool]] = []
        self.script: list[GetMessageResponse] = []
        self._next = 0

    async def get_message(
        self, partition: Partition, *, last_pack_consumed: bool, esc_flow_ctrl: bool
    ) -> GetMessageResponse:
        self.fetches.append((partition.key.format(), last_pack_consumed))
        await asyncio.sleep(0)
        if self.script:
            return self.script.pop(0)
        self._next += 3
        return ok([raw(self._next - 3), raw(self._next - 2), raw(self._next - 1)])

    async def commit(self, partition: Partition, *, consumed: bool) -> OffsetResponse:
        self.commits.append((partition.key.format(), consumed))
        return OffsetResponse(True, 200, "OK", 28, 280)


def make(
    partitions: int = 1, **options: Any
) -> tuple[FetchEngine, FakeBroker, PartitionLeases, list[asyncio.Task[None]]]:
    """An engine with ``partitions`` held partitions of topic ``t`` and its fetch tasks."""
    config = ConsumerConfig(masters="127.0.0.1:8715", group="g1", topics=["t"], **options)  # type: ignore[arg-type]
    leases = PartitionLeases()
    loop = asyncio.get_running_loop()
    for i in range(partitions):
        leases.add(Partition(BROKER, "t", i), loop.time())
    broker = FakeBroker()
    engine = FetchEngine(
        config, leases, cast(BrokerRpc, broker), FlowControlState(), ConsumerStats(), loop.time
    )
    tasks = [loop.create_task(engine.run()) for _ in range(config.fetchers)]
    return engine, broker, leases, tasks


async def stop(engine: FetchEngine, tasks: list[asyncio.Task[None]]) -> None:
    """Close the engine and end its tasks."""
    engine.close()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_full_buffer_stops_fetching() -> None:
    """With every prefetch slot used and nobody reading, no further fetch is sent."""
    engine, broker, _, tasks = make(partitions=4, max_prefetch_batches=2, fetchers=3)
    await asyncio.sleep(0.05)
    assert len(broker.fetches) == 2
    assert engine.buffered == 2
    batch = await engine.get(None, 1)
    assert len(batch) == 3
    await asyncio.sleep(0.05)
    assert len(broker.fetches) == 3  # one slot freed, one more fetch
    await stop(engine, tasks)


async def test_split_batch_is_settled_once_all_parts_are() -> None:
    """``max_records`` splits a broker batch; the lease is confirmed after the last part."""
    engine, broker, leases, tasks = make()
    first = await engine.get(2, 1)
    assert [m.body for m in first] == [b"m0", b"m1"]
    assert await first.ack()
    assert broker.commits == []  # the rest of the batch is still out
    second = await engine.get(2, 1)
    assert [m.body for m in second] == [b"m2"]
    assert await second.nack()  # one part nacked: the whole lease is not consumed
    assert broker.commits == [("1:t:0", False)]
    assert not leases.in_use()
    third = await engine.get(None, 1)
    assert broker.fetches[-1] == ("1:t:0", False)
    assert third.partition_key == "1:t:0"
    await stop(engine, tasks)


async def test_ack_commits_and_next_fetch_carries_the_flag() -> None:
    """A local confirm sends no commit; the next fetch says lastPackConsumed=true."""
    engine, broker, _, tasks = make(confirm_in_local=True)
    async with await engine.get(None, 1) as batch:
        assert len(batch) == 3
    await engine.get(None, 1)
    assert broker.commits == []
    assert broker.fetches[:2] == [("1:t:0", False), ("1:t:0", True)]
    await stop(engine, tasks)


async def test_exception_in_async_with_nacks() -> None:
    """``async with batch`` rejects the batch when the block raises."""
    engine, broker, _, tasks = make()
    with pytest.raises(RuntimeError):
        async with await engine.get(None, 1):
            raise RuntimeError("boom")
    assert broker.commits == [("1:t:0", False)]
    await stop(engine, tasks)


async def test_error_codes_release_or_remove() -> None:
    """404 releases the partition with a wait; 411 removes it locally."""
    engine, broker, leases, tasks = make(partitions=1, msg_not_found_wait=0.2)
    broker.script = [error(404), error(411)]
    empty = await engine.get(None, 0.1)
    assert not empty
    assert len(broker.fetches) == 1  # resting 200 ms after the 404
    await asyncio.sleep(0.25)
    assert len(leases) == 0  # 411 after the rest: dropped
    await stop(engine, tasks)


async def test_crc_mismatch_at_rest_is_counted_and_dropped() -> None:
    """The same damage on two reads of one offset is at rest: dropped and counted, the rest
    delivered."""
    engine, broker, _, tasks = make()
    bad = ok([raw(0), raw(1, bad_crc=True), raw(2)])
    broker.script = [bad, bad]
    batch = await engine.get(None, 1)
    assert [m.body for m in batch] == [b"m0", b"m2"]
    assert engine.stats.crc_mismatches == 2
    assert engine.stats.crc_refetches == 1
    await stop(engine, tasks)


async def test_damage_on_the_way_is_never_taken_for_damage_at_rest() -> None:
    """Reads damaged differently each time, however many in a row, are read again: nothing is
    dropped (an attempt count would drop the message after a few unlucky reads)."""
    engine, broker, _, tasks = make()
    damaged = [ok([raw(0), raw(1, bad_crc=True, crc_delta=n), raw(2)]) for n in range(1, 7)]
    broker.script = [*damaged, ok([raw(0), raw(1), raw(2)])]
    batch = await engine.get(None, 10)
    assert [m.body for m in batch] == [b"m0", b"m1", b"m2"]
    assert engine.stats.crc_refetches == 6
    await stop(engine, tasks)


async def test_crc_mismatch_on_the_way_is_read_again() -> None:
    """A batch with a corrupt message is not confirmed but fetched again: nothing is lost."""
    engine, broker, _, tasks = make()
    broker.script = [ok([raw(0), raw(1, bad_crc=True), raw(2)]), ok([raw(0), raw(1), raw(2)])]
    batch = await engine.get(None, 1)
    assert [m.body for m in batch] == [b"m0", b"m1", b"m2"]
    assert engine.stats.crc_refetches == 1
    await stop(engine, tasks)


async def test_get_after_close_raises() -> None:
    """A closed engine refuses ``get`` and wakes waiters."""
    engine, _, leases, tasks = make(partitions=0)
    waiter = asyncio.ensure_future(engine.get(None, None))
    await asyncio.sleep(0.01)
    engine.close()
    with pytest.raises(ClientClosedError):
        await waiter
    assert len(leases) == 0
    await stop(engine, tasks)


async def test_message_iterator_auto_and_manual_ack() -> None:
    """``async for`` acks a batch when the loop moves past it; manual mode waits for commit."""
    engine, broker, _, tasks = make(partitions=2, confirm_in_local=False)

    async def getmany(*, max_records: int | None = None, timeout: float | None = None) -> Any:
        return await engine.get(max_records, timeout)

    auto = MessageStream(getmany, auto_ack=True, closed=lambda: False).iterate()
    first = [await auto.__anext__() for _ in range(4)]  # one whole batch and one message
    assert len({m.partition_key for m in first}) == 2
    assert broker.commits == [(first[0].partition_key, True)]

    stream = MessageStream(getmany, auto_ack=False, closed=lambda: False)
    manual = stream.iterate()
    for _ in range(3):  # a new batch of the first partition (the second is still out)
        await manual.__anext__()
    assert len(broker.commits) == 1  # fully yielded, but nothing acked without commit()
    assert await stream.commit() == 1
    assert len(broker.commits) == 2
    await stop(engine, tasks)


def consumer_over(engine: FetchEngine) -> Consumer:
    """A Consumer whose batches come from ``engine`` (started without a master)."""
    consumer = Consumer("127.0.0.1:1", group="g1", topics=["t"], confirm_in_local=False)
    consumer._engine = engine
    consumer._session = cast(Any, object())
    consumer._started = True
    consumer._loop = asyncio.get_running_loop()  # as start() records it
    return consumer


async def test_two_loops_over_one_consumer_never_share_or_orphan_a_batch() -> None:
    """Defect 6: each ``async for`` has its own iterator; two loops reading at once each get
    whole batches, every batch is acked, no partition stays leased."""
    engine, broker, leases, tasks = make(partitions=2, confirm_in_local=False)
    consumer = consumer_over(engine)
    assert consumer.__aiter__() is not consumer.__aiter__()
    seen: dict[str, list[bytes]] = {"a": [], "b": []}

    async def loop(name: str) -> None:
        async for message in consumer:
            seen[name].append(message.body)
            if len(seen[name]) == 6:
                return
            await asyncio.sleep(0)

    await asyncio.wait_for(asyncio.gather(loop("a"), loop("b")), 5)
    await asyncio.sleep(0.01)  # the loops' iterators are finalized
    bodies = seen["a"] + seen["b"]
    assert len(bodies) == len(set(bodies)) == 12  # nothing delivered twice, nothing lost
    assert len(broker.commits) == 4  # the 4 batches read were acked, none orphaned
    assert len(leases.in_use()) == engine.buffered  # every lease in use is a buffered fetch
    await stop(engine, tasks)


async def test_breaking_out_of_a_loop_hands_the_rest_of_its_batch_to_the_next_reader() -> None:
    """Defect 6: after ``break`` the yielded messages count as consumed and the rest of the
    batch comes next (no 60 s stall, no redelivery of what was yielded)."""
    engine, broker, _, tasks = make(partitions=1, confirm_in_local=False)
    consumer = consumer_over(engine)
    async for message in consumer:
        if message.body == b"m1":
            break
    await asyncio.sleep(0.01)  # CPython finalizes the dropped iterator on the next tick
    rest = await asyncio.wait_for(consumer.getmany(timeout=None), 10)
    assert [m.body for m in rest] == [b"m2"]
    assert broker.commits == []  # one lease for the batch: settled when every part is
    assert await rest.ack()
    assert broker.commits == [("1:t:0", True)]
    nxt = await asyncio.wait_for(consumer.getmany(timeout=None), 10)
    assert [m.body for m in nxt] == [b"m3", b"m4", b"m5"]
    assert broker.fetches[-1] == ("1:t:0", True)
    await nxt.ack()
    assert engine.stats.messages == 6
    await stop(engine, tasks)


async def test_a_loop_closed_before_its_first_message_returns_the_whole_batch() -> None:
    """``aclose()`` right after the first message was taken but before it was yielded on
    keeps nothing: the whole batch goes to the next reader."""
    engine, broker, _, tasks = make(partitions=1, confirm_in_local=False)
    consumer = consumer_over(engine)
    iterator = consumer.messages()
    first = await iterator.__anext__()
    assert first.body == b"m0"
    await iterator.aclose()  # type: ignore[attr-defined]
    rest = await asyncio.wait_for(consumer.getmany(timeout=None), 10)
    assert [m.body for m in rest] == [b"m1", b"m2"]
    await rest.ack()
    assert broker.commits == [("1:t:0", True)]
    await stop(engine, tasks)


async def test_a_cancelled_ack_still_releases_the_partition() -> None:
    """Defect 12: an ack cancelled during its commit RPC settles the lease locally (the flag
    rides on the next fetch) instead of leaving the partition leased."""
    engine, broker, _, tasks = make(partitions=1, confirm_in_local=False)
    gate = asyncio.Event()
    plain_commit = broker.commit

    async def slow_commit(partition: Partition, *, consumed: bool) -> OffsetResponse:
        await gate.wait()
        return await plain_commit(partition, consumed=consumed)

    broker.commit = slow_commit  # type: ignore[method-assign]
    batch = await engine.get(None, 1)
    acking = asyncio.ensure_future(batch.ack())
    await asyncio.sleep(0.01)
    acking.cancel()
    with pytest.raises(asyncio.CancelledError):
        await acking
    assert batch.settled
    nxt = await asyncio.wait_for(engine.get(None, None), 10)
    assert broker.fetches[-1] == ("1:t:0", True)  # the consumed flag rode on the fetch
    assert nxt
    await stop(engine, tasks)


async def test_acks_after_the_lease_is_gone_report_false_and_count_nothing() -> None:
    """Defect 12: acking a part of a split batch whose lease is gone returns False, and
    ``stats.acks`` counts only acks that took effect."""
    engine, _, leases, tasks = make(partitions=1, confirm_in_local=True)
    part = await engine.get(1, 1)
    leases.remove(next(iter(leases.keys())))  # the partition moved away
    assert await part.ack() is False
    assert engine.stats.acks == 0
    good_engine, _, _, good_tasks = make(partitions=1, confirm_in_local=True)
    whole = await good_engine.get(None, 1)
    assert await whole.ack() is True
    assert good_engine.stats.acks == 1
    await stop(engine, tasks)
    await stop(good_engine, good_tasks)


async def test_a_partition_added_with_a_delay_wakes_fetchers_only_if_they_would_sleep_past_it() -> (
    None
):
    """notify(ready_at) leaves the idle fetchers asleep when one of them wakes by then
    anyway, wakes them otherwise; plain notify() always wakes them; the delayed partition is
    fetched once ready either way."""
    engine, broker, leases, tasks = make(0)
    loop = asyncio.get_running_loop()
    try:
        for _ in range(5):  # the fetchers reach their idle wait (nothing held: 1 s)
            await asyncio.sleep(0)
        now = loop.time()
        leases.add(Partition(BROKER, "t", 0), now, delay_ms=1500)
        engine.notify(now + 1.5)  # they wake within 1 s by themselves: left asleep
        assert not engine.changed.is_set()
        leases.add(Partition(BROKER, "t", 1), now, delay_ms=200)
        engine.notify(now + 0.2)
        assert engine.changed.is_set()
        await asyncio.sleep(0.5)
        assert broker.fetches == [("1:t:1", False)]
        await asyncio.sleep(1.2)
        assert ("1:t:0", False) in broker.fetches
        engine.changed.clear()
        engine.notify()
        assert engine.changed.is_set()
    finally:
        await stop(engine, tasks)


async def test_a_register_at_the_end_counts_as_the_first_empty_answer() -> None:
    """After count_empty the partition's first "no new data" answer is its second: the rest
    is doubled (2 × 20 ms), the next doubled again."""
    engine, broker, leases, tasks = make(
        0, msg_not_found_wait=0.02, msg_not_found_max_wait=1.0, fetchers=1
    )
    broker.script = [error(404), error(404)]
    try:
        key = Partition(BROKER, "t", 0).key
        engine.count_empty(key)
        leases.add(Partition(BROKER, "t", 0), asyncio.get_running_loop().time())
        engine.notify()
        for _ in range(100):
            if engine.stats.not_found == 2:
                break
            await asyncio.sleep(0.01)
        assert engine.stats.not_found == 2
        assert engine.stats.not_found_wait_ms == 40 + 80
    finally:
        await stop(engine, tasks)
