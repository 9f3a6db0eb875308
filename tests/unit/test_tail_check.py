"""tail_check: the consumer's record of what it read, and the read-back that finds where a
restarted broker replaced messages below the group's offset (docs/failures.md)."""

from __future__ import annotations

import itertools
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from tubemq_aio.protocol.tail_check import (
    DEFAULT_LOST_TAIL_WINDOW,
    DEFAULT_TAIL_CHECK_DEPTH,
    TailCheck,
    TailProbe,
    TailRecord,
    TailVerdict,
    Verdict,
    unrecorded_resume,
)

UNIT = 28  # index bytes per message


class Store:
    """One partition's store as a list of message ids, index offset ``UNIT * i`` for id ``i``;
    the broker's answers to a probe as the consumer sees them."""

    def __init__(self, ids: list[int], minimum: int = 0) -> None:
        self.ids = ids
        self.minimum = minimum

    @property
    def end(self) -> int:
        return UNIT * len(self.ids)

    def probe(self, probe: TailProbe) -> tuple[int, list[int]]:
        served = min(max(probe.offset, self.minimum), self.end)
        first = served // UNIT
        return served, self.ids[first : first + probe.want]


def read_all(store: Store, sizes: list[int], depth: int = DEFAULT_TAIL_CHECK_DEPTH) -> TailRecord:
    """A consumer reading ``store`` from its start in batches of ``sizes`` (cycled)."""
    record = TailRecord(depth)
    at = 0
    for size in itertools.cycle(sizes):
        if at >= len(store.ids):
            return record
        batch = store.ids[at : at + size]
        record.add(UNIT * at, batch[0], batch[-1], len(batch))
        at += len(batch)
    raise AssertionError("unreachable")


def run(check: TailCheck, store: Store) -> TailVerdict:
    while (probe := check.next_probe()) is not None:
        verdict = check.on_read(*store.probe(probe))
        if verdict is not None:
            return verdict
    assert check.verdict is not None
    return check.verdict


def restart(store: Store, lose: int, refill: int, fresh: itertools.count[int]) -> Store:
    """The broker back without its newest ``lose`` messages, then ``refill`` new ones."""
    kept = store.ids[: len(store.ids) - lose]
    return Store(kept + [next(fresh) for _ in range(refill)], store.minimum)


def test_an_untouched_store_is_intact_in_one_probe() -> None:
    store = Store(list(range(100)))
    record = read_all(store, [7])
    verdict = run(TailCheck(record, loaded=store.end), store)
    assert verdict == TailVerdict(Verdict.INTACT, store.end, 1)


def test_more_messages_after_the_read_ones_are_intact() -> None:
    store = Store(list(range(100)))
    record = read_all(store, [7])
    grown = Store(store.ids + list(range(1000, 1010)))
    assert run(TailCheck(record, loaded=store.end), grown).verdict is Verdict.INTACT


def test_a_tail_replaced_and_refilled_past_the_group_is_found() -> None:
    """The case of issue 30: the stored offset looks fine, the ids show the replacement."""
    fresh = itertools.count(10_000)
    store = Store(list(range(100)))
    record = read_all(store, [1])  # a consumer keeping up: one message per fetch
    after = restart(store, lose=15, refill=40, fresh=fresh)
    replaced_at = UNIT * 85
    verdict = run(TailCheck(record, loaded=store.end), after)
    assert verdict.verdict is Verdict.REPLACED
    assert verdict.resume_offset < replaced_at  # nothing new skipped
    assert replaced_at - verdict.resume_offset <= UNIT * 2 * 15  # re-reads bounded by ~2x
    assert verdict.probes <= 1 + DEFAULT_TAIL_CHECK_DEPTH.bit_length()


def test_a_replacement_inside_the_newest_batch_resumes_at_its_start() -> None:
    fresh = itertools.count(10_000)
    store = Store(list(range(100)))
    record = read_all(store, [10])
    after = restart(store, lose=3, refill=10, fresh=fresh)
    verdict = run(TailCheck(record, loaded=store.end), after)
    assert verdict == TailVerdict(Verdict.REPLACED, UNIT * 90, 1)


def test_a_store_ending_below_the_remembered_offsets_is_searched_too() -> None:
    """The lost tail without a refill: probes beyond the end read nothing."""
    store = Store(list(range(64)))
    record = read_all(store, [2])
    after = Store(store.ids[:40])
    verdict = run(TailCheck(record, loaded=after.end), after)
    assert verdict.verdict is Verdict.REPLACED
    assert verdict.resume_offset <= after.end


def test_a_replacement_below_every_remembered_offset_is_unverified() -> None:
    fresh = itertools.count(10_000)
    store = Store(list(range(100)))
    record = read_all(store, [5], depth=2)  # remembers 2 batch starts only
    after = restart(store, lose=60, refill=70, fresh=fresh)
    oldest = record.points()[-1][0]
    check = TailCheck(record, loaded=store.end)
    verdict = run(check, after)
    assert verdict.verdict is Verdict.UNVERIFIED
    assert verdict.resume_offset == oldest
    assert verdict.probes == 3  # the newest, the oldest, then where the store begins


def test_a_store_replaced_from_its_start_hides_nothing_below() -> None:
    """Found on the real cluster: a new topic's messages all still in the broker's memory
    cache at the SIGKILL; every remembered offset holds a new message, down to offset 0."""
    fresh = itertools.count(10_000)
    store = Store(list(range(100)))
    record = read_all(store, [5])
    after = restart(store, lose=100, refill=150, fresh=fresh)
    verdict = run(TailCheck(record, loaded=store.end), after)
    assert verdict.verdict is Verdict.REPLACED
    assert verdict.resume_offset == 0


def test_a_store_beginning_at_the_oldest_remembered_offset_hides_nothing_below() -> None:
    fresh = itertools.count(10_000)
    store = Store(list(range(100)), minimum=UNIT * 40)
    record = TailRecord()
    for at in range(40, 100, 10):
        record.add(UNIT * at, at, at + 9, 10)
    after = restart(store, lose=60, refill=80, fresh=fresh)
    check = TailCheck(record, loaded=store.end)
    verdict = run(check, after)
    assert verdict.verdict is Verdict.REPLACED
    assert verdict.resume_offset == UNIT * 40
    assert check.next_probe() is None


def test_an_expired_offset_counts_as_unchanged() -> None:
    fresh = itertools.count(10_000)
    store = Store(list(range(100)))
    record = read_all(store, [1], depth=3)
    after = restart(store, lose=30, refill=40, fresh=fresh)
    after.minimum = UNIT * 99  # every remembered but the newest lies below the minimum now
    verdict = run(TailCheck(record, loaded=store.end), after)
    assert verdict.verdict is Verdict.REPLACED


def test_the_group_never_resumes_above_the_loaded_offset() -> None:
    store = Store(list(range(100)))
    record = read_all(store, [10])
    loaded = UNIT * 50  # the broker's offset file was older than what the consumer read
    assert run(TailCheck(record, loaded=loaded), store).resume_offset == loaded
    fresh = itertools.count(10_000)
    after = restart(store, lose=3, refill=10, fresh=fresh)
    assert run(TailCheck(record, loaded=loaded), after).resume_offset == loaded


def test_a_short_read_back_of_the_newest_batch_is_not_intact() -> None:
    record = TailRecord()
    record.add(280, 10, 19, 10)
    check = TailCheck(record, loaded=560)
    assert check.next_probe() == TailProbe(280, 10)
    verdict = check.on_read(280, [10, 11, 12])  # the first read after a register is shorter
    assert verdict == TailVerdict(Verdict.REPLACED, 280, 1)
    assert check.next_probe() is None
    with pytest.raises(RuntimeError, match="already ended"):
        check.on_read(280, [10])


def test_record_ladder_is_bounded_and_doubles() -> None:
    record = TailRecord(depth=6)
    for i in range(1000):
        record.add(UNIT * i, i, i, 1)
    points = record.points()
    assert len(points) <= 6
    assert points[0] == (UNIT * 999, 999)
    ages = [999 - offset // UNIT for offset, _ in points]
    assert ages == sorted(ages)
    assert ages[-1] >= 2 ** (6 - 2)  # the oldest reaches back geometrically
    assert record.newest() == (UNIT * 999, 999, 999, 1)
    assert sys.getsizeof(record._cells) <= 64 + 8 * (2 * 6 + 3) + 16


def test_reading_from_an_earlier_offset_starts_the_record_afresh() -> None:
    record = TailRecord(depth=4)
    for i in range(10):
        record.add(UNIT * i, i, i, 1)
    record.add(0, 500, 500, 1)
    assert record.points() == [(0, 500)]
    assert record.batches == 1
    record.clear()
    assert record.newest() is None
    assert record.points() == []


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="depth"):
        TailRecord(0)
    with pytest.raises(ValueError, match="empty"):
        TailCheck(TailRecord(), loaded=0)


@settings(max_examples=examples(300), deadline=None)
@given(
    total=st.integers(1, 400),
    sizes=st.lists(st.integers(1, 30), min_size=1, max_size=5),
    lose=st.integers(0, 400),
    refill=st.integers(0, 600),
    depth=st.integers(1, 20),
    behind=st.integers(0, 50),
)
def test_never_resumes_past_a_replaced_message(
    total: int, sizes: list[int], lose: int, refill: int, depth: int, behind: int
) -> None:
    """Whatever was read, lost and refilled: unless the check says UNVERIFIED, the group
    resumes at or below the first replaced offset it had read (nothing new skipped), and
    INTACT only when nothing it read was replaced."""
    fresh = itertools.count(1_000_000)
    store = Store(list(range(total)))
    record = read_all(store, sizes, depth)
    lose = min(lose, total)
    after = restart(store, lose, refill, fresh)
    loaded = max(0, store.end - UNIT * behind)  # the broker's stored offset, maybe older
    verdict = run(TailCheck(record, loaded=loaded), after)
    first_replaced = UNIT * (total - lose) if lose else store.end
    replaced_below_loaded = first_replaced < loaded
    assert verdict.resume_offset <= loaded
    assert verdict.probes <= 1 + depth.bit_length() + 2
    if verdict.verdict is Verdict.INTACT:
        assert not lose  # every message read is where it was
    elif verdict.verdict is Verdict.REPLACED and replaced_below_loaded:
        assert verdict.resume_offset <= first_replaced
    if record.points()[-1][0] == 0:  # read from offset 0 on: nothing can hide below
        assert verdict.verdict is not Verdict.UNVERIFIED


def test_a_group_offset_beyond_the_records_end_is_stale_without_a_probe() -> None:
    """Found in the chaos run: the partition went to the other member after its broker's
    SIGKILL and came back later; the member's record predates the replacement, and reading
    it back moved the group 880 messages back, all already read by the other member."""
    record = TailRecord()
    record.add(280, 10, 19, 10)
    assert record.end is None
    record.note_end(560)
    assert record.end == 560
    check = TailCheck(record, loaded=840)
    assert check.verdict == TailVerdict(Verdict.STALE, 840, 0)
    assert check.next_probe() is None
    # Up to its end, the record is this consumer's own: checked as usual.
    assert TailCheck(record, loaded=560).next_probe() == TailProbe(280, 10)


def test_the_end_belongs_to_the_newest_batch() -> None:
    record = TailRecord()
    record.note_end(100)  # nothing added: ignored
    assert record.end is None
    record.add(280, 10, 19, 10)
    record.note_end(140)  # below the newest batch: ignored
    assert record.end is None
    record.note_end(560)
    record.add(560, 20, 29, 10)  # a new newest batch: its end is not known yet
    assert record.end is None
    assert TailCheck(record, loaded=10_000).verdict is None  # unknown end: never stale


# ---- a member with no record: unrecorded_resume ------------------------------------------


@pytest.mark.parametrize(
    ("stored", "end", "window", "expected"),
    [
        (20 * UNIT, 12 * UNIT, 10, 10 * UNIT),  # the window reaches below the end
        (20 * UNIT, 12 * UNIT, 8, 12 * UNIT),  # exactly the end
        (20 * UNIT, 12 * UNIT, 2, 12 * UNIT),  # never above the end
        (20 * UNIT, 12 * UNIT, 0, 12 * UNIT),  # off: the end
        (20 * UNIT, 0, DEFAULT_LOST_TAIL_WINDOW, 0),  # an empty store: its start
        (20 * UNIT, 12 * UNIT, 10**9, 0),  # never below 0 (the broker raises it to the min)
        (2**62, 2**61, 1, 2**61),  # huge offsets
    ],
)
def test_unrecorded_resume(stored: int, end: int, window: int, expected: int) -> None:
    assert unrecorded_resume(stored, end, window) == expected


def test_the_default_window_is_a_2_4_brokers_memory_caches() -> None:
    assert DEFAULT_LOST_TAIL_WINDOW == 2 * 10 * 512  # two caches of memCacheMsgCntInK * 512


@pytest.mark.parametrize(
    ("stored", "end", "window"),
    [(12 * UNIT, 12 * UNIT, 1), (11 * UNIT, 12 * UNIT, 1), (UNIT, -1, 1), (2 * UNIT, UNIT, -1)],
)
def test_unrecorded_resume_refuses_what_is_no_lost_tail(stored: int, end: int, window: int) -> None:
    with pytest.raises(ValueError, match="stored > end"):
        unrecorded_resume(stored, end, window)


@settings(max_examples=examples(300))
@given(
    restart=st.integers(0, 10**6),
    lost=st.integers(1, 10**4),
    refilled=st.integers(0, 10**4),
    read_of_lost=st.integers(1, 10**4),
    window=st.integers(0, 10**5),
)
def test_no_message_stored_after_the_restart_is_skipped_within_the_window(
    restart: int, lost: int, refilled: int, read_of_lost: int, window: int
) -> None:
    """The broker came back at message ``restart`` after dropping ``lost`` messages (at most
    ``window`` when the window holds), of which the group had read ``read_of_lost``; it stored
    ``refilled`` new ones since, fewer than it dropped of what the group read (else the
    register shows nothing). Resuming skips none of them exactly when the window held."""
    read_of_lost = min(read_of_lost, lost)
    if refilled >= read_of_lost:
        return  # the store refilled past the group's offset: no lost tail to see
    stored = (restart + read_of_lost) * UNIT
    end = (restart + refilled) * UNIT
    resume = unrecorded_resume(stored, end, window)
    assert resume <= end
    if lost <= window:
        assert resume <= restart * UNIT  # nothing stored since the return is skipped
        assert (restart * UNIT - resume) // UNIT <= window  # what comes again is bounded
