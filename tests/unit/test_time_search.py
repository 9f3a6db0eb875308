"""The pure time search (docs/protocol/time.md): bisection over a simulated shared store."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from tubemq_aio.errors import ConfigError, ConsumerConfigError
from tubemq_aio.protocol.time_search import (
    EARLIEST_TIME,
    LATEST_TIME,
    OffsetTimeSearch,
    parse_time_text,
    require_aware,
    target_minute,
)

UNIT = 28
T0 = datetime(2026, 11, 29, 10, 0)


class Store:
    """A broker store shared by partitions: one 28-byte index slot per message, in order."""

    def __init__(
        self, entries: Sequence[tuple[int, datetime | None]], batch: int, first_min: int = 0
    ) -> None:
        self.entries = entries  # (partition, msg_time) per slot, slot i at offset min + 28 i
        self.batch = batch
        self.min = first_min
        self.reads = 0

    @property
    def max(self) -> int:
        return self.min + UNIT * len(self.entries)

    def read(self, partition: int, offset: int) -> tuple[int, int, list[datetime | None]]:
        """(start, next, times): up to ``batch`` messages of ``partition`` from ``offset``."""
        self.reads += 1
        slot = max(0, (max(offset, self.min) - self.min) // UNIT)
        times: list[datetime | None] = []
        start = None
        while slot < len(self.entries) and len(times) < self.batch:
            part, when = self.entries[slot]
            if part == partition:
                if start is None:
                    start = self.min + UNIT * slot
                times.append(when)
            slot += 1
        end = self.min + UNIT * slot
        if start is None:
            return end, end, []
        return start, end, times

    def expected(self, partition: int, target: datetime) -> tuple[int, int]:
        """Brute force: the right answers, from the offset after the last message stamped
        before ``target`` to the offset of the first one stamped at or after it."""
        low, high = self.min, self.max
        for i, (part, when) in enumerate(self.entries):
            if part != partition:
                continue
            if when is not None and when < target:
                low = self.min + UNIT * (i + 1)
            elif high == self.max:
                high = self.min + UNIT * i
        return low, high


def run(store: Store, partition: int, target: datetime) -> OffsetTimeSearch:
    search = OffsetTimeSearch(target)
    while (probe := search.next_probe()) is not None:
        start, nxt, times = store.read(partition, probe)
        assert start >= probe or probe < store.min
        search.observe(probe, start, nxt, store.max, times)
        assert search.reads <= 80
    return search


def minutes(n: int) -> datetime:
    return T0 + timedelta(minutes=n)


def test_three_bursts_each_pause_yields_the_later_bursts() -> None:
    entries = [(0, minutes(0))] * 5 + [(0, minutes(2))] * 5 + [(0, minutes(4))] * 5
    store = Store(entries, batch=3)
    for target, want in ((minutes(1), 5 * UNIT), (minutes(3), 10 * UNIT)):
        got = run(store, 0, target)
        assert (got.offset, got.past_end) == (want, False)
    before = run(store, 0, minutes(-5))
    assert (before.offset, before.past_end, before.reads) == (0, False, 1)
    after = run(store, 0, minutes(5))
    assert (after.offset, after.past_end) == (15 * UNIT, True)


def test_empty_partition_is_past_the_end_after_one_read() -> None:
    store = Store([(1, minutes(0))] * 4, batch=10, first_min=280)
    got = run(store, 0, minutes(0))
    assert (got.offset, got.past_end, got.reads) == (store.max, True, 1)


def test_unstamped_messages_count_as_after_any_time() -> None:
    store = Store([(0, None)] * 6, batch=2)
    got = run(store, 0, minutes(3))
    assert (got.offset, got.past_end, got.reads) == (0, False, 1)


def test_reads_stay_logarithmic_with_one_message_batches() -> None:
    entries = [(0, minutes(i // 100)) for i in range(10_000)]
    store = Store(entries, batch=1)
    got = run(store, 0, minutes(37))
    assert got.offset == 3_700 * UNIT
    assert got.reads <= 16  # log2(10 000) + 2


timestamps = st.integers(min_value=0, max_value=6).map(minutes)


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.one_of(st.none(), timestamps)), max_size=60),
    st.integers(1, 7),
    st.integers(0, 2),
    st.integers(-1, 8).map(minutes),
    st.integers(0, 5),
)
def test_search_matches_brute_force_on_sorted_stamps(
    raw: list[tuple[int, datetime | None]],
    batch: int,
    partition: int,
    target: datetime,
    min_slots: int,
) -> None:
    # Stamps never decrease along each partition (one producer clock): sort them per partition,
    # unstamped ones last (they count as after everything).
    per: dict[int, list[datetime | None]] = {}
    for part, when in raw:
        per.setdefault(part, []).append(when)
    for part, whens in per.items():
        per[part] = sorted(whens, key=lambda w: (w is None, w or T0))
    cursor = {p: iter(ws) for p, ws in per.items()}
    entries = [(part, next(cursor[part])) for part, _ in raw]
    store = Store(entries, batch=batch, first_min=UNIT * min_slots)
    got = run(store, partition, target)
    low, high = store.expected(partition, target)
    after = any(p == partition and (w is None or w >= target) for p, w in entries)
    assert got.past_end is not after
    assert low <= got.offset <= high
    # Reading from the answer yields exactly the stamped-at-or-after messages.
    later = [
        w
        for i, (p, w) in enumerate(entries)
        if p == partition and store.min + UNIT * i >= got.offset
    ]
    assert all(w is None or w >= target for w in later)


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 1), st.one_of(st.none(), timestamps)), max_size=40),
    st.integers(1, 5),
    st.integers(-1, 8).map(minutes),
)
def test_search_ends_on_unsorted_stamps(
    entries: list[tuple[int, datetime | None]], batch: int, target: datetime
) -> None:
    got = run(Store(entries, batch=batch), 0, target)
    assert got.done
    assert got.low <= got.offset


def test_target_minute_converts_zone_and_floors() -> None:
    eight = timezone(timedelta(hours=8))
    when = datetime(2026, 11, 29, 18, 5, 30, 123, tzinfo=eight)
    assert target_minute(when) == datetime(2026, 11, 29, 10, 5)
    assert target_minute(when, eight) == datetime(2026, 11, 29, 18, 5)


@pytest.mark.parametrize("bad", [datetime(2026, 1, 1), "2026-01-01T00:00:00Z", 0, None, 1.5])
def test_naive_or_non_datetime_refused(bad: object) -> None:
    with pytest.raises(ConsumerConfigError):
        require_aware(bad, "consume_from")
    with pytest.raises(ConfigError):
        target_minute(bad)  # type: ignore[arg-type]


def test_parse_time_text() -> None:
    assert parse_time_text("@2026-11-29T10:00:00Z") == datetime(2026, 11, 29, 10, tzinfo=UTC)
    got = parse_time_text("2026-11-29T18:00:00+08:00")
    assert got == datetime(2026, 11, 29, 10, tzinfo=UTC)
    for bad in ("@2026-11-29T10:00:00", "yesterday", "", "@", "2026-13-01T00:00Z"):
        with pytest.raises(ConsumerConfigError):
            parse_time_text(bad)


@pytest.mark.parametrize(
    "edge",
    [
        datetime(9999, 12, 31, 23, 59, tzinfo=timezone(timedelta(hours=-14))),
        datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),
        datetime.max.replace(tzinfo=UTC),
        datetime.min.replace(tzinfo=UTC),
    ],
)
def test_times_within_a_day_of_datetimes_ends_are_refused_not_overflowed(edge: datetime) -> None:
    # once a bare OverflowError from the zone conversion, in the SDK, the CLI and the gateway
    with pytest.raises(ConsumerConfigError, match="0001-01-02 and 9999-12-30"):
        require_aware(edge, "consume_from")
    with pytest.raises(ConsumerConfigError, match="0001-01-02 and 9999-12-30"):
        target_minute(edge, timezone(timedelta(hours=14)))
    with pytest.raises(ConsumerConfigError, match="0001-01-02 and 9999-12-30"):
        parse_time_text(edge.isoformat())


def test_the_ends_of_the_accepted_range_convert_to_any_zone() -> None:
    for when in (EARLIEST_TIME, LATEST_TIME):
        for hours in (-23, 0, 23):
            assert target_minute(when, timezone(timedelta(hours=hours))).tzinfo is None
