"""The shared rate limit's bound, on the pure model: over any stretch, the messages of the
batches it admits are at most ``rate × (last admission − first admission) + burst + one
batch`` (the limiter is charged when a batch is booked, so the last admitted batch may
overdraw), whatever runs beside the reads: the limit set again, resets, lag probes (which
lease with ``want`` and book nothing), acks.

Setting the limit (``PUT /v1/groups/{g}/rate``) used to restart it: the read in flight lost
its hold, so a second read started before the first was charged, and every PUT handed out a
fresh burst; an integration run delivered 1500 messages in 3 s at 200/s with a burst of 100.
"""

from __future__ import annotations

import random

import pytest

from tubemq_aio.gateway.leases.model import Booking, GroupState

SCOPE = "c"
PARTS = ["1:t:0", "1:t:1", "2:t:0"]
RATE, BURST = 200.0, 100


def test_setting_the_limit_keeps_the_read_in_flight_and_what_is_owed() -> None:
    m = GroupState()
    m.boot()
    m.sync_parts(0, SCOPE, ["p", "q"])
    m.set_rate(0, RATE, BURST)
    assert m.acquire(0, SCOPE, "A", 20_000, "h")[:2] == ("leased", "p")
    m.set_rate(1, RATE, BURST)  # the same limit again while A reads: A still holds it
    assert m.acquire(2, SCOPE, "B", 20_000, "h")[0] == "held"
    assert m.init(3, SCOPE, "p", "A", 0, 50_000) == ("ok", 0)
    assert m.record(3, SCOPE, "p", "A", Booking(0, 14_000, 14_000, 500)) == ("ok",)
    m.set_rate(4, RATE, BURST)  # no fresh burst: the 500 stay owed
    # 500 at 200/s from ms 3 is 2.5 s, less the burst's 0.5 s, asked at ms 5
    assert m.acquire(5, SCOPE, "B", 20_000, "h") == ("throttled", 1998)
    m.set_rate(6, RATE / 2, BURST)  # half the rate: the same messages owed take twice as long
    assert m.tat_us == 6_000 + (2_503_000 - 6_000) * 2
    assert m.acquire(7, SCOPE, "B", 20_000, "h") == ("throttled", 3993)
    m.set_rate(8, 0.0, BURST)  # off: nothing owed, no hold
    assert m.tat_us is None
    assert m.rate_hold is None
    assert m.acquire(9, SCOPE, "B", 20_000, "h")[:2] == ("leased", "q")


def _run(seed: int) -> tuple[int, int, int, int]:
    """Random reads (several at once), probes, acks, resets and PUTs of the same limit on
    virtual time. Returns (messages booked, first and last admission ms, largest batch)."""
    rng = random.Random(seed)
    m = GroupState()
    m.boot()
    m.sync_parts(0, SCOPE, PARTS)
    now = 0
    m.set_rate(now, RATE, BURST)
    reading: dict[str, tuple[str, int]] = {}  # lease id -> (partition, admitted at)
    booked: list[str] = []
    admitted: list[tuple[int, int]] = []  # (admitted at, messages) of each booked batch
    for step in range(400):
        now += rng.choice([0, 0, 1, 5, 50, 300])
        op = rng.choice(["read", "read", "book", "book", "ack", "probe", "put", "reset"])
        lid = f"L{step}"
        if op == "read":
            got = m.acquire(now, SCOPE, lid, 20_000, "h")
            if got[0] == "leased":
                reading[lid] = (str(got[1]), now)
        elif op == "probe":
            p = rng.choice(PARTS)
            got = m.acquire(now, SCOPE, lid, 20_000, "hk", want=p)
            if got[0] == "leased":
                cmt = m.scope(SCOPE).part(p).committed
                base = 0 if cmt is None else cmt
                if cmt is None:
                    m.init(now, SCOPE, p, lid, 0, 1_000_000)
                m.record(now, SCOPE, p, lid, Booking(base, base, 1_000_000, 0))
        elif op == "book" and reading:
            held = rng.choice(sorted(reading))
            p, at = reading.pop(held)
            if m.scope(SCOPE).part(p).committed is None:
                m.init(now, SCOPE, p, held, 0, 1_000_000)
            cmt = m.scope(SCOPE).part(p).committed
            base = 0 if cmt is None else cmt
            n = rng.randint(1, 500)
            if m.record(now, SCOPE, p, held, Booking(base, base + 28 * n, 1_000_000, n)) == ("ok",):
                admitted.append((at, n))
                booked.append(held)
        elif op == "ack" and booked:
            held = booked.pop(rng.randrange(len(booked)))
            where = [q for q, ps in m.scope(SCOPE).parts.items() if ps.lease_id == held]
            if where:
                m.settle(now, SCOPE, where[0], held, "ack")
        elif op == "put":
            m.set_rate(now, RATE, BURST)
        elif op == "reset":
            m.reset(now, SCOPE, "earliest", [], [])
    total = sum(n for _, n in admitted)
    first = min((at for at, _ in admitted), default=0)
    last = max((at for at, _ in admitted), default=0)
    return total, first, last, max((n for _, n in admitted), default=0)


@pytest.mark.parametrize("seed", range(40))
def test_no_run_admits_more_than_rate_times_time_plus_burst_plus_one_batch(seed: int) -> None:
    total, first, last, largest = _run(seed)
    assert total > BURST  # the run did read
    assert total <= RATE * (last - first) / 1000 + BURST + largest, (total, first, last)


@pytest.mark.parametrize("seed", range(20))
def test_a_throttled_answer_waits_exactly_until_the_limiter_admits(seed: int) -> None:
    """``retry_after_ms`` (and so ``Retry-After``, its whole seconds rounded up) is the wait:
    a millisecond earlier the group is still throttled, at it a fetch is admitted."""
    rng = random.Random(seed)
    m = GroupState()
    m.boot()
    m.sync_parts(0, SCOPE, PARTS)
    rate, burst = rng.choice([(0.5, 1), (200.0, 100), (3000.0, 7)])
    m.set_rate(0, rate, burst)
    now = 0
    for step in range(30):
        got = m.acquire(now, SCOPE, f"L{step}", 60_000, "h")
        if got[0] == "throttled":
            wait = int(str(got[1]))
            assert wait >= 1
            if wait > 1:
                assert m.acquire(now + wait - 1, SCOPE, "early", 60_000, "h")[0] == "throttled"
            now += wait
            continue
        assert got[0] == "leased", got
        p = str(got[1])
        if m.scope(SCOPE).part(p).committed is None:
            m.init(now, SCOPE, p, f"L{step}", 0, 10**9)
        cmt = m.scope(SCOPE).part(p).committed or 0
        n = rng.randint(1, 3 * burst)
        assert m.record(now, SCOPE, p, f"L{step}", Booking(cmt, cmt + 28 * n, 10**9, n)) == ("ok",)
        m.settle(now, SCOPE, p, f"L{step}", "ack")
        now += rng.choice([0, 1, 10])
