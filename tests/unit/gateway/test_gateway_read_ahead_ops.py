"""The read-in-flight mark's operations on the pure lease model, one by one (the schedules that
prove it are in ``test_gateway_read_ahead_model.py``)."""

from __future__ import annotations

import pytest

from tubemq_aio.gateway.leases.model import Booking, GroupState
from tubemq_aio.gateway.leases.read_ahead import ReadAhead

P, S = "1:t:0", "c"


def test_a_mark_reads_back_and_bad_text_is_refused() -> None:
    mark = ReadAhead("a|b", 1_200)  # the token may hold a bar: the deadline is after the last
    assert ReadAhead.parse(mark.text()) == mark
    assert ReadAhead.parse("|5") == ReadAhead("", 5)
    assert mark.live(1_199)
    assert not mark.live(1_200)
    for bad in ("", "t", "t|", "t|x", "t|1.5", "t|-", "t| 5", "t|\u00b2"):
        with pytest.raises(ValueError, match="not a read-ahead mark"):
            ReadAhead.parse(bad)


def _booked() -> GroupState:
    m = GroupState()
    m.boot()
    m.sync_parts(0, S, [P])
    assert m.acquire(10, S, "L1", 1_000, "r1")[0] == "leased"
    assert m.init(10, S, P, "L1", 0, 0) == ("ok", 0)
    return m


def test_a_read_ahead_needs_the_live_booked_lease() -> None:
    m = _booked()
    assert m.read_ahead(11, S, P, "L1", "R1", 200) == ("stale",)  # nothing booked yet
    assert m.record(11, S, P, "L1", Booking(0, 4, 4, 4, 0, 4)) == ("ok",)
    assert m.read_ahead(12, S, P, "L2", "R1", 200) == ("stale",)  # not this lease
    assert m.read_ahead(12, S, P, "L1", "R1", 200) == ("ok", 212)
    assert m.read_ahead(50, S, P, "L1", "R1", 200) == ("ok", 212)  # a retry: the same answer
    assert m.read_ahead(50, S, P, "L1", "R2", 200) == ("busy",)
    with pytest.raises(ValueError, match="token"):
        m.read_ahead(50, S, P, "L1", "", 200)
    assert m.settle(60, S, P, "L1", "ack") == ("acked", 4)
    assert m.acquire(61, S, "L3", 1_000, "r2") == ("none", 212, -1)
    assert m.acquire(61, S, "L3", 1_000, "r2", want=P) == ("none", 212, -1)


def test_a_read_ahead_ends_once_and_only_by_its_token() -> None:
    m = _booked()
    m.record(11, S, P, "L1", Booking(0, 4, 4, 4, 0, 4))
    m.read_ahead(12, S, P, "L1", "R1", 200)
    assert m.read_ahead_done(13, S, P, "R2", "R2|4", 8) == ("stale",)
    assert m.read_ahead_done(13, S, P, "", "|4", 8) == ("stale",)
    assert m.read_ahead_done(300, S, P, "R1", "R1|4", 8) == ("ok",)  # past the deadline: ours
    assert (m.fence, m.cursor, m.reading) == ({P: "R1|4"}, {P: 8}, {})
    assert m.read_ahead_done(301, S, P, "R1", "R1|4", 8) == ("stale",)


def test_an_acquire_past_the_deadline_forgets_the_cursor() -> None:
    m = _booked()
    m.record(11, S, P, "L1", Booking(0, 4, 4, 4, 0, 4))
    m.read_ahead(12, S, P, "L1", "R1", 200)
    m.settle(13, S, P, "L1", "ack")
    got = m.acquire(212, S, "L2", 1_000, "r2")
    assert got[:3] == ("leased", P, 4)
    assert got[-2:] == (-1, "")  # cursor unknown, no fence
    assert m.reading == {}


def test_a_reset_holds_a_partition_whose_holder_reads_until_its_lease_ends() -> None:
    m = _booked()  # L1 leased at 10 until 1 010, no batch booked: its reads may be on the way
    out = m.reset(20, S, "", [(P, 8)], [])
    assert out == [(P, 0, "8")]
    assert m.scope(S).part(P).committed == 8  # the offset moved at once
    assert m.reading == {P: "|1010"}  # a voided mark until the lease's expiry
    assert m.acquire(21, S, "L2", 1_000, "r2") == ("none", 1_010, -1)
    assert m.acquire(21, S, "P1", 1_000, "hk", want=P) == ("none", 1_010, -1)  # a lag probe
    # the old holder is refused everything (its token is stale), its late read's end included
    assert m.record(30, S, P, "L1", Booking(0, 4, 4, 4, 0, 4)) == ("stale",)
    assert m.settle(30, S, P, "L1", "ack") == ("stale",)
    assert m.extend(30, S, P, "L1", 5_000) == ("stale",)
    assert m.read_ahead_done(30, S, P, "", "|0", 4) == ("stale",)
    assert m.reset(40, S, "", [(P, 4)], []) == [(P, 8, "4")]  # a second reset keeps the block
    assert m.reading == {P: "|1010"}
    assert m.acquire(1_009, S, "L3", 1_000, "r2")[0] == "none"
    got = m.acquire(1_010, S, "L3", 1_000, "r2")
    assert got[:3] == ("leased", P, 4)
    assert got[-2:] == (-1, "")  # the broker cursor is unknown: the lease registers at 4
    assert m.reading == {}


def test_a_reset_frees_at_once_a_partition_nobody_reads() -> None:
    m = _booked()
    assert m.record(11, S, P, "L1", Booking(0, 4, 4, 4, 0, 4)) == ("ok",)  # reads over
    m.reset(20, S, "", [(P, 2)], [])
    assert m.reading == {}
    assert m.acquire(21, S, "L2", 1_000, "r2")[:3] == ("leased", P, 2)
    m.reset(1_100, S, "earliest", [], [])  # L2 lapsed at 1 021: its reads are over
    assert m.reading == {}
    got = m.acquire(1_101, S, "L3", 1_000, "r3")
    assert got[:4] == ("leased", P, -1, 2_101)
    assert got[5] == "earliest"


def test_a_reset_keeps_the_later_of_a_read_ahead_and_a_reading_lease() -> None:
    m = _booked()
    m.record(11, S, P, "L1", Booking(0, 4, 4, 4, 0, 4))
    m.read_ahead(12, S, P, "L1", "R1", 200)
    m.reset(20, S, "", [(P, 0)], [])  # L1's batch is booked: only the read-ahead holds P
    assert m.reading == {P: "|212"}
    # (a mark beside a reading lease: acquire ends every mark it passes, so only a state written
    # by hand has both; a reset must not shorten either)
    for now, mark, until in ((300, "|500", 1_300), (400, "R9|5000", 5_000)):
        m.reading.clear()
        assert m.acquire(now, S, f"L{now}", 1_000, "r2")[0] == "leased"
        m.reading[P] = mark
        m.reset(now, S, "", [(P, 0)], [])
        assert m.reading == {P: f"|{until}"}
