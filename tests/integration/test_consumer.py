"""The Consumer against the real cluster: data written by the official Java producer."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.support.undeployed_topic import fails_at_once_naming_the_missing_topic
from tubemq_aio.consumer import Consumer, ConsumerConfig, MessageBatch
from tubemq_aio.errors import ClientClosedError, ConfigError, TopicNotDeployedError
from tubemq_aio.models import Message
from tubemq_aio.testing import LocalCluster, wait_until

#: Java producer run from source: body ``{prefix}-{i}``, attributes idx/src, msgType even/odd.
JAVA_PRODUCER = """
import java.nio.charset.StandardCharsets;
import org.apache.inlong.tubemq.client.config.TubeClientConfig;
import org.apache.inlong.tubemq.client.factory.TubeSingleSessionFactory;
import org.apache.inlong.tubemq.client.producer.MessageProducer;
import org.apache.inlong.tubemq.client.producer.MessageSentResult;
import org.apache.inlong.tubemq.corebase.Message;

public class JavaProducer {
    public static void main(String[] a) throws Throwable {
        String master = a[0], topic = a[1], prefix = a[3];
        int count = Integer.parseInt(a[2]);
        TubeSingleSessionFactory f = new TubeSingleSessionFactory(new TubeClientConfig(master));
        MessageProducer p = f.createProducer();
        p.publish(topic);
        long deadline = System.currentTimeMillis() + 60000;
        for (int i = 0; i < count; i++) {
            Message m = new Message(topic, (prefix + "-" + i).getBytes(StandardCharsets.UTF_8));
            m.setAttrKeyVal("idx", Integer.toString(i));
            m.setAttrKeyVal("src", "java");
            m.putSystemHeader(i % 2 == 0 ? "even" : "odd", "202601020304");
            while (true) {
                try {
                    MessageSentResult r = p.sendMessage(m);
                    if (r.isSuccess()) break;
                    System.out.println("RETRY " + i + " " + r.getErrCode() + " " + r.getErrMsg());
                } catch (Exception e) {
                    System.out.println("RETRY " + i + " " + e);
                }
                if (System.currentTimeMillis() > deadline) {
                    System.out.println("FAILED " + i);
                    System.exit(2);
                }
                Thread.sleep(200);
            }
        }
        System.out.println("SENT " + count);
        p.shutdown();
        f.shutdown();
        System.exit(0);
    }
}
"""

HEARTBEAT = 2.0  # seconds; the test master balances every 2 s
Produce = Callable[[str, int, str], Awaitable[None]]


@pytest.fixture(scope="session")
def java_producer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``JavaProducer.java`` (written by this module) compiled once per run."""
    out = tmp_path_factory.mktemp("javaproducer")
    (out / "JavaProducer.java").write_text(JAVA_PRODUCER)
    return out


@pytest_asyncio.fixture
async def produce(cluster: LocalCluster, java_producer_dir: Path) -> Produce:
    """``await produce(topic, count, prefix)`` with the official Java client."""
    classes = java_producer_dir / "classes"
    if not classes.exists():
        argv = cluster.java_tool_argv("JavaProducer")
        cp = argv[argv.index("-cp") + 1]
        source = str(java_producer_dir / "JavaProducer.java")
        javac = await asyncio.create_subprocess_exec(
            "javac",
            "-cp",
            cp,
            "-d",
            str(classes),
            source,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await asyncio.wait_for(javac.communicate(), 120)
        assert javac.returncode == 0, out.decode(errors="replace")

    async def run(topic: str, count: int, prefix: str) -> None:
        argv = cluster.java_tool_argv(
            "JavaProducer", cluster.master_addr, topic, str(count), prefix
        )
        i = argv.index("-cp") + 1
        argv[i] = f"{classes}:{argv[i]}"
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), 120)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            pytest.fail("the Java producer did not finish in 120 s")
        text = out.decode(errors="replace")
        assert f"SENT {count}" in text, text[-3000:]

    return run


def expected(prefix: str, i: int) -> dict[str, Any]:
    """What the Java producer wrote as message ``i``."""
    return {
        "body": f"{prefix}-{i}".encode(),
        "attributes": {"idx": str(i), "src": "java"},
        "msg_type": "even" if i % 2 == 0 else "odd",
        "msg_time": datetime(2026, 1, 2, 3, 4),
    }


def seen(msg: Message) -> dict[str, Any]:
    """The fields of ``msg`` compared with :func:`expected`."""
    return {
        "body": msg.body,
        "attributes": dict(msg.attributes),
        "msg_type": msg.msg_type,
        "msg_time": msg.msg_time,
    }


def consumer(cluster: LocalCluster, group: str, topics: Any, **kw: Any) -> Consumer:
    """A consumer with test-friendly timings."""
    kw.setdefault("consume_from", "earliest")
    return Consumer(
        cluster.master_addr, group=group, topics=topics, heartbeat_interval=HEARTBEAT, **kw
    )


async def collect(c: Consumer, count: int, timeout: float = 30) -> list[Message]:
    """Ack batches until ``count`` messages arrived (fails after ``timeout`` seconds)."""
    got: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        assert time.monotonic() < deadline, f"only {len(got)} of {count} messages: {c!r}"
        async with await c.getmany(timeout=0.5) as batch:
            got.extend(batch)
    return got


@pytest_asyncio.fixture
async def closing() -> AsyncIterator[list[Consumer]]:
    """Consumers appended here are closed at the end of the test, whatever happens."""
    items: list[Consumer] = []
    yield items
    for item in items:
        await item.close()


async def test_earliest_reads_java_messages_identically(
    cluster: LocalCluster, topic: str, produce: Produce, closing: list[Consumer]
) -> None:
    """Pre-existing messages from the Java producer arrive with identical content."""
    await produce(topic, 40, "a")
    c = consumer(cluster, f"g_{topic}", [topic], fetchers=2, max_prefetch_batches=1)
    closing.append(c)
    t0 = time.monotonic()
    await c.start()
    # Backpressure: with the one prefetch slot full and nobody reading, nothing is fetched.
    await wait_until(lambda: c.stats.batches == 1, 20, "the first batch")
    fetches = c.stats.fetches
    await asyncio.sleep(1.0)
    assert (c.stats.fetches, c.stats.batches) == (fetches, 1)
    got = await collect(c, 40)
    elapsed = time.monotonic() - t0
    by_body = {m.body: m for m in got}
    assert len(by_body) == 40
    for i in range(40):
        assert seen(by_body[f"a-{i}".encode()]) == expected("a", i)
    assert all(m.topic == topic and m.crc_ok for m in got)
    assert len({m.message_id for m in got}) == 40
    assert {m.partition_key for m in got} <= set(c.assignment())
    assert len(c.assignment()) == 6
    stats = c.stats.snapshot()
    assert stats["crc_mismatches"] == stats["decode_errors"] == 0
    assert stats["acks"] >= 1
    # Read to the end: every partition's last fetch found no new data. Not "lag 0 everywhere":
    # a broker's three partitions share one store index (see PartitionPosition.at_end), so a
    # partition whose reads ended before the store's last entries (written for its
    # neighbours, or flushed to the file index only after its read) shows a lag for ever.
    # The partition holding its store's last entry has read it, so each broker has one at 0.
    await wait_until(
        lambda: all(p.at_end for p in c.positions().values()), 30, "every partition at its end"
    )
    lowest: dict[str, int] = {}
    for key, position in c.positions().items():
        broker = key.split(":")[0]
        lowest[broker] = min(lowest.get(broker, position.lag), position.lag)
    assert lowest == dict.fromkeys(lowest, 0), c.positions()
    print(f"40 messages consumed {elapsed:.1f}s after start, stats {stats}")


async def test_nack_and_expiry_redeliver_and_close_commits(
    cluster: LocalCluster, topic: str, produce: Produce, closing: list[Consumer]
) -> None:
    """A batch not acked within ``confirm_timeout`` is taken back and comes again, so does a
    nacked one; acked batches stay consumed for the group after close."""
    await produce(topic, 30, "n")
    group = f"g_{topic}"
    c = consumer(cluster, group, [topic], confirm_timeout=1)
    closing.append(c)
    await c.start()
    first = await c.getmany(timeout=20)
    assert first, "no batch within 20 s"
    ids = [m.message_id for m in first]
    # Reclaimed by the master-heartbeat task (every 2 s here) once older than 1 s.
    await wait_until(lambda: c.stats.expired >= 1, 10, "the lease to expire")
    assert not await first.ack()
    got: list[Message] = []

    async def next_of_first_partition() -> MessageBatch:
        deadline = time.monotonic() + 20
        while True:
            assert time.monotonic() < deadline
            batch = await c.getmany(timeout=0.5)
            if batch.partition_key == first.partition_key:
                return batch
            got.extend(batch)
            await batch.ack()

    expired_again = await next_of_first_partition()
    assert [m.message_id for m in expired_again] == ids
    assert await expired_again.nack()
    assert not await expired_again.ack()  # settled already
    nacked_again = await next_of_first_partition()
    assert [m.message_id for m in nacked_again] == ids
    got.extend(nacked_again)
    assert await nacked_again.ack()
    wanted = {f"n-{i}".encode() for i in range(30)}
    deadline = time.monotonic() + 30
    while {m.body for m in got} != wanted:  # a rare late ack may also bring a duplicate
        assert time.monotonic() < deadline, c
        async with await c.getmany(timeout=0.5) as batch:
            got.extend(batch)
    await c.close()
    with pytest.raises(ClientClosedError):
        await c.getmany(timeout=0)
    assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("tubemq-consumer")]

    # Same group again: everything was committed, nothing is delivered.
    d = consumer(cluster, group, [topic])
    closing.append(d)
    await d.start()
    await wait_until(lambda: len(d.assignment()) == 6, 20, "reassignment")
    assert not await d.getmany(timeout=3)
    assert all(p.lag == 0 for p in d.positions().values()), d.positions()


async def test_close_hands_partitions_to_second_consumer(
    cluster: LocalCluster, topic: str, produce: Produce, closing: list[Consumer]
) -> None:
    """Two members share the partitions; after one closes the other takes all within a few
    heartbeats, and no message is lost."""
    await produce(topic, 20, "h")
    group = f"g_{topic}"
    events: list[tuple[str, str, int]] = []

    def hooks(name: str) -> dict[str, Any]:
        return {
            "on_assigned": lambda keys: events.append((name, "assigned", len(keys))),
            "on_revoked": lambda keys: events.append((name, "revoked", len(keys))),
        }

    a = consumer(cluster, group, [topic], **hooks("a"))
    b = consumer(cluster, group, [topic], **hooks("b"))
    closing.extend([a, b])
    await a.start()
    await wait_until(lambda: len(a.assignment()) == 6, 20, "first assignment")
    await b.start()
    t0 = time.monotonic()
    await wait_until(lambda: len(b.assignment()) > 0, 30, "a split")
    t_split = time.monotonic() - t0
    await wait_until(lambda: len(a.assignment()) + len(b.assignment()) == 6, 10, "stable split")
    assert not set(a.assignment()) & set(b.assignment())
    t0 = time.monotonic()
    await a.close()
    close_time = time.monotonic() - t0
    t0 = time.monotonic()
    await wait_until(lambda: len(b.assignment()) == 6, 30, "takeover")
    t_move = time.monotonic() - t0
    got = await collect(b, 20)
    assert {m.body for m in got} >= {f"h-{i}".encode() for i in range(20)}
    print(f"split after {t_split:.1f}s; close {close_time:.2f}s; takeover {t_move:.1f}s")
    assert close_time < 5
    assert events[0] == ("a", "assigned", 6)
    revoked = [n for who, what, n in events if who == "a" and what == "revoked"]
    assert revoked
    assert 0 < revoked[0] < 6
    assert sum(n for who, what, n in events if who == "b" and what == "assigned") == 6


async def test_latest_async_for_and_filters(
    cluster: LocalCluster, topic: str, produce: Produce, closing: list[Consumer]
) -> None:
    """``latest`` skips what was there; ``async for`` yields new messages; msgType filters;
    master fail-over."""
    await produce(topic, 10, "old")
    c = consumer(cluster, f"g_{topic}", [topic], consume_from="latest")
    closing.append(c)
    await c.start()
    await wait_until(lambda: len(c.assignment()) == 6, 20, "assignment")
    await produce(topic, 10, "new")
    got: list[Message] = []
    async with asyncio.timeout(30):
        async for msg in c:
            got.append(msg)
            if len(got) == 10:
                break
    assert sorted(m.body for m in got) == sorted(f"new-{i}".encode() for i in range(10))

    # Group flow-control rules travel from the master's web API to the consumer
    # (docs/protocol/consumer.md §7).
    rule = [
        {
            "type": 3,
            "rule": [{"normFreqInMs": 500, "filterFreqInMs": 0, "minDataFilterFreqInMs": 0}],
        }
    ]
    await cluster.web_api.call(
        "admin_set_group_flow_control_rule",
        modify=True,
        groupName=f"gf_{topic}",
        flowCtrlInfo=json.dumps(rule),
        statusId=1,
        # Units digit 3: filter consumers may read the broker's memory cache. With the default
        # 301 they see only what was flushed to file, seconds later (§7.4).
        qryPriorityId=303,
    )
    # A dead first master address: the consumer fails over to the live one.
    f = Consumer(
        f"127.0.0.1:1,{cluster.master_addr}",
        group=f"gf_{topic}",
        topics={topic: {"even"}},
        consume_from="earliest",
        heartbeat_interval=HEARTBEAT,
    )
    closing.append(f)
    await f.start()
    evens = await collect(f, 10)
    assert {m.msg_type for m in evens} == {"even"}
    expected_bodies = {f"{p}-{i}".encode() for p in ("old", "new") for i in range(0, 10, 2)}
    assert {m.body for m in evens} == expected_bodies
    assert not await f.getmany(timeout=1)
    assert f._session is not None
    assert f._session.flow.group.check_id >= 0
    assert f._session.flow.group.rules.low_fetch.norm_freq_ms == 500
    assert f._session.flow.qry_priority_id == 303


async def test_bad_input_raises_typed_errors(cluster: LocalCluster) -> None:
    """Invalid arguments raise ConfigError; unknown topics TopicNotDeployedError; closed use
    raises."""
    master = cluster.master_addr
    with pytest.raises(ConfigError):
        Consumer(master, group="", topics=["t"])
    with pytest.raises(ConfigError):
        Consumer(master, group="g1", topics=[])
    with pytest.raises(ConfigError):
        Consumer(master, group="g1", topics=["t"], consume_from="middle")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        Consumer(master, group="g1", topics=["bad#name"])
    with pytest.raises(ConfigError):
        ConsumerConfig(masters=master, group="g1", topics=["t"], fetchers=0)  # type: ignore[arg-type]
    c = Consumer(master, group="g_bad", topics=["no_such_topic_here"])
    with pytest.raises(TopicNotDeployedError) as info:
        await c.start()
    assert info.value.err_code == 431
    with pytest.raises(ClientClosedError):
        await c.getmany(timeout=0)
    await c.close()
    with pytest.raises(ClientClosedError):
        await c.getmany(timeout=0)
    assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("tubemq-consumer")]
    with pytest.raises(ClientClosedError):
        await c.start()


async def test_run_push_style_pause_and_redelivery(
    cluster: LocalCluster, topic: str, produce: Produce, closing: list[Consumer]
) -> None:
    """A paused topic is not fetched; ``run`` handles every message, a failing handler call
    gets its batch redelivered."""
    await produce(topic, 20, "p")
    c = consumer(cluster, f"g_{topic}", [topic])
    closing.append(c)
    c.pause([topic])
    await c.start()
    await wait_until(lambda: len(c.assignment()) == 6, 20, "assignment")
    await asyncio.sleep(1)
    assert c.stats.fetches == 0
    assert not await c.getmany(timeout=0.5)
    c.resume([topic])

    seen_bodies: list[bytes] = []
    failed: list[bytes] = []

    async def handler(msg: Message) -> None:
        if msg.body == b"p-5" and not failed:
            failed.append(msg.body)
            raise RuntimeError("first attempt fails")
        seen_bodies.append(msg.body)

    runner = asyncio.ensure_future(c.run(handler, concurrency=3))
    await wait_until(lambda: len(set(seen_bodies)) == 20, 30, "all messages handled")
    await c.close()
    await asyncio.wait_for(runner, 10)  # run() returns once the consumer is closed
    assert set(seen_bodies) == {f"p-{i}".encode() for i in range(20)}
    assert failed == [b"p-5"]
    assert c.stats.nacks >= 1


CRASHING_MEMBER = """
import asyncio, sys
from tubemq_aio.consumer import Consumer

async def main() -> None:
    c = Consumer(sys.argv[1], group=sys.argv[2], topics=[sys.argv[3]], heartbeat_interval=2)
    await c.start()
    while len(c.assignment()) < 6:
        await asyncio.sleep(0.05)
    print("ASSIGNED", flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


async def share_group_with_java(cluster: LocalCluster, topic: str, closing: list[Consumer]) -> None:
    """Our consumer and the official Java consumer split one group's partitions."""
    group = f"gj_{topic}"
    c = consumer(cluster, group, [topic])
    closing.append(c)
    await c.start()
    await wait_until(lambda: len(c.assignment()) == 6, 20, "assignment")
    argv = cluster.java_tool_argv(
        "org.apache.inlong.tubemq.server.tools.cli.CliConsumer",
        *("--master-servers", cluster.master_addr, "--topicName", topic, "--groupName", group),
        *("--consume-position", "-1", "--num-fetch-threads", "1", "--client-count", "1"),
        *("--messages", "100000000"),
    )
    java = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )
    try:
        t0 = time.monotonic()
        await wait_until(lambda: 0 < len(c.assignment()) < 6, 60, "the Java member")
        took = time.monotonic() - t0
        await asyncio.sleep(2 * HEARTBEAT)
        assert 0 < len(c.assignment()) < 6  # stable: the rest is the Java member's
        print(f"the Java member took its share after {took:.1f}s; we keep {c.assignment()}")
    finally:
        java.kill()
        await java.wait()
    await c.close()


async def test_partitions_of_a_killed_member_come_back(
    cluster: LocalCluster,
    topic: str,
    produce: Produce,
    closing: list[Consumer],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A member killed with SIGKILL keeps its broker registrations until they time out: the
    survivor is refused with 410 PARTITION_OCCUPIED meanwhile and takes every partition once
    the brokers let go (``consumerRegTimeoutMs`` = 35 s in the test cluster). During that wait
    another group on the topic is shared with the Java consumer."""
    group = f"g_{topic}"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CRASHING_MEMBER,
        cluster.master_addr,
        group,
        topic,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        assert line.strip() == b"ASSIGNED"
    finally:
        proc.kill()
        await proc.wait()
    caplog.set_level(logging.INFO, logger="tubemq_aio.consumer")
    survivor = consumer(cluster, group, [topic])
    closing.append(survivor)
    await survivor.start()
    await produce(topic, 10, "k")
    # Meanwhile, on the same topic, a second group shared with the official Java consumer.
    t0 = time.monotonic()

    async def takeover() -> float:
        await wait_until(lambda: len(survivor.assignment()) == 6, 90, "the takeover")
        return time.monotonic() - t0

    took, _ = await asyncio.gather(
        takeover(),
        share_group_with_java(cluster, topic, closing),
    )
    got = await collect(survivor, 10)
    assert {m.body for m in got} == {f"k-{i}".encode() for i in range(10)}
    assert "[410]" in caplog.text  # PARTITION_OCCUPIED while the broker still held them
    print(f"partitions of the killed member taken over after {took:.1f}s")


async def test_an_undeployed_topic_fails_the_start_at_once_naming_it(
    cluster: LocalCluster, topic: str
) -> None:
    """The real master's 431 becomes ``TopicNotDeployedError`` naming only the missing topic
    (still a ``ServerError`` 431), before the register deadline: no retries (issue 32)."""
    await fails_at_once_naming_the_missing_topic(
        functools.partial(Consumer, cluster.master_addr, group=f"g431_{topic}"), [topic]
    )
