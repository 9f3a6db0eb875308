"""may_continue: whether a read-ahead after a broker batch would find more (batch_end.py), at the
limits of the broker's scan (2.4.0 MessageStore; docs/protocol/consumer.md §4.2)."""

from __future__ import annotations

from tubemq_aio.gateway.tubemq.batch_end import (
    MIN_SCAN_RECORDS,
    MIN_TRANSFER_BYTES,
    STORED_HEADER_BYTES,
    may_continue,
)
from tubemq_aio.protocol.consumer_meta import INDEX_MSG_UNIT_SIZE as UNIT
from tubemq_aio.protocol.consumer_replies import RawMessage


def _batch(n: int, size: int = 100) -> tuple[RawMessage, ...]:
    return tuple(RawMessage(i, 0, b"x" * size, 0) for i in range(n))


def test_a_batch_whose_own_records_reach_the_max_ends_there() -> None:
    assert not may_continue(560, _batch(10), 560 + 10 * UNIT)
    assert not may_continue(560, _batch(10), 560)


def test_a_batch_of_a_store_shared_by_three_partitions_that_scanned_to_the_end_ends() -> None:
    # as on the real cluster: 1000 messages of 100 bytes, one of three interleaved partitions,
    # the store's max three times their records away
    assert not may_continue(0, _batch(1000), 3000 * UNIT)


def test_more_records_than_one_scan_must_read_may_continue() -> None:
    assert may_continue(0, _batch(1000), (MIN_SCAN_RECORDS + 1) * UNIT)
    assert not may_continue(0, _batch(1000), MIN_SCAN_RECORDS * UNIT)


def test_a_batch_the_transfer_size_may_have_cut_may_continue() -> None:
    per = STORED_HEADER_BYTES + 1000
    full = -(-MIN_TRANSFER_BYTES // per)  # the first count of 1000-byte messages that reaches it
    assert may_continue(0, _batch(full, 1000), (full + 5) * UNIT)
    assert not may_continue(0, _batch(full - 1, 1000), (full + 5) * UNIT)


def test_an_unknown_max_may_continue() -> None:
    assert may_continue(0, _batch(1), -1)
    assert may_continue(0, (), -2)


def test_an_empty_batch_short_of_the_max_may_continue_only_past_a_scan() -> None:
    assert not may_continue(0, (), 100 * UNIT)
    assert may_continue(0, (), (MIN_SCAN_RECORDS + 1) * UNIT)
