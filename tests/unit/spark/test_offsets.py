"""Pure offset planning of the Spark source (no Spark, no cluster)."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tubemq_aio.spark._offsets import (
    RECORD,
    OffsetRange,
    StoreBounds,
    lost_partitions,
    normalize_offsets,
    plan_end,
    plan_ranges,
    resolve_start,
    store_of,
)

A, B, C = "1:t:0", "1:t:10000", "2:t:0"  # three different stores


def bounds(**ends: tuple[int, int]) -> dict[str, StoreBounds]:
    """StoreBounds per key from ``name=(min, max)`` (names a, b, c)."""
    names = {"a": A, "b": B, "c": C}
    return {names[k]: StoreBounds(lo, hi) for k, (lo, hi) in ends.items()}


def test_no_limit_reads_to_the_store_end() -> None:
    end = plan_end({A: 0, B: 280}, bounds(a=(0, 560), b=(0, 560)), None)
    assert end == {A: 560, B: 560}


def test_limit_is_split_in_proportion_to_backlog() -> None:
    # A has 30 records of backlog, B 10: a limit of 8 gives 6 and 2.
    end = plan_end({A: 0, B: 0}, bounds(a=(0, 30 * RECORD), b=(0, 10 * RECORD)), 8)
    assert end == {A: 6 * RECORD, B: 2 * RECORD}
    assert sum((end[k] - 0) // RECORD for k in end) == 8


def test_limit_remainder_goes_to_largest_fraction_then_key() -> None:
    end = plan_end({A: 0, B: 0, C: 0}, bounds(a=(0, 280), b=(0, 280), c=(0, 280)), 4)
    # 4 over three equal backlogs: 1 each, the remainder to the first key.
    assert end == {A: 2 * RECORD, B: RECORD, C: RECORD}


def test_limit_above_backlog_reads_everything() -> None:
    end = plan_end({A: 56}, bounds(a=(0, 280)), 1000)
    assert end == {A: 280}


def test_new_partition_enters_at_its_earliest_offset_and_is_read_next_batch() -> None:
    start = {A: 280}
    end = plan_end(start, bounds(a=(0, 560), c=(84, 840)), None)
    assert end == {A: 560, C: 84}
    assert plan_ranges(start, end) == [OffsetRange(A, 280, 560)]
    following = plan_end(end, bounds(a=(0, 560), c=(84, 840)), None)
    assert plan_ranges(end, following) == [OffsetRange(C, 84, 840)]


def test_vanished_partition_keeps_its_offset() -> None:
    assert plan_end({A: 28, B: 56}, bounds(a=(0, 56)), None) == {A: 56, B: 56}


def test_offsets_have_sorted_keys_and_int_values() -> None:
    end = plan_end({C: 0, A: 0}, bounds(c=(0, 56), a=(0, 28)), None)
    assert list(end) == sorted(end)
    assert json.dumps(end) == '{"1:t:0": 28, "2:t:0": 56}'
    assert normalize_offsets(json.loads(json.dumps(end))) == end


def test_normalize_rejects_non_int() -> None:
    with pytest.raises(ValueError, match="integer >= 0"):
        normalize_offsets({A: "5"})
    with pytest.raises(ValueError, match="integer >= 0"):
        normalize_offsets({A: -1})


def test_start_equal_end_plans_nothing() -> None:
    assert plan_ranges({A: 56, B: 0}, {A: 56, B: 0}) == []


def test_min_partitions_splits_at_record_boundaries() -> None:
    ranges = plan_ranges({A: 28}, {A: 28 + 10 * RECORD}, min_partitions=3)
    assert len(ranges) >= 3
    assert ranges[0].start == 28
    assert ranges[-1].end == 28 + 10 * RECORD
    for left, right in itertools.pairwise(ranges):
        assert left.end == right.start
    assert all((r.start - 28) % RECORD == 0 for r in ranges)


def test_resolve_start_kinds() -> None:
    b = bounds(a=(28, 280), b=(0, 56))
    assert resolve_start("earliest", {}, b) == {A: 28, B: 0}
    assert resolve_start("latest", {}, b) == {A: 280, B: 56}
    assert resolve_start("json", {A: 140}, b) == {A: 140, B: 0}


def test_lost_partitions_below_min_or_past_end() -> None:
    b = bounds(a=(280, 560), b=(0, 56), c=(0, 56))
    assert lost_partitions({A: 28, B: 84, C: 56}, b) == [A, B]


@given(
    backlog=st.lists(st.integers(0, 500), min_size=1, max_size=6),
    limit=st.integers(1, 2000),
)
def test_limit_never_exceeded_and_progress_made(backlog: list[int], limit: int) -> None:
    keys = [f"{i + 1}:t:0" for i in range(len(backlog))]  # one store each
    start = dict.fromkeys(keys, 0)
    b = {k: StoreBounds(0, n * RECORD) for k, n in zip(keys, backlog, strict=True)}
    end = plan_end(start, b, limit)
    slots = [(end[k] - start[k]) // RECORD for k in keys]
    assert sum(slots) == min(limit, sum(backlog))
    assert all(0 <= s <= n for s, n in zip(slots, backlog, strict=True))


def test_store_of_groups_partitions_sharing_an_index() -> None:
    assert store_of("1:t:0") == store_of("1:t:2") == ("1", "t", 0)
    assert store_of("1:t:10001") == ("1", "t", 1)
    assert store_of("2:t:0") != store_of("1:t:0")


def test_partitions_of_one_store_share_its_slots_once() -> None:
    keys = ["1:t:0", "1:t:1", "1:t:2"]
    b = {k: StoreBounds(0, 30 * RECORD) for k in keys}
    end = plan_end(dict.fromkeys(keys, 0), b, 12)
    # 12 slots of the shared index, not 12 split three ways: every partition ends at slot 12.
    assert end == dict.fromkeys(keys, 12 * RECORD)


@given(
    owners=st.lists(st.integers(0, 2), min_size=1, max_size=120),
    starts=st.lists(st.integers(0, 120), min_size=3, max_size=3),
    limit=st.integers(1, 150),
)
def test_rows_of_a_shared_store_never_exceed_the_limit(
    owners: list[int], starts: list[int], limit: int
) -> None:
    """Slot i of one store holds a message of partition owners[i]; whatever the starts, the
    messages planned into the batch are at most the limit, and some are planned if any wait."""
    keys = [f"1:t:{p}" for p in range(3)]
    size = len(owners)
    b = {k: StoreBounds(0, size * RECORD) for k in keys}
    start = {k: RECORD * min(s, size) for k, s in zip(keys, starts, strict=True)}
    end = plan_end(start, b, limit)
    planned = sum(
        1
        for slot, owner in enumerate(owners)
        if start[keys[owner]] <= slot * RECORD < end[keys[owner]]
    )
    waiting = sum(1 for slot, owner in enumerate(owners) if slot * RECORD >= start[keys[owner]])
    assert planned <= limit
    assert all(end[k] >= start[k] for k in keys)
    if waiting:
        assert end != start
