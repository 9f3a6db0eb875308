"""What the send's hot path reads instead of calls (issue 32, CPU per message): the session's
``send_limits`` (published topics and their max message size in one lookup), the partitioner's
unkeyed ``select`` taken once, and the answer future and the loop's clock read without the
asyncio loop's Python methods in between.

Each shortcut must give what the calls it replaces gave: a send to a topic that is not
published, still publishing, or whose size limit changed with a heartbeat is decided as before.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence, Set

import pytest
import uvloop

from tests.support.held_producer import HeldConnection, settle, started_producer
from tubemq_aio import Producer
from tubemq_aio._io.pending import future_factory, loop_clock
from tubemq_aio.errors import MessageTooLargeError
from tubemq_aio.protocol.producer_master_values import HeartbeatResponse
from tubemq_aio.protocol.producer_meta import DEFAULT_MAX_MSG_SIZE, Broker, Partition
from tubemq_aio.protocol.routing import (
    DefaultPartitioner,
    KeyHashPartitioner,
    RoundRobinPartitioner,
    unkeyed_selector,
)

MIB = 1024 * 1024


def heartbeat(producer: Producer, topic_info: str) -> None:
    """Apply a heartbeat answer listing ``topic_info`` as the session does after one."""
    session = producer._session
    assert session is not None
    answer = HeartbeatResponse(True, 200, "OK", 5, topic_infos=(topic_info,))
    session.metadata.apply_heartbeat(answer, 0)
    session._changed()


async def answered(conn: HeldConnection, task: asyncio.Task[object]) -> object:
    await settle()
    conn.release(len(conn.waiting))
    return await asyncio.wait_for(task, 5)


async def test_a_plain_send_to_a_published_topic_takes_the_hot_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    conn = HeldConnection()
    producer = started_producer(4, conn)

    async def not_here(*args: object) -> object:
        raise AssertionError("the plain send left the hot path")

    monkeypatch.setattr(producer, "_send", not_here)
    result = await answered(conn, asyncio.ensure_future(producer.send("t", b"x")))
    assert getattr(result, "message_id", None) == 7
    assert producer.sent == 1


async def test_the_send_limit_follows_the_topic_size_each_heartbeat_gives() -> None:
    conn = HeldConnection()
    producer = started_producer(4, conn)
    session = producer._session
    assert session is not None
    assert session.send_limits == {"t": DEFAULT_MAX_MSG_SIZE}
    body = b"x" * (MIB + MIB // 2)
    with pytest.raises(MessageTooLargeError):
        await producer.send("t", body)

    heartbeat(producer, f"t#1:3:1#{2 * MIB}")
    assert session.send_limits == {"t": 2 * MIB}
    result = await answered(conn, asyncio.ensure_future(producer.send("t", body)))
    assert getattr(result, "topic", None) == "t"

    heartbeat(producer, "t#1:3:1#")  # the topic is back on the cluster default
    assert session.send_limits == {"t": DEFAULT_MAX_MSG_SIZE}
    with pytest.raises(MessageTooLargeError):
        await producer.send("t", body)
    assert (producer.sent, producer.failed) == (1, 2)


async def test_a_topic_whose_first_publish_is_under_way_has_no_send_limit() -> None:
    producer = started_producer(4, HeldConnection())
    session = producer._session
    assert session is not None
    session._publishing["t"] = asyncio.Event()
    session._refresh_send_limits()
    assert session.send_limits == {}
    assert not session.is_published("t")


def partitions(n: int) -> tuple[Partition, ...]:
    broker = Broker(1, "127.0.0.1", 8123)
    return tuple(Partition(broker, "t", i) for i in range(n))


def picks(select: object, n: int = 8) -> list[int]:
    parts = partitions(3)
    chosen = [select("t", parts, None, avoid=frozenset()) for _ in range(n)]  # type: ignore[operator]
    return [p.partition_id for p in chosen]


@pytest.mark.parametrize("kind", [DefaultPartitioner, KeyHashPartitioner])
def test_an_unkeyed_message_goes_to_the_key_hash_partitioners_fallback(kind: type) -> None:
    ours = kind(RoundRobinPartitioner(random.Random(5)))
    theirs = kind(RoundRobinPartitioner(random.Random(5)))
    assert picks(unkeyed_selector(ours)) == picks(theirs.select)
    assert unkeyed_selector(ours) == ours.fallback.select


def test_a_partitioner_that_overrides_select_keeps_its_own() -> None:
    class Fixed(DefaultPartitioner):
        __slots__ = ()

        def select(
            self,
            topic: str,
            partitions: Sequence[Partition],
            key: bytes | str | None = None,
            *,
            avoid: Set[str] = frozenset(),
        ) -> Partition:
            return partitions[-1]

    fixed = Fixed()
    assert picks(unkeyed_selector(fixed)) == [2] * 8
    plain = RoundRobinPartitioner()
    assert unkeyed_selector(plain) == plain.select


@pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
def test_the_answer_future_belongs_to_the_running_loop(loop_kind: str) -> None:
    async def check() -> None:
        loop = asyncio.get_running_loop()
        new_future = future_factory(loop)
        fut = new_future()
        assert asyncio.isfuture(fut)
        assert fut.get_loop() is loop
        assert new_future() is not fut
        loop.call_soon(fut.set_result, b"ok")
        assert await fut == b"ok"

    if loop_kind == "uvloop":
        uvloop.run(check())
    else:
        asyncio.run(check())


@pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
def test_the_answer_future_does_not_look_up_the_running_loop(loop_kind: str) -> None:
    # asyncio's lookup of the running loop makes a getpid system call: one per send when the
    # future was made without its loop. Made where no loop runs, the future must still be
    # the given loop's.
    loop = uvloop.new_event_loop() if loop_kind == "uvloop" else asyncio.new_event_loop()
    try:
        fut = future_factory(loop)()
        assert fut.get_loop() is loop
        fut.cancel()
    finally:
        loop.close()


@pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
def test_the_connection_clock_is_the_loops_own(loop_kind: str) -> None:
    async def check() -> None:
        loop = asyncio.get_running_loop()
        clock = loop_clock(loop)
        if loop_kind == "asyncio":
            assert clock is time.monotonic  # what BaseEventLoop.time returns
        before = loop.time()
        now = clock()
        assert before <= now + 0.002  # uvloop's time is cached per loop turn, in milliseconds
        assert now <= loop.time() + 0.002

    if loop_kind == "uvloop":
        uvloop.run(check())
    else:
        asyncio.run(check())
