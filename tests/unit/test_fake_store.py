"""StoreLog: the fake broker's message store, one index shared by the partitions of a store."""

from __future__ import annotations

from tubemq_aio.protocol.message import encode_message
from tubemq_aio.testing._fake_store import INDEX_UNIT, MAX_INDEX_SCAN, StoreLog


def _store(partitions: list[int]) -> StoreLog:
    log = StoreLog()
    for n, pid in enumerate(partitions):
        log.append(n, f"m{n}".encode(), 0, partition_id=pid)
    return log


def test_partitions_of_a_store_share_one_index() -> None:
    log = _store([0, 1, 0, 2, 1])
    assert [m.offset for m in log.messages] == [INDEX_UNIT * i for i in range(5)]
    assert [m.partition_id for m in log.messages] == [0, 1, 0, 2, 1]
    assert log.max_offset == 5 * INDEX_UNIT  # every partition's maximum
    assert [m.payload for m in log.partition_messages(1)] == [b"m1", b"m4"]
    assert log.count_before(0, 2 * INDEX_UNIT) == 1
    assert log.count_before(0, 3 * INDEX_UNIT) == 2
    assert log.count_before(7, log.max_offset) == 0


def test_a_read_skips_other_partitions_and_counts_what_it_scanned() -> None:
    log = _store([0, 1, 0, 2, 1])
    got, scanned = log.read(0, 1, 10, 1 << 20, frozenset())
    assert [m.payload for m in got] == [b"m1", b"m4"]
    assert scanned == 5 * INDEX_UNIT  # to the end of the index
    got, scanned = log.read(0, 0, 1, 1 << 20, frozenset())
    assert [m.payload for m in got] == [b"m0"]
    assert scanned == INDEX_UNIT  # stops after the last message it returns
    got, scanned = log.read(3 * INDEX_UNIT, 0, 10, 1 << 20, frozenset())
    assert (got, scanned) == ([], 2 * INDEX_UNIT)  # only other partitions' records left
    assert log.read(log.max_offset, 0, 10, 1 << 20, frozenset()) == ([], 0)


def test_filters_apply_within_the_partition() -> None:
    log = StoreLog()
    for n, (pid, kind) in enumerate([(0, "a"), (1, "a"), (0, "b"), (0, "a")]):
        message = encode_message(f"m{n}".encode(), msg_type=kind)
        log.append(n, message.data, message.flag, partition_id=pid)
    got, scanned = log.read(0, 0, 10, 1 << 20, frozenset({"a"}))
    assert [m.message_id for m in got] == [0, 3]
    assert scanned == 4 * INDEX_UNIT


def test_one_read_scans_at_most_the_brokers_index_read_count() -> None:
    log = _store([1] * (MAX_INDEX_SCAN + 5) + [0])
    got, scanned = log.read(0, 0, 10, 1 << 20, frozenset())
    assert (got, scanned) == ([], MAX_INDEX_SCAN * INDEX_UNIT)
    got, _ = log.read(scanned, 0, 10, 1 << 20, frozenset())
    assert [m.message_id for m in got] == [MAX_INDEX_SCAN + 5]


def test_a_crash_forgets_the_newest_messages_and_reuses_their_offsets() -> None:
    log = _store([0, 1, 0, 2, 1])
    lost = log.drop_newest(2)
    assert [m.payload for m in lost] == [b"m3", b"m4"]
    assert log.max_offset == 3 * INDEX_UNIT
    assert [m.payload for m in log.partition_messages(1)] == [b"m1"]
    assert log.partition_messages(2) == []
    again = log.append(9, b"new", 0, partition_id=1)
    assert again.offset == 3 * INDEX_UNIT  # the first lost offset, handed out again
    got, _ = log.read(0, 1, 10, 1 << 20, frozenset())
    assert [m.payload for m in got] == [b"m1", b"new"]


def test_a_crash_never_drops_below_the_stores_minimum() -> None:
    log = _store([0, 0, 0, 0])
    log.min_index = 3
    assert [m.payload for m in log.drop_newest(10)] == [b"m3"]
    assert log.min_offset == log.max_offset == 3 * INDEX_UNIT
    assert log.drop_newest(0) == []
    assert log.max_offset == 3 * INDEX_UNIT
