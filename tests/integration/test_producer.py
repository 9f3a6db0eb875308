"""The Producer against the real TubeMQ cluster: routing, faults, bad input, cancellation."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import socket
import time
from datetime import datetime

import pytest

from tests.support.java_interop import java_dump
from tubemq_aio import (
    ClientClosedError,
    ConfigError,
    Consumer,
    NetworkError,
    NoMasterServiceError,
    Producer,
    SendOutcomeUnknownError,
    SendResult,
    TopicNotDeployedError,
)
from tubemq_aio.errors import TubeMQError
from tubemq_aio.protocol.deployment import Deployment
from tubemq_aio.testing import LocalCluster, wait_until

PARTITIONS_PER_BROKER = 3
#: A broker's memory cache reaches its files within this long (default flush interval 20 s).
MEMORY_FLUSH_WINDOW_MS = 30_000


async def test_send_returns_where_the_message_was_stored(cluster: LocalCluster, topic: str) -> None:
    async with Producer(cluster.master_addr, topics=[topic]) as producer:
        result = await producer.send(
            topic,
            b"hello",
            attributes={"k": "v"},
            msg_type="t1",
            msg_time=datetime(2026, 11, 22, 6, 30),
        )
    assert isinstance(result, SendResult)
    assert result.topic == topic
    assert result.partition_key == f"{result.broker_id}:{topic}:{result.partition_id}"
    assert result.message_id != -1
    assert result.append_offset >= 0
    assert result.append_time > 1_600_000_000_000


async def test_round_robin_covers_every_partition_and_keys_are_stable(
    cluster: LocalCluster, topic: str
) -> None:
    total = PARTITIONS_PER_BROKER * len(cluster.brokers)
    async with Producer(cluster.master_addr, topics=[topic]) as producer:
        spread = await asyncio.gather(*(producer.send(topic, b"x") for _ in range(total * 20)))
        keyed = [await producer.send(topic, b"k", key="user-42") for _ in range(30)]
        other = [await producer.send(topic, b"k", key=f"user-{i}") for i in range(60)]
    counts: dict[str, int] = {}
    for result in spread:
        counts[result.partition_key] = counts.get(result.partition_key, 0) + 1
    assert len(counts) == total, counts
    assert min(counts.values()) >= 10, counts
    assert len({r.partition_key for r in keyed}) == 1
    assert len({r.partition_key for r in other}) > 1


async def test_concurrent_sends_pipeline_and_offsets_grow(
    cluster: LocalCluster, topic: str
) -> None:
    async with Producer(cluster.master_addr, topics=[topic], max_in_flight_sends=64) as producer:
        results = await asyncio.gather(*(producer.send(topic, b"y" * 1024) for _ in range(3000)))
        metrics = producer.metrics()
    by_partition: dict[str, list[int]] = {}
    for result in results:
        by_partition.setdefault(result.partition_key, []).append(result.append_offset)
    for offsets in by_partition.values():
        assert len(set(offsets)) == len(offsets)
    assert metrics["sent"] == 3000
    assert metrics["failed"] == 0
    assert metrics["transport"]["connections_opened"] >= 1 + len(cluster.brokers)


async def test_flush_ends_when_every_send_nowait_was_stored(
    cluster: LocalCluster, topic: str
) -> None:
    async with Producer(cluster.master_addr, topics=[topic]) as producer:
        futures = [producer.send_nowait(topic, b"n%d" % i) for i in range(500)]
        await producer.flush(timeout=60)
        assert all(f.done() for f in futures)
        stored = {(f.result().partition_key, f.result().append_offset) for f in futures}
        assert len(stored) == 500


async def test_send_many_gives_one_result_per_message_and_a_usable_producer(
    cluster: LocalCluster, topic: str
) -> None:
    """A window smaller than the batch, a keyed batch, and a cancelled batch on the real broker."""
    bodies = [b"m%d-" % i + b"z" * 1000 for i in range(2000)]
    async with Producer(cluster.master_addr, topics=[topic], max_in_flight_sends=64) as producer:
        results = await producer.send_many(topic, bodies)
        keyed = await producer.send_many(topic, [b"k"] * 50, key="user-42")
        cancelled = asyncio.ensure_future(producer.send_many(topic, [b"c" * 512] * 500))
        await asyncio.sleep(0.01)
        cancelled.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await cancelled
        after = await producer.send_many(topic, [b"after"] * 10)
        metrics = producer.metrics()
    assert all(isinstance(r, SendResult) for r in results + keyed + after)
    stored = [r for r in results if isinstance(r, SendResult)]
    assert len({(r.partition_key, r.append_offset) for r in stored}) == 2000
    assert len({r.partition_key for r in stored}) == PARTITIONS_PER_BROKER * len(cluster.brokers)
    assert len({r.partition_key for r in keyed if isinstance(r, SendResult)}) == 1
    assert metrics["in_flight"] == 0
    assert metrics["sent"] + metrics["cancelled"] + metrics["failed"] == 2000 + 50 + 500 + 10


async def test_concurrent_first_sends_of_an_unpublished_topic_all_succeed(
    cluster: LocalCluster, topic: str
) -> None:
    """Sends racing on a topic's first use wait for its one publish instead of failing."""
    async with Producer(cluster.master_addr) as producer:
        before = producer.topics
        results = await asyncio.gather(*(producer.send(topic, b"first") for _ in range(64)))
        after = producer.topics
    assert before == ()
    assert after == (topic,)
    assert len(results) == 64
    assert all(r.partition_key.split(":")[1] == topic for r in results)


async def test_cancelling_many_sends_leaves_the_producer_usable(
    cluster: LocalCluster, topic: str
) -> None:
    async with Producer(cluster.master_addr, topics=[topic]) as producer:
        tasks = [asyncio.ensure_future(producer.send(topic, b"c" * 512)) for _ in range(500)]
        await asyncio.sleep(0)
        for task in tasks[::2]:
            task.cancel()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(isinstance(o, SendResult | asyncio.CancelledError) for o in outcomes)
        after = await asyncio.gather(*(producer.send(topic, b"after") for _ in range(100)))
        assert len(after) == 100
        assert producer.metrics()["in_flight"] == 0


async def test_bad_input_is_refused_before_any_traffic(cluster: LocalCluster, topic: str) -> None:
    async with Producer(cluster.master_addr, topics=[topic]) as producer:
        sent_before = producer.metrics()["transport"]["requests_sent"]
        bad_calls = [
            producer.send("", b"x"),
            producer.send("t" * 65, b"x"),
            producer.send(topic, "not bytes"),  # type: ignore[arg-type]
            producer.send(topic, b""),
            producer.send(topic, b"x", attributes={"a,b": "v"}),
            producer.send(topic, b"x", attributes={"k": "v=1"}),
            producer.send(topic, b"x", attributes={"$msgType$": "v"}),
            producer.send(topic, b"x" * (2 * 1024 * 1024)),
            producer.send(topic, b"x", msg_time="2026-11"),
        ]
        for call in bad_calls:
            with pytest.raises(ConfigError):
                await call
        assert producer.metrics()["transport"]["requests_sent"] == sent_before
        ok = await producer.send(topic, b"still fine")
        assert ok.topic == topic
    with pytest.raises(ClientClosedError):
        await producer.send(topic, b"after close")


async def test_topic_that_does_not_exist_is_unavailable(cluster: LocalCluster) -> None:
    """The real master answers the deployment check with 431 (issue 32: this took the whole
    ``publish_timeout`` before), and registers nothing for it."""
    async with Producer(cluster.master_addr, publish_timeout=10) as producer:
        loop = asyncio.get_running_loop()
        began = loop.time()
        with pytest.raises(TopicNotDeployedError, match="no_such_topic"):
            await producer.send("no_such_topic", b"x")
        assert loop.time() - began < 3.0
        assert "no_such_topic" not in producer.topics


async def test_the_deployment_check_reads_the_real_masters_answers(
    cluster: LocalCluster, topic: str
) -> None:
    """431 for an unknown topic, 400 (the node id, checked after the topics) for a deployed one:
    the order ``tubemq_aio.protocol.deployment`` relies on."""
    async with Producer(cluster.master_addr, topics=[topic]) as producer:
        session = producer._session
        assert session is not None
        assert await session._deployment(topic) is Deployment.DEPLOYED
        assert await session._deployment("no_such_topic") is Deployment.NOT_DEPLOYED
        assert isinstance(await producer.send(topic, b"still fine"), SendResult)


async def test_unreachable_master_gives_a_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    producer = Producer(f"127.0.0.1:{port}", register_attempts=2, connect_timeout=1)
    with pytest.raises(NetworkError, match=str(port)):
        await producer.start()
    with pytest.raises(ClientClosedError):
        await producer.send("t", b"x")


async def test_broker_killed_mid_stream(cluster: LocalCluster, topic: str) -> None:
    """A broker SIGKILLed mid-stream: sends move to the other broker or end in a typed error
    within their timeout, the producer uses both brokers again after the restart, and every
    acknowledged message can be consumed afterwards."""
    victim = cluster.brokers[-1]
    send_timeout = 3.0
    acked: dict[bytes, SendResult] = {}
    failures: list[tuple[BaseException, float]] = []
    async with Producer(
        cluster.master_addr, topics=[topic], send_timeout=send_timeout, heartbeat_interval=2
    ) as producer:
        stop = asyncio.Event()
        numbers = iter(range(10**9))

        async def pump() -> None:
            loop = asyncio.get_running_loop()
            while not stop.is_set():
                body = f"kill-{next(numbers)}".encode()
                began = loop.time()
                try:
                    acked[body] = await producer.send(topic, body)
                except TubeMQError as exc:
                    failures.append((exc, loop.time() - began))
                    await asyncio.sleep(0.05)

        def acked_by(broker_id: int, after_ms: float) -> int:
            return sum(
                r.broker_id == broker_id and r.append_time > after_ms for r in list(acked.values())
            )

        pumps = [asyncio.ensure_future(pump()) for _ in range(8)]
        survivor = cluster.brokers[0].broker_id
        await wait_until(lambda: acked_by(victim.broker_id, 0) >= 20, 30, "sends to the victim")
        killed_at_ms = time.time() * 1000
        await victim.kill()
        await wait_until(
            lambda: acked_by(survivor, killed_at_ms) >= 200,
            30,
            "sends stopped while one broker was down",
        )
        await victim.start()
        restarted_at_ms = time.time() * 1000
        await wait_until(
            lambda: acked_by(victim.broker_id, restarted_at_ms) >= 20,
            60,
            "sends to the restarted broker",
        )
        stop.set()
        await asyncio.gather(*pumps)
        recent = await asyncio.gather(*(producer.send(topic, b"r") for _ in range(200)))
        assert {r.broker_id for r in recent} == {b.broker_id for b in cluster.brokers}
    retries = 2
    for exc, took in failures:
        assert isinstance(exc, SendOutcomeUnknownError | NetworkError), repr(exc)
        assert took <= send_timeout * (retries + 1) + 2.0, (repr(exc), took)

    # The broker acknowledges a send once it is in its memory cache and writes that cache to its
    # files every few seconds (topic setting memCacheFlushIntvl, 20 s by default): a SIGKILL
    # loses what it had not written yet. That is the server's durability, not ours, so only
    # those may be missing: sent to the killed broker shortly before the kill.
    def at_risk(result: SendResult) -> bool:
        age = killed_at_ms - result.append_time
        return result.broker_id == victim.broker_id and 0 <= age <= MEMORY_FLUSH_WINDOW_MS

    must_arrive = {body for body, result in acked.items() if not at_risk(result)}
    assert any(acked[b].broker_id == victim.broker_id for b in must_arrive), "none after restart"
    pending = set(must_arrive)
    async with Consumer(
        cluster.master_addr, group=f"g_kill_{topic}", topics=[topic], consume_from="earliest"
    ) as consumer:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(120):
                async for msg in consumer:
                    pending.discard(msg.body)
                    if not pending:
                        break
    missing = sorted({acked[b].partition_key for b in pending})
    assert not pending, (
        f"{len(pending)} of {len(must_arrive)} acknowledged messages missing: {missing}"
    )


async def test_master_restart_reregisters_unaided(cluster: LocalCluster, topic: str) -> None:
    master = cluster.nodes[0]
    async with Producer(cluster.master_addr, topics=[topic], heartbeat_interval=1) as producer:
        await producer.send(topic, b"before")
        await master.restart()
        deadline = asyncio.get_running_loop().time() + 60
        while producer.metrics()["reregistrations"] == 0:
            assert asyncio.get_running_loop().time() < deadline, producer.metrics()
            await asyncio.sleep(0.5)
        result = await producer.send(topic, b"after")
        assert result.topic == topic


async def test_official_java_consumer_reads_what_we_sent(cluster: LocalCluster, topic: str) -> None:
    """20 000 messages with attributes, msgType and msgTime, read back by the Java client."""
    count = 20_000
    sent: dict[bytes, tuple[dict[str, str], str]] = {}
    async with Producer(cluster.master_addr, topics=[topic]) as producer:

        async def worker(start: int) -> None:
            for i in range(start, count, 64):
                body = f"py-{i}-".encode() + bytes([i % 256]) * (i % 700)
                attrs = {"idx": str(i), "lang": "python"}
                msg_type = f"type{i % 4}"
                await producer.send(
                    topic, body, attributes=attrs, msg_type=msg_type, msg_time="202611220630"
                )
                sent[body] = (attrs, msg_type)

        await asyncio.gather(*(worker(w) for w in range(64)))
    received = await java_dump(cluster, topic, f"g_java_{topic}", count)
    assert len(received) == count
    seen: set[bytes] = set()
    for item in received:
        body = base64.b64decode(item["body_b64"])
        attrs, msg_type = sent[body]
        seen.add(body)
        assert item["msg_type"] == msg_type
        assert item["msg_time"] == "202611220630"
        pairs = dict(kv.split("=", 1) for kv in item["attribute"].split(","))
        assert pairs["idx"] == attrs["idx"]
        assert pairs["lang"] == "python"
        assert pairs["$msgType$"] == msg_type
    assert seen == set(sent)


async def test_a_start_at_a_broker_port_fails_at_once_naming_the_master_port(
    cluster: LocalCluster, topic: str
) -> None:
    """A Producer and a Consumer given the real broker's client port for the master's: the
    broker answers ``No service 1 found on the server``; the start retried it for about 4 s
    and raised a bare ``ServiceNotPublishedError``. It fails at the first answer now."""
    address = cluster.brokers[0].addr
    clients = [Producer(address, topics=[topic]), Consumer(address, group="g_port", topics=[topic])]
    for client in clients:
        with pytest.raises(NoMasterServiceError) as caught:
            async with asyncio.timeout(30):
                await client.start()
        assert client.closed
        assert caught.value.address == address
        assert f"{address} is a TubeMQ node without the master service" in str(caught.value)
        assert "8715" in str(caught.value)
