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
