"""``Producer.send_many``: one outcome per message, in order; validation before any I/O; the
send window; cancellation, close and concurrent callers (FakeCluster and a held connection)."""

from __future__ import annotations

import asyncio
import math
import re
from typing import Any

import pytest

from tests.support.held_producer import HeldConnection, count_spawns, settle, started_producer
from tubemq_aio import (
    ClientClosedError,
    ConfigError,
    InvalidMessageError,
    NoPartitionError,
    Producer,
    SendResult,
    ServerError,
)
from tubemq_aio.protocol.routing import KeyHashPartitioner
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault, wait_until

SEND = Method.BROKER_PRODUCER_SEND_MESSAGE


def producer_for(cluster: FakeCluster, **options: Any) -> Producer:
    options.setdefault("telemetry", False)
    return Producer(cluster.master_addr, topics=["demo"], **options)


def check_stored(cluster: FakeCluster, bodies: list[bytes], results: list[Any]) -> None:
    """Every result is a SendResult whose message id is the stored copy of its own body."""
    stored = {m.message_id: m.payload for m in cluster.messages("demo")}
    assert len(results) == len(bodies)
    for body, result in zip(bodies, results, strict=True):
        assert isinstance(result, SendResult)
        assert stored[result.message_id] == body


# ---- results -----------------------------------------------------------------------------------


@pytest.mark.parametrize("telemetry", [False, None])
async def test_each_message_gets_its_own_result_in_order(telemetry: bool | None) -> None:
    bodies = [f"m{i}".encode() for i in range(300)]
    async with FakeCluster(topics={"demo": 2}, brokers=2) as cluster:
        async with producer_for(cluster, telemetry=telemetry, max_in_flight_sends=64) as p:
            results = await p.send_many("demo", bodies)
            assert (p.sent, p.failed, p.cancelled, p.in_flight) == (300, 0, 0, 0)
        check_stored(cluster, bodies, results)
        keys = {r.partition_key for r in results if isinstance(r, SendResult)}
        assert len(keys) == 4  # round robin over all partitions


async def test_key_and_attributes_apply_to_every_message() -> None:
    async with FakeCluster(topics={"demo": 3}) as cluster, producer_for(cluster) as p:
        results = await p.send_many("demo", (b"a", b"b", b"c"), key="k", attributes={"x": "1"})
        assert len({r.partition_key for r in results if isinstance(r, SendResult)}) == 1
        assert all(m.flag == 1 for m in cluster.messages("demo"))  # attribute block written


async def test_a_refused_message_is_an_entry_not_an_exception() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster, producer_for(cluster) as p:
        cluster.inject(SEND, Fault.error(400, "bad"))
        results = await p.send_many("demo", [b"a", b"b", b"c"])
        assert isinstance(results[0], ServerError)
        assert results[0].err_code == 400
        check_stored(cluster, [b"b", b"c"], results[1:])
        assert (p.sent, p.failed) == (2, 1)


@pytest.mark.parametrize("code", [503, 419])
async def test_not_stored_answers_are_retried_like_send(code: int) -> None:
    async with FakeCluster(topics={"demo": 1}, brokers=2) as cluster:
        async with producer_for(cluster) as p:
            cluster.inject(SEND, Fault.error(code), times=2)
            bodies = [b"a", b"b", b"c", b"d"]
            results = await p.send_many("demo", bodies)
            assert (p.sent, p.failed, p.retried) == (4, 0, 2)
        check_stored(cluster, bodies, results)
        assert cluster.requests(SEND) == 6


async def test_two_tasks_at_once_get_their_own_results() -> None:
    first = [f"a{i}".encode() for i in range(40)]
    second = [f"b{i}".encode() for i in range(40)]
    async with FakeCluster(topics={"demo": 2}) as cluster:
        async with producer_for(cluster, max_in_flight_sends=3) as p:
            r1, r2 = await asyncio.gather(p.send_many("demo", first), p.send_many("demo", second))
            assert p.in_flight == 0
        check_stored(cluster, first, r1)
        check_stored(cluster, second, r2)


# ---- validation --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bodies", "kwargs", "text"),
    [
        (b"abc", {}, "list or tuple"),
        ("abc", {}, "list or tuple"),
        (None, {}, "list or tuple"),
        (iter([b"a"]), {}, "list or tuple"),
        ({b"a"}, {}, "list or tuple"),
        ([b"a", "b"], {}, "bodies[1]"),
        ([b"a", b""], {}, "bodies[1]"),
        ([None], {}, "bodies[0]"),
        ([b"a"], {"timeout": math.nan}, "timeout"),
        ([b"a"], {"timeout": 0}, "timeout"),
        ([b"a"], {"key": 5}, "key"),
        ([b"a"], {"attributes": {"a": 1}}, "attribute"),
        ([b"a"] * 6, {}, "max_send_many=5"),
    ],
)
async def test_bad_arguments_send_nothing(bodies: Any, kwargs: dict[str, Any], text: str) -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        async with producer_for(cluster, max_send_many=5) as p:
            with pytest.raises(InvalidMessageError, match=text.replace("[", r"\[")):
                await p.send_many("demo", bodies, **kwargs)
            with pytest.raises(InvalidMessageError):
                await p.send_many(" ", [b"a"])
            assert (p.sent, p.failed, p.cancelled) == (0, 0, 0)
        assert cluster.requests(SEND) == 0


async def test_a_body_too_large_for_the_topic_sends_nothing() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster, producer_for(cluster) as p:
        with pytest.raises(InvalidMessageError, match=r"bodies\[2\]"):
            await p.send_many("demo", [b"a", b"b", b"x" * (2 << 20)])
        assert cluster.requests(SEND) == 0


async def test_empty_and_largest_lists() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        async with producer_for(cluster, max_send_many=2000) as p:
            assert await p.send_many("demo", []) == []
            assert await p.send_many("demo", ()) == []
            assert cluster.requests(SEND) == 0
            bodies = [b"%d" % i for i in range(2000)]
            results = await p.send_many("demo", bodies)
            with pytest.raises(InvalidMessageError, match="exceed"):
                await p.send_many("demo", [b"x"] * 2001)
        check_stored(cluster, bodies, results)
        assert cluster.requests(SEND) == 2000


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "10", (1 << 20) + 1])
def test_max_send_many_is_validated(value: object) -> None:
    with pytest.raises(ConfigError, match="max_send_many"):
        Producer("127.0.0.1:1", max_send_many=value)  # type: ignore[arg-type]


async def test_closed_or_unstarted_producer_raises() -> None:
    producer = Producer("127.0.0.1:1", telemetry=False)
    with pytest.raises(ClientClosedError):
        await producer.send_many("t", [b"a"])
    with pytest.raises(ClientClosedError):
        await producer.send_many("t", [])


# ---- window, cancellation, close (a connection that answers when told) ------------------------


async def test_window_bounds_the_messages_outstanding() -> None:
    conn = HeldConnection()
    producer = started_producer(3, conn, telemetry=False)
    task = asyncio.ensure_future(producer.send_many("t", [b"x"] * 10))
    for _ in range(10):
        await settle()
        assert len(conn.waiting) <= 3
        assert producer.in_flight <= 3
        conn.release(2)
    results = await asyncio.wait_for(task, 5)
    assert all(isinstance(r, SendResult) for r in results)
    assert (producer.sent, producer.in_flight) == (10, 0)


@pytest.mark.parametrize("window", [2, 10])
async def test_cancellation_releases_every_slot(window: int) -> None:
    conn = HeldConnection()
    producer = started_producer(window, conn, telemetry=False)
    task = asyncio.ensure_future(producer.send_many("t", [b"x"] * 5))
    await settle()
    assert len(conn.waiting) == min(window, 5)  # written: these may be stored
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert producer.in_flight == 0
    assert (producer.sent, producer.failed, producer.cancelled) == (0, 0, 5)
    conn.release(5)  # late answers are harmless
    again = asyncio.ensure_future(producer.send_many("t", [b"y"]))
    await settle()
    conn.release(1)
    assert isinstance((await asyncio.wait_for(again, 5))[0], SendResult)


async def test_a_cancelled_call_counts_the_messages_answered_before_as_sent() -> None:
    """Cancelled mid-way, the call returns no list: the messages known stored are the ones
    answered before the cancel (counted ``sent``, the oldest first: the call books answers in
    order); those written and unanswered may be stored, the rest were not sent (``cancelled``)."""
    conn = HeldConnection()
    producer = started_producer(4, conn, telemetry=False)
    task = asyncio.ensure_future(producer.send_many("t", [b"x"] * 6))
    await settle()
    assert len(conn.waiting) == 4  # the window's worth written
    conn.release(3)
    await settle()
    assert (producer.sent, producer.in_flight) == (3, 3)  # the 5th and 6th written meanwhile
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (producer.sent, producer.failed, producer.cancelled) == (3, 0, 3)
    assert producer.in_flight == 0


async def test_cancellation_while_other_senders_wait() -> None:
    conn = HeldConnection()
    producer = started_producer(2, conn, telemetry=False)
    batch = asyncio.ensure_future(producer.send_many("t", [b"x"] * 4))
    await settle()
    single = asyncio.ensure_future(producer.send("t", b"s"))  # queued for a slot
    await settle()
    batch.cancel()
    with pytest.raises(asyncio.CancelledError):
        await batch
    await settle()
    conn.release(len(conn.waiting))
    await settle()
    conn.release(len(conn.waiting))
    assert isinstance(await asyncio.wait_for(single, 5), SendResult)
    assert producer.in_flight == 0


async def test_close_during_send_many_refuses_what_was_not_sent() -> None:
    conn = HeldConnection()
    producer = started_producer(2, conn, telemetry=False, close_grace=5.0)
    task = asyncio.ensure_future(producer.send_many("t", [b"x"] * 5))
    await settle()
    closing = asyncio.ensure_future(producer.close())
    await settle()
    conn.release(2)
    results = await asyncio.wait_for(task, 5)
    await asyncio.wait_for(closing, 5)
    assert [type(r) for r in results] == [SendResult] * 2 + [ClientClosedError] * 3
    assert (producer.sent, producer.failed, producer.in_flight) == (2, 3, 0)
    with pytest.raises(ClientClosedError):
        await producer.send_many("t", [b"x"])


async def test_a_long_list_yields_and_can_be_cancelled_or_closed_midway() -> None:
    conn = HeldConnection()
    producer = started_producer(5000, conn, telemetry=False, close_grace=5.0)
    task = asyncio.ensure_future(producer.send_many("t", [b"x"] * 2000))
    await asyncio.sleep(0)  # the call starts and stops at its first yield, 512 messages out
    assert len(conn.waiting) == 512
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (producer.in_flight, producer.cancelled) == (0, 2000)
    conn.release(512)

    task = asyncio.ensure_future(producer.send_many("t", [b"y"] * 2000))
    await asyncio.sleep(0)
    closing = asyncio.ensure_future(producer.close())
    await settle()
    conn.release(len(conn.waiting))
    results = await asyncio.wait_for(task, 5)
    await asyncio.wait_for(closing, 5)
    sent = [r for r in results if isinstance(r, SendResult)]
    refused = [r for r in results if isinstance(r, ClientClosedError)]
    # Sent up to a yield (whole chunks of 512), then refused from the first yield after close.
    assert len(sent) % 512 == 0
    assert 512 <= len(sent) < 2000
    assert len(sent) + len(refused) == 2000
    assert (producer.sent, producer.failed, producer.in_flight) == (len(sent), len(refused), 0)


async def test_a_full_connection_is_waited_on_by_the_call_not_a_task_per_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """More messages than the connection takes at once: the call settles its own oldest to make
    room (no task per message waiting for room) and writes the request it built (no second
    build); every message is stored, in order."""
    spawned = count_spawns(monkeypatch)
    bodies = [f"m{i}".encode() for i in range(300)]
    async with FakeCluster(topics={"demo": 2}, brokers=1) as cluster:
        async with producer_for(cluster, max_in_flight=8) as p:
            await p.send("demo", b"first")  # the connection is open before the call
            built: list[object] = []
            assert p._attempts is not None
            begin = p._attempts.begin

            def counting_begin(*args: Any) -> Any:
                built.append(args)
                return begin(*args)

            monkeypatch.setattr(p._attempts, "begin", counting_begin)
            results = await p.send_many("demo", bodies)
            assert (p.sent, p.failed, p.cancelled, p.in_flight) == (301, 0, 0, 0)
        check_stored(cluster, bodies, results)
    assert spawned == []
    assert len(built) == len(bodies)


async def test_cancelled_while_its_next_message_waits_for_room_releases_that_slot() -> None:
    """The call builds a message, finds the connection full and waits for its own oldest answer
    holding that message's slot. Cancelled there, the slot stayed taken for good (and the
    message was in no counter): ``in_flight`` never went back to 0 and ``close()`` waited its
    ``close_grace`` for a send that did not exist."""
    async with (
        FakeCluster(topics={"demo": 1}, brokers=1) as cluster,
        producer_for(cluster, max_in_flight=2, close_grace=0.5) as p,
    ):
        await p.send("demo", b"first")  # the connection is open before the call
        cluster.inject(SEND, Fault.delay(30), times=2)  # the two on the wire stay unanswered
        task = asyncio.ensure_future(p.send_many("demo", [b"x"] * 5))
        await wait_until(lambda: p.in_flight == 3, 10, "two on the wire, the third built")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert p.in_flight == 0
        assert (p.sent, p.failed, p.cancelled) == (1, 0, 5)


class _Raising:
    def select(self, topic: str, partitions: Any, key: Any = None, *, avoid: Any = ()) -> Any:
        raise ValueError("boom")


class _ReturnsNone:
    def select(self, topic: str, partitions: Any, key: Any = None, *, avoid: Any = ()) -> Any:
        return None


class _Refusing:
    def select(self, topic: str, partitions: Any, key: Any = None, *, avoid: Any = ()) -> Any:
        raise NoPartitionError("none of these")


@pytest.mark.parametrize(
    ("partitioner", "error", "text"),
    [
        (_Raising(), ConfigError, "partitioner _Raising.select raised ValueError: boom"),
        (_ReturnsNone(), ConfigError, "partitioner _ReturnsNone.select returned None"),
        (_Refusing(), NoPartitionError, "none of these"),  # its own TubeMQError, as it is
        # the application's fallback of a library partitioner, for messages without a key
        (KeyHashPartitioner(_Raising()), ConfigError, "partitioner _Raising.select raised"),
    ],
)
async def test_a_broken_custom_partitioner_fails_each_send_with_a_typed_error(
    partitioner: object, error: type[Exception], text: str
) -> None:
    """A partitioner that raised or returned something else than a partition let its
    ValueError or an AttributeError out of ``send``; ``send_many`` raised it too instead of one
    entry per message, kept a window slot per call for good and left a message out of the
    counters."""
    async with FakeCluster(topics={"demo": 2}, brokers=1) as cluster:
        async with producer_for(cluster, partitioner=partitioner, close_grace=0.5) as p:
            with pytest.raises(error, match=re.escape(text)):
                await p.send("demo", b"one")
            outcomes = await p.send_many("demo", [b"a", b"b", b"c"])
            assert [type(o) for o in outcomes] == [error] * 3
            with pytest.raises(error, match=re.escape(text)):
                await p.send_nowait("demo", b"later")
            assert p.in_flight == 0
            assert (p.sent, p.failed, p.cancelled) == (0, 5, 0)
        assert cluster.requests(SEND) == 0


@pytest.mark.parametrize("timeout", [math.nan, math.inf, 0, -1, 1e300, True])
async def test_a_bad_timeout_is_named_as_send_manys(timeout: object) -> None:
    # Found by an adversarial review: the message began "send: timeout must be ...".
    conn = HeldConnection()
    producer = started_producer(4, conn, telemetry=False)
    with pytest.raises(InvalidMessageError, match=r"^send_many: timeout must be"):
        await producer.send_many("t", [b"x"], timeout=timeout)  # type: ignore[arg-type]
    assert conn.waiting == []
