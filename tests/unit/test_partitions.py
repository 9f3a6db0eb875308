"""Partition lease bookkeeping (docs/protocol/consumer.md §4.3, §4.4): pure, no event loop."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from tubemq_aio.errors import InvalidConfirmContextError
from tubemq_aio.protocol.consumer_meta import BrokerInfo, Partition, PartitionKey
from tubemq_aio.protocol.partitions import (
    FetchErrorReaction,
    Lease,
    PartitionLeases,
    SelectStatus,
    fetch_error_reaction,
    parse_confirm_context,
)

B1 = BrokerInfo(1, "10.0.0.1", 8123)
B2 = BrokerInfo(2, "10.0.0.2", 8123)
P = [Partition(B1, "t", 0), Partition(B1, "t", 1), Partition(B2, "t", 0)]


def table(*parts: Partition, now: float = 0.0) -> PartitionLeases:
    leases = PartitionLeases()
    for p in parts:
        assert leases.add(p, now)
    return leases


def take(leases: PartitionLeases, now: float) -> Lease:
    lease = leases.take(now)
    assert lease is not None
    return lease


def test_take_is_fifo_and_exclusive() -> None:
    leases = table(*P)
    got = [take(leases, 0.0).partition for _ in P]
    assert got == P
    assert leases.take(0.0) is None
    assert leases.status(0.0) is SelectStatus.ALL_PARTITION_INUSE
    assert leases.in_use() == {p.key for p in P}


def test_release_returns_to_the_back_of_the_queue() -> None:
    leases = table(*P)
    first = take(leases, 0.0)
    assert leases.release(first.key, first.token, 0.0)
    assert [take(leases, 0.0).partition for _ in P] == [P[1], P[2], P[0]]


def test_delayed_release_and_immediate_threshold() -> None:
    leases = table(P[0])
    lease = take(leases, 0.0)
    leases.release(lease.key, lease.token, 1.0, wait_ms=10)  # ≤ 10 ms: idle at once
    lease = take(leases, 1.0)
    leases.release(lease.key, lease.token, 1.0, wait_ms=400)
    assert leases.take(1.3) is None
    assert leases.status(1.3) is SelectStatus.ALL_PARTITION_WAITING
    assert leases.next_ready_at() == pytest.approx(1.4)
    assert take(leases, 1.4).key == P[0].key


def test_add_with_a_delay_hands_the_partition_out_later() -> None:
    """A partition registered at its end is first handed out ``delay_ms`` later; one added
    again after its removal does not take the delay item of its earlier life for its own."""
    leases = PartitionLeases()
    assert leases.add(P[0], 1.0, curr_offset=280, max_offset=280, delay_ms=400)
    assert leases.take(1.3) is None
    assert leases.status(1.3) is SelectStatus.ALL_PARTITION_WAITING
    assert leases.next_ready_at() == pytest.approx(1.4)
    assert take(leases, 1.4).key == P[0].key
    assert leases.add(P[1], 2.0, delay_ms=10)  # ≤ 10 ms: idle at once
    assert take(leases, 2.0).key == P[1].key
    assert leases.add(P[2], 3.0, delay_ms=1000)
    leases.remove(P[2].key)
    assert leases.add(P[2], 3.1, delay_ms=5000)
    assert leases.take(4.0) is None  # the first life's item (ready at 4.0) is stale
    assert take(leases, 8.1).key == P[2].key


def test_stale_token_is_rejected() -> None:
    leases = table(P[0])
    lease = take(leases, 0.0)
    assert not leases.release(lease.key, lease.token + 1, 0.0)
    assert leases.release(lease.key, lease.token, 0.0)
    assert not leases.release(lease.key, lease.token, 0.0)
    again = take(leases, 0.0)
    assert again.token != lease.token
    with pytest.raises(InvalidConfirmContextError):
        leases.confirm(lease.confirm_context, True, 0.0)


def test_confirm_sets_last_pack_flag_for_next_fetch() -> None:
    leases = table(P[0])
    lease = take(leases, 0.0)
    assert lease.last_pack_consumed is False
    assert lease.confirm_context == f"1:t:0:{lease.token}"
    assert leases.confirm(lease.confirm_context, True, 0.0) == P[0].key
    nxt = take(leases, 0.0)
    assert nxt.last_pack_consumed is True
    leases.release(nxt.key, nxt.token, 0.0)  # flag was moved into the lease
    assert take(leases, 0.0).last_pack_consumed is False


def test_confirm_context_parsing() -> None:
    assert parse_confirm_context("3:topic:10001:77") == (PartitionKey(3, "topic", 10001), 77)
    for bad in ["", "3:topic:1", "3:topic:1:x", "x:topic:1:2", "1:2:3:4:5"]:
        with pytest.raises(InvalidConfirmContextError):
            parse_confirm_context(bad)


def test_unconfirmed_lease_is_reclaimed_after_60s() -> None:
    leases = table(P[0], P[1])
    lease = take(leases, 0.0)
    assert leases.expire_unconfirmed(59.9) == []
    assert leases.expire_unconfirmed(60.0) == [lease.key]
    assert not leases.release(lease.key, lease.token, 60.0)
    # reclaimed as not consumed: the batch is redelivered
    nxt = take(leases, 60.0)
    assert nxt.key == P[1].key
    assert take(leases, 60.0).last_pack_consumed is False


def test_pause_resume_and_frozen_status() -> None:
    leases = table(P[0], P[1])
    leases.pause()
    assert leases.take(0.0) is None
    assert leases.status(0.0) is SelectStatus.ALL_PARTITION_FROZEN
    leases.resume([P[1].key])
    assert take(leases, 0.0).key == P[1].key
    lease_paused_later = PartitionLeases()
    lease_paused_later.add(P[0], 0.0)
    lease = take(lease_paused_later, 0.0)
    lease_paused_later.pause([P[0].key])
    lease_paused_later.release(lease.key, lease.token, 0.0, wait_ms=100)
    assert lease_paused_later.take(1.0) is None  # delay expired but still paused
    lease_paused_later.resume()
    assert take(lease_paused_later, 1.0).key == P[0].key


def test_no_partition_status() -> None:
    assert PartitionLeases().status(0.0) is SelectStatus.NO_PARTITION_ASSIGNED


def test_revoke_and_remove_for_disconnect() -> None:
    leases = table(*P)
    held = take(leases, 0.0)
    leases.revoke([P[0].key, P[1].key])
    assert take(leases, 0.0).key == P[2].key
    assert leases.take(0.0) is None
    assert leases.in_use([P[0].key, P[1].key]) == {P[0].key}
    removed = leases.remove(held.key)
    assert removed is not None
    assert removed.was_in_use
    assert removed.read_status == 1
    assert not leases.release(held.key, held.token, 0.0)
    assert leases.remove(held.key) is None


def test_remove_reports_last_pack_flag() -> None:
    leases = table(P[0])
    lease = take(leases, 0.0)
    leases.release(lease.key, lease.token, 0.0, consumed=True)
    removed = leases.remove(P[0].key)
    assert removed is not None
    assert removed.read_status == 0
    assert not removed.was_in_use


def test_offsets_and_lag() -> None:
    leases = PartitionLeases()
    leases.add(P[0], 1.0, curr_offset=280, max_offset=2800)
    leases.update_offsets(P[0].key, 2.0, max_offset=3080)
    leases.update_offsets(P[0].key, 3.0, curr_offset=-1)  # failure answers carry -1
    info = leases.offsets()[P[0].key]
    assert (info.curr_offset, info.max_offset, info.updated_at) == (280, 3080, 3.0)
    assert info.lag == (3080 - 280) // 28
    assert not info.at_end


def test_a_fetch_without_new_data_marks_the_end_until_new_offsets() -> None:
    leases = PartitionLeases()
    leases.add(P[0], 1.0, curr_offset=392, max_offset=420)  # the store's last entry is not ours
    leases.mark_at_end(P[0].key, 2.0)
    info = leases.offsets()[P[0].key]
    assert (info.at_end, info.lag, info.updated_at) == (True, 1, 2.0)
    leases.update_offsets(P[0].key, 3.0, max_offset=448)  # a later fetch or commit answer
    assert not leases.offsets()[P[0].key].at_end
    leases.mark_at_end(P[1].key, 4.0)  # not held: ignored
    assert P[1].key not in leases.offsets()


def test_grouping_and_reports() -> None:
    leases = table(*P)
    assert leases.by_broker() == {B1: [P[0], P[1]], B2: [P[2]]}
    infos = leases.subscribe_infos("c", "g")
    assert infos[0].format() == "c@g#1:10.0.0.1:8123#t:0"
    assert not leases.add(P[0], 0.0)
    assert leases.book_registration(P[0].key)
    assert not leases.book_registration(P[0].key)
    assert "held=3" in repr(leases)


@pytest.mark.parametrize(
    ("code", "kwargs", "expected"),
    [
        (404, {}, FetchErrorReaction(False, 400)),
        (404, {"msg_not_found_wait_ms": 50}, FetchErrorReaction(False, 50)),
        (452, {"min_limit_time_ms": 1500}, FetchErrorReaction(False, 1500)),
        (452, {}, FetchErrorReaction(False, 400)),
        (403, {}, FetchErrorReaction(False, 2000)),
        (301, {}, FetchErrorReaction(False, 200)),
        (503, {}, FetchErrorReaction(False, 300)),
        (500, {}, FetchErrorReaction(False, 300)),
        (400, {}, FetchErrorReaction(False, 300)),
        (411, {}, FetchErrorReaction(True, 0)),
        (412, {}, FetchErrorReaction(True, 0)),
        (415, {}, FetchErrorReaction(True, 0)),
    ],
)
def test_fetch_error_reaction(
    code: int, kwargs: dict[str, int], expected: FetchErrorReaction
) -> None:
    assert fetch_error_reaction(code, **kwargs) == expected


# --- invariants under random operation sequences ------------------------------------------

ops = st.lists(
    st.tuples(
        st.sampled_from(
            ["take", "release", "confirm", "expire", "pause", "resume", "remove", "add"]
        ),
        st.integers(0, 5),
        st.integers(0, 3000),
    ),
    max_size=80,
)


@settings(max_examples=examples(200))
@given(ops)
def test_never_leased_twice_and_every_lease_ends(sequence: list[tuple[str, int, int]]) -> None:
    parts = [Partition(B1, "t", i) for i in range(6)]
    leases = PartitionLeases()
    for p in parts[:3]:
        leases.add(p, 0.0)
    outstanding: dict[PartitionKey, Lease] = {}
    now = 0.0
    for op, index, wait in sequence:
        now += 0.25
        key = parts[index].key
        if op == "take":
            lease = leases.take(now)
            if lease is not None:
                assert lease.key not in outstanding, "partition leased twice"
                outstanding[lease.key] = lease
        elif op in ("release", "confirm") and key in outstanding:
            lease = outstanding.pop(key)
            if op == "release":
                assert leases.release(key, lease.token, now, wait_ms=wait)
            else:
                leases.confirm(lease.confirm_context, wait % 2 == 0, now, wait_ms=wait)
        elif op == "expire":
            for k in leases.expire_unconfirmed(now, timeout=5.0):
                assert outstanding.pop(k).taken_at <= now - 5.0
        elif op == "pause":
            leases.pause([key])
        elif op == "resume":
            leases.resume([key])
        elif op == "remove":
            leases.remove(key)
            outstanding.pop(key, None)
        elif op == "add":
            leases.add(parts[index], now)
        assert leases.in_use() == set(outstanding)
    # every outstanding lease can still be ended exactly once, after which all are free
    for key, lease in outstanding.items():
        assert leases.release(key, lease.token, now)
        assert not leases.release(key, lease.token, now)
    leases.resume()
    free = {lease.key for lease in iter(lambda: leases.take(now + 10.0), None)}
    assert free == set(leases.keys())


def test_a_delay_of_an_earlier_life_of_a_partition_is_not_taken_for_its_current_one() -> None:
    """Removed while delayed, added again and delayed again: its readiness is the new delay's
    (the old heap item, whose generation count may match again, is not live)."""
    leases = table(P[0])
    lease = take(leases, 0.0)
    leases.release(lease.key, lease.token, 0.0, wait_ms=100)  # ready at 0.1
    assert leases.remove(P[0].key) is not None
    assert leases.add(P[0], 0.0)
    lease = take(leases, 0.0)
    leases.release(lease.key, lease.token, 0.0, wait_ms=5000)  # ready at 5.0
    assert leases.next_ready_at() == 5.0
    assert leases.take(1.0) is None
    assert take(leases, 5.0).key == P[0].key
