"""Public bug reports against aiokafka, nats.py, redis-py's asyncio client, the official TubeMQ
clients and their peers, tried against this SDK on FakeCluster.

Each test names the report it reproduces (repository and issue number) and what went wrong
there; the assertion is what this SDK must do instead. Reports of the same sweep that other
tests already cover, not repeated here: close() during start() or right after it
(aio-libs/aiokafka#647) in tests/fake/test_fake_lifecycle.py and tests/leaks; a crashed fetch
task stopping consumption silently (aio-libs/aiokafka#983) and a loop not ending at stop()
(aio-libs/aiokafka#80) in tests/fake/test_fake_lifecycle.py; close() from a rebalance callback
(confluentinc/librdkafka#4041, confluentinc/confluent-kafka-go#1016) in
tests/fake/test_fake_callbacks.py; a send to a topic that does not exist
(aio-libs/aiokafka#95) in tests/fake/test_fake_unknown_topic.py; a send or close held by
metadata that never comes (apache/kafka#5027, KAFKA-6897) in
tests/fake/test_fake_publish_deadline.py; a consumer's fetch refused after a broker restart
(confluentinc/confluent-kafka-python#173, dpkp/kafka-python#1419) in
tests/fake/test_fake_fetch_retry.py and tests/fake/test_fake_tail_check.py; a closing
connection to a peer that stopped reading (nats-io/nats.py#671) in
tests/io/test_io_client_limits.py; work per fetch growing with partitions (robinhood/faust#455,
aio-libs/aiokafka#487) in tests/unit/test_scale_counts.py; a client used from another loop in
tests/fake/test_fake_other_loop.py; oversized messages in tests/unit/test_producer_send_limits.py.
"""

from __future__ import annotations

import asyncio
import gc
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tubemq_aio import (
    ClientBalancedConsumer,
    ClientClosedError,
    ConnectError,
    Consumer,
    NetworkError,
    Producer,
    SendResult,
    ServerError,
    WriteTimeoutError,
)
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault

pytestmark = pytest.mark.timeout(60)
SEND = Method.BROKER_PRODUCER_SEND_MESSAGE
GET = Method.BROKER_CONSUMER_GET_MESSAGE
#: A host name that never resolves (RFC 6761 reserves ``.invalid``).
UNRESOLVABLE = "no-such-master.invalid:8715"


@contextmanager
def loop_errors() -> Iterator[list[dict[str, Any]]]:
    """Every context the running loop's exception handler gets (``Future exception was never
    retrieved``, ``Task was destroyed but it is pending!``, a callback's exception ...), with a
    garbage collection before the handler is restored so that dropped futures report too."""
    loop = asyncio.get_running_loop()
    seen: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: seen.append(context))
    try:
        yield seen
        gc.collect()
    finally:
        loop.set_exception_handler(previous)


@pytest.fixture
async def cluster() -> AsyncIterator[FakeCluster]:
    async with FakeCluster(topics={"demo": 2}, brokers=2) as fake:
        yield fake


async def test_close_returns_while_sends_retry_against_stopped_brokers(
    cluster: FakeCluster,
) -> None:
    """aio-libs/aiokafka#1101: with the broker down, ``send_and_wait`` and then ``stop()`` hung
    for ever. Here every broker is stopped while sends wait to be retried with a long timeout:
    ``close()`` ends them with ``ClientClosedError`` within its grace, and returns."""
    async with Producer(cluster.master_addr, topics=["demo"], close_grace=0.2) as producer:
        await producer.send("demo", b"warm")
        for broker in cluster.brokers:
            await cluster.stop_broker(broker.broker_id)
        awaited = asyncio.create_task(producer.send("demo", b"a", timeout=60))
        futures = [producer.send_nowait("demo", b"b", timeout=60) for _ in range(8)]
        await asyncio.sleep(0.1)  # every send is in its connect/retry loop now
        assert not awaited.done()
        async with asyncio.timeout(10):  # a hang detector, not a measurement
            await producer.close()
        with pytest.raises(ClientClosedError):
            await awaited
        for future in futures:
            with pytest.raises(ClientClosedError):
                await future
        assert producer.failed == 9


async def test_an_empty_getmany_then_close_leaves_no_unretrieved_exception(
    cluster: FakeCluster,
) -> None:
    """aio-libs/aiokafka#263: ``getmany()`` returning nothing, then ``stop()``, logged "Future
    exception was never retrieved" (a waiter future failed with ConsumerStoppedError that nobody
    awaited). aio-libs/aiokafka#252 is the same noise from a reader task cancelled at close.
    Nothing reaches the loop's exception handler here, for either consumer."""
    with loop_errors() as seen:
        consumer = Consumer(cluster.master_addr, group="g263", topics=["demo"])
        balanced = ClientBalancedConsumer(cluster.master_addr, group="c263", topics=["demo"])
        async with consumer, balanced:
            await consumer.wait_for_assignment(timeout=10)
            for key in (p.partition_key for p in await balanced.partitions()):
                await balanced.connect(key)
            assert not await consumer.getmany(timeout=0.05)
            assert not await balanced.getmany(timeout=0.05)
            waiting = asyncio.create_task(consumer.getmany(timeout=30))
            await asyncio.sleep(0.05)
        with pytest.raises(ClientClosedError):  # waiting at close: told, as api.md's table says
            await waiting
        await asyncio.sleep(0)
    assert seen == []


def _pending_objects() -> int:
    """Futures and tasks alive now (after a collection)."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, asyncio.Future))


async def test_short_getmany_calls_on_an_idle_consumer_keep_no_waiters(
    cluster: FakeCluster,
) -> None:
    """aio-libs/aiokafka#628: every ``getmany(timeout_ms=1)`` that found nothing left its waiter
    future in the fetcher's list, so an idle consumer polled in a loop grew without bound. Here
    hundreds of such calls on an idle consumer leave the number of live futures where it was."""
    async with Consumer(cluster.master_addr, group="g628", topics=["demo"]) as consumer:
        await consumer.wait_for_assignment(timeout=10)
        for _ in range(20):  # settle: fetch loops have their steady-state waits
            await consumer.getmany(timeout=0.001)
        before = _pending_objects()
        for _ in range(300):
            assert not await consumer.getmany(timeout=0.001)
        after = _pending_objects()
    assert after - before < 20, (before, after)  # a leak would be one per call: 300


async def test_a_send_cancelled_after_it_was_written_does_not_shift_later_answers(
    cluster: FakeCluster,
) -> None:
    """redis/redis-py#2624 and #2665: a command cancelled after it was written and before its
    answer came left the connection one answer behind, so the next command got the cancelled
    one's answer. Here a send is cancelled while its broker holds the answer; every later send
    on the same connection gets the answer of its own message (its stored body is its own)."""
    async with Producer(cluster.master_addr, topics=["demo"]) as producer:
        await producer.send("demo", b"warm", key="k")
        cluster.inject(SEND, Fault.delay(0.3), times=1)
        cancelled = asyncio.create_task(producer.send("demo", b"cancelled", key="k"))
        await asyncio.sleep(0.05)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        results = [await producer.send("demo", b"after-%d" % i, key="k") for i in range(5)]
        await asyncio.sleep(0.4)  # the delayed answer arrives meanwhile and is dropped
        results.append(await producer.send("demo", b"after-5", key="k"))
        stored = {(m.partition_id, m.offset): m.payload for m in cluster.messages("demo")}
        for i, result in enumerate(results):
            partition_id = int(result.partition_key.rsplit(":", 1)[1])
            assert stored[(partition_id, result.append_offset)] == b"after-%d" % i


CallerCall = Callable[[Producer, Consumer, ClientBalancedConsumer, str], Awaitable[object]]
CALLER_TIMEOUT_CALLS: dict[str, CallerCall] = {
    "send": lambda p, c, b, k: p.send("demo", b"x", timeout=30),
    "send_many": lambda p, c, b, k: p.send_many("demo", [b"x", b"y"], timeout=30),
    "flush": lambda p, c, b, k: p.flush(),
    "getmany": lambda p, c, b, k: c.getmany(timeout=30),
    "client-balanced getmany": lambda p, c, b, k: b.getmany(timeout=30),
    "read_at": lambda p, c, b, k: b.read_at(k, 0),
}


@pytest.mark.parametrize("name", CALLER_TIMEOUT_CALLS)
async def test_the_callers_timeout_is_never_swallowed(cluster: FakeCluster, name: str) -> None:
    """redis/redis-py#2551 (and aio-libs/aiokafka#983's discussion of suppressed
    ``CancelledError``): a cancel that met an internal timeout block was swallowed, so the
    caller's own ``asyncio.timeout`` never fired and the call returned as if nothing happened.
    Here every waiting call under the caller's ``asyncio.timeout`` raises ``TimeoutError``, the
    task is left with no pending cancel, and the client goes on serving."""
    producer = Producer(cluster.master_addr, topics=["demo"], close_grace=0.1)
    consumer = Consumer(cluster.master_addr, group="g2551", topics=["demo"])
    balanced = ClientBalancedConsumer(cluster.master_addr, group="c2551", topics=["demo"])
    async with producer, consumer, balanced:
        await consumer.wait_for_assignment(timeout=10)
        keys = [p.partition_key for p in await balanced.partitions()]
        if name == "client-balanced getmany":
            for key in keys:
                await balanced.connect(key)
        if name == "flush":
            cluster.inject(SEND, Fault.no_answer(), times=1)
            producer.send_nowait("demo", b"held", timeout=30)
        if name in ("send", "send_many"):
            cluster.inject(SEND, Fault.no_answer(), times=None)
        if name == "read_at":
            cluster.inject(GET, Fault.no_answer(), times=None)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await CALLER_TIMEOUT_CALLS[name](producer, consumer, balanced, keys[0])
        task = asyncio.current_task()
        assert task is not None
        assert task.cancelling() == 0
        cluster.clear_faults()
        assert (await producer.send("demo", b"still served", timeout=10)).append_offset >= 0


@pytest.mark.parametrize("kind", ["producer", "consumer", "client-balanced"])
async def test_an_unresolvable_master_fails_typed_and_close_after_it_is_quiet(kind: str) -> None:
    """nats-io/nats.py#785: after ``connect()`` to a host that cannot be reached failed,
    ``close()`` raised (a transport never set up). dpkp/kafka-python#687: a DNS failure came out
    as a bare ``socket.gaierror`` without the address. Here a master whose name does not
    resolve fails ``start()`` with a ``ConnectError`` naming it, and ``close()`` after that is a
    quiet no-op (twice)."""
    clients: dict[str, Callable[[], Producer | Consumer | ClientBalancedConsumer]] = {
        "producer": lambda: Producer(UNRESOLVABLE, register_attempts=1),
        "consumer": lambda: Consumer(UNRESOLVABLE, group="g785", topics=["t"], register_attempts=1),
        "client-balanced": lambda: ClientBalancedConsumer(
            UNRESOLVABLE, group="c785", topics=["t"], register_attempts=1
        ),
    }
    client = clients[kind]()
    with pytest.raises(NetworkError) as raised:
        async with asyncio.timeout(20):
            await client.start()
    assert isinstance(raised.value, ConnectError), repr(raised.value)
    assert "no-such-master.invalid" in str(raised.value)
    await client.close()
    await client.close()
    assert client.closed


async def test_a_keyed_send_retried_after_a_refusal_stays_on_its_key_s_partition(
    cluster: FakeCluster,
) -> None:
    """IBM/sarama#764 and confluentinc/librdkafka#1092: a retried message was re-routed to
    another partition (or queued behind later ones), so messages of one key were stored out of
    order. Here a keyed send whose broker refuses it once with a retriable 419 (store full) is
    retried on the same partition, the one every other message of that key goes to."""
    async with Producer(cluster.master_addr, topics=["demo"]) as producer:
        home = (await producer.send("demo", b"first", key="order-1")).partition_key
        cluster.inject(SEND, Fault.error(419), times=1)
        retried = await producer.send("demo", b"second", key="order-1")
        third = await producer.send("demo", b"third", key="order-1")
        assert (retried.partition_key, third.partition_key) == (home, home)
        assert retried.append_offset < third.append_offset


async def test_a_failed_re_register_after_a_master_restart_is_tried_again(
    cluster: FakeCluster,
) -> None:
    """apache/inlong#11583 (the Go client, item 1): when the register that follows the
    master's 411 failed, the client did nothing more and consumption stopped for good. Here
    the restarted master refuses the first two registers of every client; each client's next
    heartbeats register again, and all of them serve again afterwards."""
    producer = Producer(cluster.master_addr, topics=["demo"], register_attempts=1)
    consumer = Consumer(
        cluster.master_addr, group="g11583", topics=["demo"], consume_from="earliest"
    )
    balanced = ClientBalancedConsumer(cluster.master_addr, group="c11583", topics=["demo"])
    async with producer, consumer, balanced:
        await consumer.wait_for_assignment(timeout=10)
        await cluster.stop_master()
        await cluster.start_master()  # it has forgotten every client
        refused = {
            Method.MASTER_PRODUCER_REGISTER: 0,
            Method.MASTER_CONSUMER_REGISTER: 0,
            Method.MASTER_CONSUMER_REGISTER_V2: 0,
        }
        for method in refused:
            refused[method] = cluster.requests(method)
            cluster.inject(method, Fault.error(500), times=2)
        assert producer._session is not None
        assert consumer._session is not None
        assert balanced._session is not None
        for _ in range(2):
            with pytest.raises(ServerError):
                await producer._session.heartbeat()
        await producer._session.heartbeat()  # third register: accepted
        for _ in range(3):
            await consumer._session.heartbeat_once()
            await balanced._session.heartbeat_once()
        for method, before in refused.items():
            assert cluster.requests(method) - before >= 3, Method(method).name
        assert len(cluster.members("g11583")) == 1
        assert len(cluster.members("c11583")) == 1
        sent = await producer.send("demo", b"after the restart")
        got: list[bytes] = []
        async with asyncio.timeout(20):
            while b"after the restart" not in got:
                batch = await consumer.getmany(timeout=1)
                async with batch:
                    got.extend(m.body for m in batch)
        assert sent.append_offset >= 0


async def test_a_reconnect_at_another_offset_delivers_nothing_fetched_before_it() -> None:
    """dpkp/kafka-python#497 (records fetched before a position change returned after it, as
    duplicates) and faust-streaming/faust#94 (committing a batch of a partition given up
    crashed the consumer): batches fetched ahead from the first position do not come out after
    a ``disconnect()`` and a ``connect()`` at another offset, and the ack of a batch held across
    the disconnect answers False instead of raising."""
    async with FakeCluster(topics={"demo": 1}, max_batch=5) as cluster:
        async with Producer(cluster.master_addr, topics=["demo"]) as producer:
            await producer.send_many("demo", [b"m%03d" % i for i in range(100)])
        offsets = [m.offset for m in cluster.messages("demo")]
        async with ClientBalancedConsumer(
            cluster.master_addr,
            group="seek",
            topics=["demo"],
            max_prefetch_batches=4,
            rebalance_confirm_wait=0.1,  # the held batch is not waited for long
        ) as consumer:
            (key,) = [p.partition_key for p in await consumer.partitions()]
            await consumer.connect(key, offsets[0])
            first = await consumer.getmany(timeout=5)
            assert first[0].body == b"m000"
            await asyncio.sleep(0.2)  # the fetch loops fill the prefetch buffer meanwhile
            await consumer.disconnect(key)
            assert not await first.ack()  # its lease went with the partition
            await consumer.connect(key, offsets[60])
            bodies: list[bytes] = []
            async with asyncio.timeout(10):
                while len(bodies) < 40:
                    batch = await consumer.getmany(timeout=1)
                    async with batch:
                        bodies.extend(m.body for m in batch)
            assert bodies == [b"m%03d" % i for i in range(60, 100)]


async def test_a_rebalance_neither_repeats_nor_skips_acked_messages() -> None:
    """dpkp/kafka-python#497 and swift-server/swift-kafka-client#136 (messages fetched for a
    partition that a rebalance then moved were still returned, and read again by the new
    owner), aio-libs/aiokafka's CommitFailedError after a rebalance: a member that acks every
    batch it gets and loses half its partitions to a new member returns no batch of a
    partition it no longer holds, and the two together read every message exactly once."""
    async with FakeCluster(
        topics={"demo": 2}, brokers=2, max_batch=5, balance_period=0.05
    ) as cluster:
        async with Producer(cluster.master_addr, topics=["demo"]) as producer:
            await producer.send_many("demo", [b"m%03d" % i for i in range(200)])
        revoked: list[list[str]] = []
        first = Consumer(
            cluster.master_addr,
            group="rb",
            topics=["demo"],
            consume_from="earliest",
            on_revoked=lambda keys: revoked.append(list(keys)),
        )
        second = Consumer(cluster.master_addr, group="rb", topics=["demo"], consume_from="earliest")
        read: list[bytes] = []

        async def take(consumer: Consumer) -> None:
            batch = await consumer.getmany(timeout=0.02)
            if batch:
                assert batch.partition_key in consumer.assignment(), batch.partition_key
                read.extend(m.body for m in batch)
                assert await batch.ack()

        async with first:
            assert first._session is not None
            async with asyncio.timeout(20):
                while len(first.assignment()) < 4:
                    await first._session.heartbeat_once()
                await take(first)
                await asyncio.sleep(0.05)  # its fetchers buffer more of every partition
                async with second:
                    assert second._session is not None
                    while not (revoked and second.assignment()):
                        await first._session.heartbeat_once()
                        await second._session.heartbeat_once()
                        await take(first)
                    while len(read) < 200:
                        await take(first)
                        await take(second)
        assert len(revoked[0]) == 2
        assert sorted(read) == [b"m%03d" % i for i in range(200)]


async def test_send_nowait_callbacks_may_raise_or_send_again(cluster: FakeCluster) -> None:
    """confluentinc/confluent-kafka-python#457 (calling the producer from its own delivery
    callback crashed the process) and #762 (a failed delivery surfaced nowhere the caller could
    catch it): a ``send_nowait`` callback may start another send, one that raises harms neither
    the producer nor ``flush()`` (the loop's handler reports it), and by the time ``flush()``
    returns every callback of the sends it waited for has run."""
    async with Producer(cluster.master_addr, topics=["demo"]) as producer:
        called: list[str] = []
        chained: list[asyncio.Future[SendResult]] = []

        def send_again(future: asyncio.Future[SendResult]) -> None:
            called.append("again")
            chained.append(producer.send_nowait("demo", b"from a callback"))

        def fail(future: asyncio.Future[SendResult]) -> None:
            called.append("fail")
            raise RuntimeError("a callback's own bug")

        with loop_errors() as seen:
            producer.send_nowait("demo", b"one", callback=send_again)
            producer.send_nowait("demo", b"two", callback=fail)
            await producer.flush()
            assert sorted(called) == ["again", "fail"]
            await producer.flush()  # the send started by the callback
        assert [c["exception"].args for c in seen] == [("a callback's own bug",)]
        assert (await chained[0]).append_offset >= 0
        assert producer.sent == 3


async def test_a_send_whose_retry_close_cut_short_raises_client_closed() -> None:
    """apache/kafka#7967 (KAFKA-9449: a send blocked when another thread closed the producer
    needs the "closed" error, not an error callers take for a broken cluster) and
    dpkp/kafka-python#2060, met while trying aio-libs/aiokafka#1101 above: a send whose
    connect was under way when ``close()`` began, and then failed, raised that
    ``ConnectError`` (retriable, never sent) instead of ``ClientClosedError``, which a send
    cut short in its pause between two attempts got. Found by this sweep (one run in about ten
    of the test above); here the connect is held deterministically by a listener whose accept
    queue is full."""
    with socket.socket() as hole:
        hole.bind(("127.0.0.1", 0))
        hole.listen(0)
        with socket.create_connection(hole.getsockname()):  # fills the accept queue
            async with FakeCluster(topics={"demo": 2}) as cluster:
                cluster.advertise_broker(1, f"127.0.0.1:{hole.getsockname()[1]}")
                producer = Producer(
                    cluster.master_addr, topics=["demo"], close_grace=1, connect_timeout=0.2
                )
                await producer.start()
                send = asyncio.create_task(producer.send("demo", b"x", timeout=30))
                await asyncio.sleep(0.05)  # its connect hangs; close() begins meanwhile
                await producer.close()
                with pytest.raises(ClientClosedError, match="before this send could be retried"):
                    await send
                error = send.exception()
                assert error is not None
                assert isinstance(error.__cause__, ConnectError)
                assert producer.failed == 1


async def test_a_partition_given_up_does_not_end_a_waiting_getmany_early(
    cluster: FakeCluster,
) -> None:
    """aio-libs/aiokafka#117: ``getmany(timeout_ms=500)`` returned nothing before its timeout
    when the assignment changed meanwhile (it waited for data only once). Here a partition
    disconnected while ``getmany(timeout=0.3)`` waits on an idle topic leaves it waiting: it
    returns its empty batch at its timeout, not at the change."""
    async with ClientBalancedConsumer(cluster.master_addr, group="c117", topics=["demo"]) as cb:
        keys = [p.partition_key for p in await cb.partitions()]
        for key in keys:
            await cb.connect(key)
        loop = asyncio.get_running_loop()
        began = loop.time()
        waiting = asyncio.create_task(cb.getmany(timeout=0.3))
        await asyncio.sleep(0.05)
        await cb.disconnect(keys[0])
        assert not waiting.done()
        assert not await waiting
        assert loop.time() - began >= 0.29  # a lower bound (its timeout, less timer slack)


async def test_an_unresolvable_address_among_good_ones_is_passed_over(cluster: FakeCluster) -> None:
    """apache/kafka#336 (KAFKA-2657: clients failed to start when one bootstrap address did not
    resolve) and confluentinc/librdkafka#2159 (a failed resolution was not retried): a master
    list whose first name does not resolve starts every client on the next address, and a
    broker announced under a name that does not resolve fails a send typed, naming it, by the
    send's timeout."""
    masters = f"{UNRESOLVABLE},{cluster.master_addr}"
    clients = (
        Producer(masters, topics=["demo"]),
        Consumer(masters, group="g2657", topics=["demo"]),
        ClientBalancedConsumer(masters, group="c2657", topics=["demo"]),
    )
    for client in clients:
        async with client:
            assert not client.closed
    for broker in cluster.brokers:
        cluster.advertise_broker(broker.broker_id, "no-such-broker.invalid:8123")
    async with Producer(cluster.master_addr, topics=["demo"]) as producer:
        # ConnectError, or WriteTimeoutError when the deadline came during a lookup (not sent)
        with pytest.raises((ConnectError, WriteTimeoutError), match=r"no-such-broker\.invalid"):
            await producer.send("demo", b"x", timeout=0.3)
