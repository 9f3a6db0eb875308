"""A group offset below a store's minimum (the broker's retention deleted what it pointed at):
the fake answers as a 2.4.0 broker does (``DefaultOffsetManager.loadOffset`` and
``getOffset``, read in its source; the real cluster cannot delete a segment within a test's
time: the broker's clean-up runs at most once a minute, ``logClearupDurationMs``, and deletes
only whole segments older than the topic's ``deletePolicy``, never the one being written).

A register without an offset answers the stored offset as it is; one asking for an offset
raises it to the minimum; the first fetch moves the group up to the minimum and reads from
there (no error), and a commit then answers the new offset.
"""

from __future__ import annotations

import pytest

from tests.support.fake_helpers import cb_consumer, drain, group_consumer, produce
from tubemq_aio.testing import FakeCluster, wait_until
from tubemq_aio.testing._fake_store import INDEX_UNIT

KEY = "1:demo:0"
OLD = 10  # read and committed by the group
EXPIRED = 15  # of the store's oldest messages, deleted by retention: 5 the group never read


async def _committed_then_expired(cluster: FakeCluster) -> list[bytes]:
    """The group ``g1`` reads :data:`OLD` messages; 20 more follow; retention deletes the
    oldest :data:`EXPIRED`. Returns the messages the group has not read, oldest first."""
    old = await produce(cluster.master_addr, "demo", OLD, prefix="old")
    async with cb_consumer(cluster, "g1") as consumer:
        await consumer.connect(KEY)
        assert sorted(await drain(consumer, OLD, timeout=10)) == sorted(old)
        await consumer.disconnect(KEY)
    assert cluster.group_offset("g1", 1, "demo", 0) == OLD * INDEX_UNIT
    unread = await produce(cluster.master_addr, "demo", 20, prefix="unread")
    assert cluster.expire_oldest(1, "demo", EXPIRED) == EXPIRED * INDEX_UNIT
    return unread


async def test_a_fetch_below_the_minimum_moves_the_group_up_and_reads_from_there() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        unread = await _committed_then_expired(cluster)
        async with cb_consumer(cluster, "g1") as consumer:
            position = await consumer.connect(KEY)
            assert position.current_offset == OLD * INDEX_UNIT  # the stored offset as it is
            got = await drain(consumer, 20 - (EXPIRED - OLD), timeout=10)
            assert got == unread[EXPIRED - OLD :]
            assert consumer.stats.fetch_errors == 0


async def test_a_server_balanced_member_reads_on_from_the_minimum() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        unread = await _committed_then_expired(cluster)
        async with group_consumer(cluster, "g1") as consumer:
            await wait_until(lambda: consumer.assignment() == [KEY], 20, "the partition held")
            got = await drain(consumer, 20 - (EXPIRED - OLD), timeout=10)
            assert got == unread[EXPIRED - OLD :]
            assert not await consumer.getmany(timeout=0.5)
        assert cluster.group_offset("g1", 1, "demo", 0) == (OLD + 20) * INDEX_UNIT


async def test_a_requested_offset_below_the_minimum_is_raised_to_it() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        unread = await _committed_then_expired(cluster)
        async with cb_consumer(cluster, "g1") as consumer:
            read = await consumer.read_at(KEY, 0)
            assert read.start_offset == EXPIRED * INDEX_UNIT
            assert [m.body for m in read.messages] == unread[EXPIRED - OLD :][: len(read.messages)]
            assert await consumer.offset_bounds(KEY) == (EXPIRED * INDEX_UNIT, 30 * INDEX_UNIT)


#: (broker_id, topic, count, store) with the error each gets, and the words it names.
BAD_EXPIRES: list[tuple[object, object, object, object, type[Exception], str]] = [
    (1, "demo", 1.5, 0, TypeError, "count must be an int"),
    (1, "demo", True, 0, TypeError, "count must be an int"),
    (1, "demo", "1", 0, TypeError, "count must be an int"),
    (1, "demo", None, 0, TypeError, "count must be an int"),
    (1, "demo", -1, 0, ValueError, "count must be >= 0"),
    (1, "demo", 1, 0.0, TypeError, "store must be an int"),
    (1, "demo", 1, False, TypeError, "store must be an int"),
    (1, "demo", 1, True, TypeError, "store must be an int"),
    (1, "demo", 1, "0", TypeError, "store must be an int"),
    (1, "demo", 1, -1, ValueError, "store must be >= 0"),
    (1, "demo", 1, 1, KeyError, "has no store 1"),
    (1, "demo", 1, 2**70, KeyError, "has no store"),
    (True, "demo", 1, 0, TypeError, "broker_id must be an int"),
    (1.0, "demo", 1, 0, TypeError, "broker_id must be an int"),
    ("1", "demo", 1, 0, TypeError, "broker_id must be an int"),
    (9, "demo", 1, 0, KeyError, "no broker 9"),
    (-1, "demo", 1, 0, KeyError, "no broker -1"),
    (1, "nope", 1, 0, KeyError, "no topic 'nope'"),
    (1, b"demo", 1, 0, TypeError, "topic must be a str"),
    (1, ["demo"], 1, 0, TypeError, "topic must be a str"),
    (1, None, 1, 0, TypeError, "topic must be a str"),
]


async def test_expire_oldest_refuses_bad_input_and_stops_at_the_end() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        await produce(cluster.master_addr, "demo", 3, prefix="m")
        for broker_id, topic, count, store, error, words in BAD_EXPIRES:
            with pytest.raises(error, match=words):
                cluster.expire_oldest(broker_id, topic, count, store=store)  # type: ignore[arg-type]
        assert cluster.expire_oldest(1, "demo", 0) == 0  # nothing expired by the refusals
        assert cluster.expire_oldest(1, "demo", 10) == 3 * INDEX_UNIT  # never past the end
        assert cluster.expire_oldest(1, "demo", 2**64) == 3 * INDEX_UNIT
        assert cluster.expire_oldest(1, "demo", 0) == 3 * INDEX_UNIT
