"""A broker SIGKILLed with messages in its memory cache comes back without them, and the
messages produced to it right after its return take their offsets, below the offsets a group
had read up to, before the group registers there again (issue 30): the server-balanced group
(registered again when the master hands the partitions back) and the client-balanced consumer
(re-connecting the partitions it lost with the broker).

Two groups read the same traffic: one with the tail check (the default), one without it
(``tail_check_depth=0``, what the consumer did before). Every message acknowledged after the
restart must reach the first group; what the second group missed is printed, and shows
whether this run hit the case at all (it depends on when the broker last flushed its memory
cache, every 20 s by default, and its group offsets, every 5 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter

import pytest

from tubemq_aio import ClientBalancedConsumer, Consumer, Producer, TubeMQError
from tubemq_aio.testing import LocalCluster
from tubemq_aio.testing.polling import wait_until

pytestmark = pytest.mark.timeout(300)

#: The partitions of a test topic on each broker (tests/integration/conftest.py).
PER_BROKER = 3


async def _consume(consumer: Consumer | ClientBalancedConsumer, got: Counter[bytes]) -> None:
    """Read and ack until cancelled, counting every body received."""
    while True:
        batch = await consumer.getmany(timeout=0.5)
        got.update(m.body for m in batch)
        if batch:
            await batch.ack()


async def _send(
    producer: Producer, topic: str, prefix: str, seconds: float, sent: dict[bytes, str]
) -> None:
    """Send ``{prefix}-{i}`` in groups of 10 every 0.1 s for ``seconds``; record each
    acknowledged body with its broker id (sends refused or unanswered during the broker's
    restart are dropped: only acknowledged messages count)."""
    end = time.monotonic() + seconds
    i = 0

    async def one(body: bytes) -> None:
        with contextlib.suppress(TubeMQError):
            result = await producer.send(topic, body, timeout=5)
            sent[body] = result.partition_key.split(":", 1)[0]

    while time.monotonic() < end:
        bodies = [f"{prefix}-{i + k}".encode() for k in range(10)]
        i += 10
        await asyncio.gather(*(one(b) for b in bodies))
        await asyncio.sleep(0.1)


@pytest.mark.parametrize(
    "before_seconds",
    [
        # The kill comes before the broker's first memory-cache flush of the new topic: it
        # comes back with an empty store, and every offset the groups read holds a new message.
        6,
        # After a flush (every 20 s): it keeps the older messages and loses only the newest.
        26,
    ],
)
async def test_messages_a_sigkilled_broker_stored_below_the_groups_offset_are_consumed(
    cluster: LocalCluster, topic: str, before_seconds: int
) -> None:
    total = PER_BROKER * len(cluster.brokers)
    victim = cluster.brokers[-1]
    victim_id = str(victim.broker_id)
    master = cluster.master_addr
    options: dict[str, object] = {"consume_from": "earliest", "join_heartbeat_interval": 1.0}
    before: dict[bytes, str] = {}
    after: dict[bytes, str] = {}
    got_checked: Counter[bytes] = Counter()
    got_unchecked: Counter[bytes] = Counter()
    async with (
        Producer(master, topics=[topic]) as producer,
        Consumer(master, group=f"tail_on_{topic}", topics=[topic], **options) as checked,  # type: ignore[arg-type]
        Consumer(
            master,
            group=f"tail_off_{topic}",
            topics=[topic],
            tail_check_depth=0,
            **options,  # type: ignore[arg-type]
        ) as unchecked,
    ):
        await wait_until(
            lambda: len(checked.assignment()) == len(unchecked.assignment()) == total,
            60,
            "both groups hold every partition",
        )
        readers = [
            asyncio.create_task(_consume(checked, got_checked)),
            asyncio.create_task(_consume(unchecked, got_unchecked)),
        ]
        try:
            # Traffic both groups keep up with, then a pause in which the broker writes the
            # groups' offsets to its offset file (every 5 s) while the newest messages stay
            # in its memory cache (flushed every 20 s).
            await _send(producer, topic, "before", before_seconds, before)
            assert sum(b == victim_id for b in before.values()) >= 20, before
            await wait_until(
                lambda: set(before) <= set(got_checked) and set(before) <= set(got_unchecked),
                30,
                "every message before the kill read by both groups",
            )
            await asyncio.sleep(6.5)
            await victim.kill()
            await victim.start()
            # Produce right after its return: the groups register there again only once the
            # master hands the partitions back (heartbeat_interval, 13 s, and a balance cycle).
            await _send(producer, topic, "after", 20, after)
            stored_after = sum(b == victim_id for b in after.values())
            assert stored_after >= 50, f"only {stored_after} sent to broker {victim_id}"
            deadline = time.monotonic() + 90
            while not set(after) <= set(got_checked):
                missing = sorted(set(after) - set(got_checked))
                assert time.monotonic() < deadline, (
                    f"{len(missing)} of {len(after)} messages acknowledged after the restart "
                    f"never reached the checked group: {missing[:20]}; stats {checked.stats}"
                )
                await asyncio.sleep(0.5)
            await asyncio.sleep(3)  # the unchecked group had as long, and 3 s more
        finally:
            for reader in readers:
                reader.cancel()
            await asyncio.gather(*readers, return_exceptions=True)
        skipped = set(after) - set(got_unchecked)
        again = sum(n - 1 for n in got_checked.values() if n > 1)
        print(
            f"after the restart: {len(after)} acknowledged ({stored_after} on broker "
            f"{victim_id}); the checked group read all, {again} twice, stats "
            f"tail_checks={checked.stats.tail_checks} tail_rewinds={checked.stats.tail_rewinds} "
            f"tail_unverified={checked.stats.tail_unverified} "
            f"before={len(before)} "
            f"offset_rewinds={checked.stats.offset_rewinds}; the unchecked group skipped "
            f"{len(skipped)}, offset_rewinds={unchecked.stats.offset_rewinds}"
        )
        assert checked.stats.tail_checks >= 1  # the check ran for the restarted broker's partitions
        assert checked.stats.tail_unverified == 0
        if skipped:  # the run hit the case: the check must have seen it
            assert checked.stats.tail_rewinds >= 1
        # What the unchecked group skipped were all stored on the restarted broker.
        assert {after[b] for b in skipped} <= {victim_id}


async def test_a_client_balanced_consumer_reads_what_a_sigkilled_broker_stored_below_it(
    cluster: LocalCluster, topic: str
) -> None:
    """The same kill before the broker's first flush, read by two client-balanced consumers
    (with and without the check) holding every partition. They re-connect a lost partition
    after ``reconnect_delay`` (8 s here, doubling), so the producer has time to store new
    messages past their offsets first."""
    total = PER_BROKER * len(cluster.brokers)
    victim = cluster.brokers[-1]
    victim_id = str(victim.broker_id)
    master = cluster.master_addr
    options: dict[str, object] = {
        "consume_from": "earliest",
        "source_count": 1,
        "node_id": 0,
        "reconnect_delay": 8.0,
        "reconnect_delay_max": 16.0,
    }
    before: dict[bytes, str] = {}
    after: dict[bytes, str] = {}
    got_checked: Counter[bytes] = Counter()
    got_unchecked: Counter[bytes] = Counter()
    async with (
        Producer(master, topics=[topic]) as producer,
        ClientBalancedConsumer(
            master, group=f"cb_on_{topic}", topics=[topic], **options
        ) as checked,  # type: ignore[arg-type]
        ClientBalancedConsumer(
            master,
            group=f"cb_off_{topic}",
            topics=[topic],
            tail_check_depth=0,
            **options,  # type: ignore[arg-type]
        ) as unchecked,
    ):
        for consumer in (checked, unchecked):
            metas = await consumer.partitions()
            assert len(metas) == total
            for meta in metas:
                await consumer.connect(meta.partition_key)
        readers = [
            asyncio.create_task(_consume(checked, got_checked)),
            asyncio.create_task(_consume(unchecked, got_unchecked)),
        ]
        try:
            await _send(producer, topic, "before", 6, before)
            assert sum(b == victim_id for b in before.values()) >= 20, before
            await wait_until(
                lambda: set(before) <= set(got_checked) and set(before) <= set(got_unchecked),
                30,
                "every message before the kill read by both consumers",
            )
            await asyncio.sleep(6.5)  # the broker writes the groups' offsets (every 5 s)
            await victim.kill()
            await victim.start()
            await _send(producer, topic, "after", 20, after)
            stored_after = sum(b == victim_id for b in after.values())
            assert stored_after >= 50, f"only {stored_after} sent to broker {victim_id}"
            deadline = time.monotonic() + 90
            while not set(after) <= set(got_checked):
                missing = sorted(set(after) - set(got_checked))
                assert time.monotonic() < deadline, (
                    f"{len(missing)} of {len(after)} messages acknowledged after the restart "
                    f"never reached the checked consumer: {missing[:20]}; stats {checked.stats}"
                )
                await asyncio.sleep(0.5)
            await asyncio.sleep(3)
        finally:
            for reader in readers:
                reader.cancel()
            await asyncio.gather(*readers, return_exceptions=True)
        skipped = set(after) - set(got_unchecked)
        again = sum(n - 1 for n in got_checked.values() if n > 1)
        print(
            f"client-balanced, after the restart: {len(after)} acknowledged ({stored_after} on "
            f"broker {victim_id}); the checked consumer read all, {again} twice, stats "
            f"partitions_reconnected={checked.stats.partitions_reconnected} "
            f"tail_checks={checked.stats.tail_checks} tail_rewinds={checked.stats.tail_rewinds} "
            f"tail_unverified={checked.stats.tail_unverified} "
            f"offset_rewinds={checked.stats.offset_rewinds}; the unchecked consumer skipped "
            f"{len(skipped)}, offset_rewinds={unchecked.stats.offset_rewinds}"
        )
        assert checked.stats.partitions_reconnected >= PER_BROKER
        assert checked.stats.tail_checks >= 1  # the check ran for the re-connected partitions
        assert checked.stats.tail_unverified == 0
        if skipped:  # the run hit the case: the check must have seen it
            assert checked.stats.tail_rewinds >= 1
        assert {after[b] for b in skipped} <= {victim_id}
