"""Public bug reports against Kafka clients and the official TubeMQ clients, second sweep, tried
against this SDK on FakeCluster (the first sweep is ``tests/fake/test_public_bug_reports.py``;
the gateway's Redis store ones are in ``tests/io/test_public_bug_reports_2.py``).

Looked at and judged not applicable, or covered elsewhere:

* dpkp/kafka-python#2030 and apache/kafka#4717 (KAFKA-6662: ``offsets_for_times`` answering
  None for a time after the newest message): the documented answer here is None too, and
  tests/fake/test_fake_time.py asserts it for times before, between and after the messages.
* confluentinc/librdkafka#1849 and confluentinc/confluent-kafka-go#280 (whether ``poll()``
  returns messages after ``pause()``): questions; the answer here is documented
  (``Consumer.pause``: batches already buffered are still delivered) and tested below.
* apache/inlong#5281 (the Go client unable to reach a restarted broker for hours): covered by
  tests/fake/test_fake_fetch_retry.py (confluentinc/confluent-kafka-python#173 there).
* apache/inlong#5681 and Tencent/TubeMQ#103 (the C++ and Java clients not moving to another
  master after the active one died or timed out): covered by the MasterInvoker tests
  (tests/unit/test_master_invoker.py: standby and unreachable masters are passed over).
* zio/zio-kafka#485 and confluentinc/librdkafka#1994 (memory of a consumer prefetching for many
  partitions): the prefetch bound here is per consumer (``max_prefetch_batches``), not per
  partition; tested below.
* apache/paimon#9666 (a Spark sink committing a replayed micro-batch twice) and
  apache/doris-spark-connector#145 (a sink retrying a batch from an iterator it had already
  consumed, losing rows): the Spark sink here is documented at-least-once with the batch id in
  an attribute for de-duplication, and retries a send from the message it kept, not from the
  rows (docs/spark.md, "Delivery: at-least-once"); a replayed source micro-batch reads the same
  rows (docs/spark.md, "Exactness", with its tests).
* dpkp/kafka-python#1418 and dpkp/kafka-python#1896 (heartbeats failing while the topic is
  idle): heartbeats here are their own task, independent of reads; the blocked-loop case is
  tested below.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tubemq_aio import Consumer, MessageBatch, Producer, SendResult
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault, wait_until

pytestmark = pytest.mark.timeout(60)
GET = Method.BROKER_CONSUMER_GET_MESSAGE
SEND = Method.BROKER_PRODUCER_SEND_MESSAGE
#: Messages of the tests below; with ``MAX_BATCH`` a fetch, many more than the prefetch holds.
MESSAGES = 200
MAX_BATCH = 5
PREFETCH = 3
#: Seconds the master keeps a member without heartbeats (the consumer's come every second).
CLIENT_TIMEOUT = 1.5
#: Seconds a quiet consumer is watched for fetches it must not send.
QUIET = 0.5


async def _produce(cluster: FakeCluster) -> list[bytes]:
    bodies = [b"m%03d" % i for i in range(MESSAGES)]
    async with Producer(cluster.master_addr, topics=["demo"]) as producer:
        await producer.send_many("demo", bodies)
    return bodies


@contextlib.asynccontextmanager
async def _reading(
    group: str, prefetch: int = PREFETCH
) -> AsyncIterator[tuple[FakeCluster, Consumer, list[bytes]]]:
    """A two-broker fake cluster holding :func:`_produce`'s bodies, and a consumer of ``group``
    with ``prefetch`` batches of buffer, reading from the earliest offset, assigned."""
    async with FakeCluster(topics={"demo": 2}, brokers=2, max_batch=MAX_BATCH) as cluster:
        bodies = await _produce(cluster)
        async with Consumer(
            cluster.master_addr,
            group=group,
            topics=["demo"],
            consume_from="earliest",
            max_prefetch_batches=prefetch,
        ) as consumer:
            await consumer.wait_for_assignment(timeout=10)
            yield cluster, consumer, bodies


def _registers(cluster: FakeCluster) -> int:
    """Consumer registrations the master got (either version of the request)."""
    return sum(
        cluster.requests(m)
        for m in (Method.MASTER_CONSUMER_REGISTER, Method.MASTER_CONSUMER_REGISTER_V2)
    )


async def _gets_settle(cluster: FakeCluster) -> int:
    """The number of fetches once it has stopped growing for :data:`QUIET` seconds."""
    while True:
        before = cluster.requests(GET)
        await asyncio.sleep(QUIET)
        if cluster.requests(GET) == before:
            return before


async def test_a_consumer_nobody_reads_stops_fetching_at_its_prefetch_bound() -> None:
    """confluentinc/librdkafka#1775 (a consumer whose application stopped taking messages went
    on fetching until the whole topic sat in memory: no backpressure) and
    confluentinc/librdkafka#1994 (the same, memory growing to the queue's limit per partition):
    a started consumer that nobody reads sends at most ``max_prefetch_batches`` fetches however
    many messages wait, and once read it delivers every message exactly once."""
    async with _reading("g1775") as (cluster, consumer, bodies):
        await wait_until(lambda: cluster.requests(GET) >= PREFETCH, 10, "the buffer filled")
        assert await _gets_settle(cluster) == PREFETCH
        read: list[bytes] = []
        async with asyncio.timeout(20):
            while len(read) < MESSAGES:
                async with await consumer.getmany(timeout=1) as batch:
                    read.extend(m.body for m in batch)
    assert sorted(read) == bodies


async def test_pause_keeps_the_buffered_batches_and_fetches_nothing_more() -> None:
    """apache/kafka#6988 (KAFKA-7548: batches already fetched for a partition that was then
    paused were thrown away and fetched again after ``resume()``), confluentinc/librdkafka's
    answer in confluentinc/confluent-kafka-go#260 (``pause()`` purges the prefetched messages)
    and confluentinc/confluent-kafka-dotnet#2418 (records fetched before ``pause()`` still
    came out, without bound). Here, as ``Consumer.pause`` documents, the batches buffered when
    ``pause()`` returns still come out, and they are all that does: no fetch is sent while
    paused, and after ``resume()`` every message has been read exactly once, in order per
    partition (nothing buffered was dropped and fetched again)."""
    async with _reading("g7548") as (cluster, consumer, bodies):
        read: list[tuple[str, bytes]] = []

        async def take(timeout: float) -> int:
            async with await consumer.getmany(timeout=timeout) as batch:
                read.extend((batch.partition_key, m.body) for m in batch)
                return len(batch)

        assert await take(5)
        await wait_until(lambda: cluster.requests(GET) > PREFETCH, 10, "the buffer refilled")
        consumer.pause()
        fetched = await _gets_settle(cluster)
        while await take(0.2):  # what was buffered at the pause
            pass
        assert len(read) <= (1 + PREFETCH) * MAX_BATCH
        assert cluster.requests(GET) == fetched  # nothing fetched while paused
        consumer.resume()
        async with asyncio.timeout(20):
            while len(read) < MESSAGES:
                await take(1)
    assert sorted(body for _, body in read) == bodies
    for key in {k for k, _ in read}:
        mine = [body for k, body in read if k == key]
        assert mine == sorted(mine), key


async def test_a_loop_blocked_past_the_member_timeout_recovers_and_reads_on() -> None:
    """dpkp/kafka-python#2070 (a ``time.sleep`` in the processing of a message stopped the
    heartbeats; the member was dropped from its group and then left and re-joined without end,
    consuming the same message again and again) and aio-libs/aiokafka#335 (heartbeats failing
    during a rebalance, "member_id was not recognized"): a handler that blocks the event loop
    once for longer than the master keeps a member without heartbeats. The master drops the
    member meanwhile; afterwards the consumer registers again, gets partitions, and every
    message is read, the blocked batch at most once more than the others."""
    async with FakeCluster(
        topics={"demo": 2}, brokers=2, max_batch=MAX_BATCH, client_timeout=CLIENT_TIMEOUT
    ) as cluster:
        bodies = await _produce(cluster)
        async with Consumer(
            cluster.master_addr,
            group="g2070",
            topics=["demo"],
            consume_from="earliest",
            heartbeat_interval=1.0,
        ) as consumer:
            await consumer.wait_for_assignment(timeout=10)
            registers = _registers(cluster)
            read: Counter[bytes] = Counter()
            blocked = False
            async with asyncio.timeout(30):
                while set(read) != set(bodies):
                    async with await consumer.getmany(timeout=1) as batch:
                        read.update(m.body for m in batch)
                        if batch and not blocked:
                            blocked = True
                            time.sleep(2 * CLIENT_TIMEOUT)  # noqa: ASYNC251 (the application blocks the loop)
            # Dropped, and registered again: at the first heartbeat after the block, which a
            # loaded machine may send only after every message was read.
            await wait_until(lambda: _registers(cluster) > registers, 10, "a register again")
            await wait_until(consumer.assignment, 10, "partitions again")
        assert blocked
        assert set(read) == set(bodies)
        assert max(read.values()) <= 2, read.most_common(3)


async def test_a_key_s_messages_keep_their_order_when_each_send_is_awaited() -> None:
    """AbsaOSS/spline-spark-agent#314, confluentinc/librdkafka#831 and apache/kafka#1607 (with
    more than one request in flight, a message that failed and was retried was stored after
    the ones sent after it: one key's messages out of order, which the Kafka docs did not say).
    Here concurrent sends do that too (``send_many`` with a key: a retried body comes after the
    others; docs/producer.md says so now, it spoke only of order across partitions). Sends of
    a key awaited one at a time are stored in order even when every other one is refused once
    (a retriable 419) and retried, and ``send_many`` answers each body with its own result, in
    the order of the bodies, all on the key's partition."""
    async with (
        FakeCluster(topics={"demo": 2}, brokers=2) as cluster,
        Producer(cluster.master_addr, topics=["demo"]) as producer,
    ):
        bodies = [b"k%02d" % i for i in range(10)]
        for i, body in enumerate(bodies):
            if i % 2:
                cluster.inject(SEND, Fault.error(419), times=1)
            home = (await producer.send("demo", body, key="order")).partition_key
        stored = [b for b in cluster.bodies("demo") if b.startswith(b"k")]
        assert stored == bodies
        cluster.inject(SEND, Fault.error(419), times=1)
        many = [b"n%02d" % i for i in range(10)]
        results = await producer.send_many("demo", many, key="order")
        sent = [r for r in results if isinstance(r, SendResult)]
        assert len(sent) == len(many), results
        ids = [m.message_id for m in cluster.messages("demo")]
        body_of = dict(zip(ids, cluster.bodies("demo"), strict=True))
        assert [body_of[r.message_id] for r in sent] == many
        assert {r.partition_key for r in sent} == {home}


class _Names:
    """Host names the running loop resolves to a loopback address the test chooses (and
    changes), counting the lookups: a stand-in for a DNS record that moves."""

    def __init__(self, loop: asyncio.AbstractEventLoop, names: dict[str, str]) -> None:
        self.names, self.lookups = names, Counter[str]()
        self._real = loop.getaddrinfo

        async def getaddrinfo(host: Any, port: Any, **kwargs: Any) -> Any:
            if host in self.names:
                self.lookups[host] += 1
                host = self.names[host]
            return await self._real(host, port, **kwargs)

        loop.getaddrinfo = getaddrinfo  # type: ignore[method-assign]


async def test_a_broker_name_that_moves_is_looked_up_again_on_reconnect() -> None:
    """apache/inlong#11583 (the Go client, item 3: the connection pool kept one connection per
    domain name and never looked the name up again, so a name moved to another address was
    not followed) and confluentinc/librdkafka#2159's kind (a failed lookup never tried again):
    brokers announced under a name whose address moves are followed. The name first points at
    an address where nothing listens (the old host, gone); a send fails over it until the name
    points at the broker, then is stored, within its one timeout."""
    loop = asyncio.get_running_loop()
    async with FakeCluster(topics={"demo": 2}, brokers=2) as cluster:
        names = _Names(loop, {"moving-broker.test": "127.0.0.2"})
        try:
            for broker in cluster.brokers:
                port = cluster.broker_addr(broker.broker_id).rsplit(":", 1)[1]
                cluster.advertise_broker(broker.broker_id, f"moving-broker.test:{port}")
            async with Producer(cluster.master_addr, topics=["demo"]) as producer:
                send = asyncio.ensure_future(producer.send("demo", b"x", timeout=20))
                await wait_until(
                    lambda: names.lookups["moving-broker.test"] >= 2, 10, "lookups of the old host"
                )
                assert not send.done()
                names.names["moving-broker.test"] = "127.0.0.1"  # the record moves
                result = await send
                assert result.append_offset >= 0
                before = names.lookups["moving-broker.test"]
                cluster.drop_connections()
                await producer.send("demo", b"y", timeout=20)
                assert names.lookups["moving-broker.test"] > before  # looked up again
        finally:
            del loop.getaddrinfo  # the instance attribute: the class method again


async def test_acks_of_batches_held_across_the_loss_of_their_partition() -> None:
    """robinhood/faust#104, akka/alpakka-kafka#750 and aio-libs/aiokafka#933 (a commit of
    records fetched before a rebalance moved their partition failed with CommitFailedError,
    which stopped the stream or left the application unsure what was kept): a member holding
    one unacked batch of each of its partitions loses half of them to a new member. The ack of
    a batch whose partition left answers False (no exception), the ack of one whose partition
    stayed answers True, and the batches that went unacked are read again by the new owner, so
    the two members together read every message (at least once)."""
    async with FakeCluster(
        topics={"demo": 2}, brokers=2, max_batch=MAX_BATCH, balance_period=0.05
    ) as cluster:
        bodies = await _produce(cluster)
        first = Consumer(
            cluster.master_addr,
            group="g750",
            topics=["demo"],
            consume_from="earliest",
            rebalance_confirm_wait=0.2,  # held batches are not waited for long
        )
        second = Consumer(
            cluster.master_addr, group="g750", topics=["demo"], consume_from="earliest"
        )
        read: set[bytes] = set()
        async with first:
            assert first._session is not None
            held: dict[str, MessageBatch] = {}
            async with asyncio.timeout(20):
                while len(first.assignment()) < 4:
                    await first._session.heartbeat_once()
                while len(held) < 4:
                    batch = await first.getmany(timeout=1)
                    if batch and batch.partition_key not in held:
                        held[batch.partition_key] = batch
                        read.update(m.body for m in batch)
                    elif batch:
                        await batch.nack()
                async with second:
                    assert second._session is not None
                    while not second.assignment() or len(first.assignment()) > 2:
                        await first._session.heartbeat_once()
                        await second._session.heartbeat_once()
                        await asyncio.sleep(0.05)
                    kept = set(first.assignment())
                    for key, batch in held.items():
                        assert await batch.ack() is (key in kept), key
                    while len(read) < MESSAGES:
                        for member in (first, second):
                            async with await member.getmany(timeout=0.05) as batch:
                                read.update(m.body for m in batch)
        assert sorted(read) == bodies


async def test_sends_that_never_reach_a_broker_end_and_give_their_window_slots_back() -> None:
    """confluentinc/librdkafka#2997 (the delivery callback never ran for a message whose broker
    was never reached, so the application never freed it), apache/pulsar#11761 and
    apache/pulsar#16837 (sends that timed out or failed kept their share of the producer's
    memory or in-flight limit, so the producer slowed down for good). With every broker
    announced where nothing listens, sends of each kind (``send``, ``send_nowait`` with a
    callback, ``send_many``, and sends cancelled while they wait) all end by their timeout,
    every callback runs with the error, nothing stays in flight, and the whole window can be
    taken again at once (``send_nowait`` raises ``SendWindowFullError`` for a slot still
    held)."""
    window = 4
    async with FakeCluster(topics={"demo": 2}, brokers=2) as cluster:
        for broker in cluster.brokers:
            port = cluster.broker_addr(broker.broker_id).rsplit(":", 1)[1]
            cluster.advertise_broker(broker.broker_id, f"127.0.0.2:{port}")  # nothing there
        async with Producer(
            cluster.master_addr, topics=["demo"], max_in_flight_sends=window
        ) as producer:
            called: list[BaseException | None] = []
            nowait = [
                producer.send_nowait(
                    "demo", b"n", timeout=0.3, callback=lambda f: called.append(f.exception())
                )
                for _ in range(2)
            ]
            waits = [
                asyncio.ensure_future(producer.send("demo", b"s", timeout=0.3)) for _ in range(4)
            ]
            many = asyncio.ensure_future(producer.send_many("demo", [b"m"] * 3, timeout=0.3))
            await asyncio.sleep(0.05)
            waits[-1].cancel()  # one of those waiting for a slot
            outcomes = await asyncio.gather(*nowait, *waits, return_exceptions=True)
            per_body = await many
            await producer.flush()
            assert len(called) == 2
            assert all(isinstance(e, Exception) for e in called), called
            assert not any(isinstance(o, SendResult) for o in [*outcomes, *per_body]), outcomes
            assert producer.in_flight == 0
            assert producer.sent == 0
            assert producer.failed + producer.cancelled == 2 + 4 + 3
            # every slot is free again: as many sends as the window holds start at once
            again = [producer.send_nowait("demo", b"a", timeout=0.3) for _ in range(window)]
            await asyncio.gather(*again, return_exceptions=True)
            assert producer.in_flight == 0


async def test_getmany_cancelled_at_every_step_loses_no_message_and_no_prefetch_slot() -> None:
    """aio-libs/aiokafka#1031 (messages lost between a producer and a consumer reading with
    ``getmany(timeout_ms=...)`` in a loop) and apache/pulsar#16837's kind on the consumer side
    (a permit taken for a fetch and never given back when the call was cut short, so the
    consumer fetched less and less): ``getmany`` calls cancelled after 0, 1, 2 ... loop turns,
    while a small prefetch buffer is full, neither drop a fetched batch nor keep its buffer
    slot: afterwards the consumer still fetches, and every message is read (at least once)."""
    async with _reading("g1031", prefetch=1) as (_cluster, consumer, bodies):
        read: set[bytes] = set()
        cut = 0
        for turns in range(1, 31):
            call = asyncio.ensure_future(consumer.getmany(timeout=0.2))
            for _ in range(turns):
                await asyncio.sleep(0)
            if not call.done():
                cut += 1
                call.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                async with await call as batch:
                    read.update(m.body for m in batch)
            async with await consumer.getmany(timeout=0.2) as batch:
                read.update(m.body for m in batch)
        assert cut
        async with asyncio.timeout(20):
            while len(read) < MESSAGES:
                async with await consumer.getmany(timeout=0.2) as batch:
                    read.update(m.body for m in batch)
    assert sorted(read) == bodies
