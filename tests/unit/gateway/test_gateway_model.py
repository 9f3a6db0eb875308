"""The pure lease state machine, explored with hypothesis on virtual time."""

from __future__ import annotations

import copy

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tests.support.examples import examples
from tubemq_aio.gateway.leases.model import Booking, GroupState
from tubemq_aio.gateway.leases.partition_state import gcra

PARTS = ["1:t:0", "1:t:1", "2:t:0"]
SCOPE = "c"


def _cmts(state: GroupState) -> dict[str, int | None]:
    sc = state.scope(SCOPE)
    return {p: sc.parts[p].committed if p in sc.parts else None for p in PARTS}


class LeaseMachine(RuleBasedStateMachine):
    """Random operations on one scope; every rule checks what it may change."""

    def __init__(self) -> None:
        super().__init__()
        self.m = GroupState()
        self.m.boot()
        self.now = 1_000
        self.n = 0
        self.tokens: list[tuple[str, str]] = []  # (p, lease id) ever granted
        self.settled: set[str] = set()

    def _new_lid(self) -> str:
        self.n += 1
        return f"L{self.n}"

    @rule(ms=st.integers(0, 3000))
    def tick(self, ms: int) -> None:
        self.now += ms

    @rule(subset=st.sets(st.sampled_from(PARTS)))
    def sync(self, subset: set[str]) -> None:
        before = _cmts(self.m)
        assert self.m.sync_parts(self.now, SCOPE, sorted(subset))[0] == "ok"
        assert _cmts(self.m) == before  # never deletes or moves cmt

    @rule(lease_ms=st.integers(1, 2000), want=st.sampled_from(["", *PARTS]))
    def acquire(self, lease_ms: int, want: str) -> None:
        before = _cmts(self.m)
        lid = self._new_lid()
        got = self.m.acquire(self.now, SCOPE, lid, lease_ms, "h", want)
        assert _cmts(self.m) == before
        if got[0] == "leased":
            p = str(got[1])
            assert not want or p == want
            self.tokens.append((p, lid))
            # a retried acquire answers the same
            assert self.m.acquire(self.now, SCOPE, lid, lease_ms, "h", want) == got

    @precondition(lambda self: self.tokens)
    @rule(i=st.integers(0, 10_000), off=st.integers(0, 500))
    def init(self, i: int, off: int) -> None:
        p, lid = self.tokens[i % len(self.tokens)]
        sc = self.m.scope(SCOPE)
        had = sc.part(p).committed
        got = self.m.init(self.now, SCOPE, p, lid, off, off + 100)
        if got[0] == "ok":
            assert got[1] == (off if had is None else had)
        else:
            assert sc.part(p).committed == had

    @precondition(lambda self: self.tokens)
    @rule(i=st.integers(0, 10_000), size=st.integers(0, 200), n=st.integers(0, 3))
    def record(self, i: int, size: int, n: int) -> None:
        p, lid = self.tokens[i % len(self.tokens)]
        before = _cmts(self.m)
        known = before[p]
        base = 0 if known is None else known
        frozen = copy.deepcopy(self.m) if lid in self.settled else None
        got = self.m.record(
            self.now, SCOPE, p, lid, Booking(base, base + size, base + size, n, 400, -1)
        )
        after = _cmts(self.m)
        if got[0] == "released" and frozen is None:
            assert after[p] == base + size  # an empty scan moves cmt
            self.settled.add(lid)
        else:
            assert after == before
        if frozen is not None:
            frozen.cursor.pop(p, None)
            self.m.cursor.pop(p, None)
            assert _cmts(frozen) == _cmts(self.m)

    @precondition(lambda self: self.tokens)
    @rule(i=st.integers(0, 10_000), back=st.integers(-28, 300), exact=st.booleans())
    def rewind(self, i: int, back: int, exact: bool) -> None:
        p, lid = self.tokens[i % len(self.tokens)]
        sc = self.m.scope(SCOPE)
        ps = sc.part(p)
        before, live, booked = _cmts(self.m), self.m._live(sc, p, lid, self.now), ps.batch_start
        old = (ps.committed or 0) if exact else 500
        frozen = copy.deepcopy(self.m.scopes) if lid in self.settled else None
        got = self.m.rewind(self.now, SCOPE, p, lid, old, old - back, old - back + 56)
        after = _cmts(self.m)
        if got[0] == "ok" and before[p] != old - back:
            # only under the caller's live lease, before a batch is booked, and only backwards
            assert live
            assert booked is None
            assert before[p] == old
            assert back > 0
            assert after == {**before, p: old - back}
            assert p not in self.m.cursor
            assert sc.part(p).lease_id == lid  # the caller keeps its lease
        else:
            assert after == before
        if frozen is not None:  # a settled token can never move an offset back
            assert got == ("stale",)
            assert self.m.scopes == frozen

    @precondition(lambda self: self.tokens)
    @rule(
        i=st.integers(0, 10_000),
        action=st.sampled_from(["ack", "nack", "release"]),
        delay=st.integers(0, 1000),
    )
    def settle(self, i: int, action: str, delay: int) -> None:
        p, lid = self.tokens[i % len(self.tokens)]
        before = _cmts(self.m)
        frozen = copy.deepcopy(self.m) if lid in self.settled else None
        got = self.m.settle(self.now, SCOPE, p, lid, action, delay)
        if frozen is not None:  # a settled token never changes state again
            assert got[0] in ("already", "stale")
            assert self.m.scopes == frozen.scopes
            return
        if got[0] == "acked":
            assert self.m.scope(SCOPE).part(p).committed is not None
        else:
            assert _cmts(self.m) == before
        if got[0] in ("acked", "nacked", "released", "conflict"):
            self.settled.add(lid)
            again = self.m.settle(self.now, SCOPE, p, lid, action, delay)
            assert again[0] == "already"

    @precondition(lambda self: self.tokens)
    @rule(i=st.integers(0, 10_000), lease_ms=st.integers(1, 2000))
    def extend(self, i: int, lease_ms: int) -> None:
        p, lid = self.tokens[i % len(self.tokens)]
        before = _cmts(self.m)
        frozen = copy.deepcopy(self.m.scopes) if lid in self.settled else None
        got = self.m.extend(self.now, SCOPE, p, lid, lease_ms)
        assert _cmts(self.m) == before
        if frozen is not None:
            assert got == ("stale",)
            assert self.m.scopes == frozen

    @rule(to=st.sampled_from(["earliest", "latest", ""]), off=st.integers(0, 900))
    def reset(self, to: str, off: int) -> None:
        target = to
        pairs = [] if target else [(PARTS[off % len(PARTS)], off)]
        out = self.m.reset(self.now, SCOPE, target, pairs, [])
        for p, _, new in out:
            cmt = self.m.scope(SCOPE).part(p).committed
            assert cmt == (None if target else int(new))
        for p, lid in self.tokens:
            if any(p == q for q, _, _ in out):
                self.settled.add(lid)  # their leases are gone for good

    @invariant()
    def one_live_lease_per_partition(self) -> None:
        sc = self.m.scope(SCOPE)
        assert not set(sc.ready) & set(sc.leased)
        assert sorted(sc.acq.values()) == sorted(set(sc.acq.values()))
        for lid, p in sc.acq.items():
            assert p in sc.leased
            assert sc.part(p).lease_id == lid
        live = [lid for p, lid in self.tokens if self.m._live(sc, p, lid, self.now)]
        live_parts = [p for p, lid in self.tokens if self.m._live(sc, p, lid, self.now)]
        assert len(live_parts) == len(set(live_parts)), live


TestLeaseMachine = LeaseMachine.TestCase
TestLeaseMachine.settings = settings(
    max_examples=examples(150), stateful_step_count=40, deadline=None
)


def test_gcra_allows_burst_then_spaces_requests() -> None:
    rate, burst = 10.0, 5
    tat: int | None = None
    now = 0
    assert gcra(tat, now, rate, burst, 0)[0] == 0
    _, tat = gcra(tat, now, rate, burst, 5)  # a batch of 5 fills the burst
    wait, same = gcra(tat, now, rate, burst, 0)
    assert same == tat
    assert wait == 0  # exactly at the burst edge
    _, tat = gcra(tat, now, rate, burst, 1)
    wait, _ = gcra(tat, now, rate, burst, 0)
    assert wait == 100_000  # one message at 10/s = 100 ms
    assert gcra(tat, now + 100_000, rate, burst, 0)[0] == 0


def test_late_ack_counts_until_released_again() -> None:
    m = GroupState()
    m.boot()
    m.sync_parts(0, SCOPE, ["p"])
    assert m.acquire(0, SCOPE, "A", 100, "h")[:2] == ("leased", "p")
    assert m.init(1, SCOPE, "p", "A", 0, 50) == ("ok", 0)
    assert m.record(2, SCOPE, "p", "A", Booking(0, 28, 50, 1, 400, 28)) == ("ok",)
    # expired and reclaimed by someone's acquire, but nobody took the partition yet... the
    # acquire itself takes it, so use want= another partition to only reclaim
    assert m.acquire(200, SCOPE, "X", 100, "h", want="q")[0] == "none"
    assert m.scope(SCOPE).part("p").redeliveries == 1
    assert m.settle(201, SCOPE, "p", "A", "ack") == ("acked", 28)
    assert m.scope(SCOPE).part("p").redeliveries == 0
    # leased again by B: A's retried ack is still "already"
    assert m.acquire(202, SCOPE, "B", 100, "h")[:3] == ("leased", "p", 28)
    assert m.settle(203, SCOPE, "p", "A", "ack") == ("already", 28, "acked")
    # B never acks; its lease expires and C takes the partition: B's late ack is stale
    assert m.record(204, SCOPE, "p", "B", Booking(28, 56, 60, 1, 400, 56)) == ("ok",)
    assert m.acquire(400, SCOPE, "C", 100, "h")[:5] == ("leased", "p", 28, 500, 1)
    assert m.settle(401, SCOPE, "p", "B", "ack") == ("stale",)
    assert m.scope(SCOPE).part("p").committed == 28


def test_lost_state_refuses_everything_but_reset() -> None:
    m = GroupState()
    assert m.acquire(0, SCOPE, "A", 100, "h") == ("lost",)
    assert m.settle(0, SCOPE, "p", "A", "ack") == ("lost",)
    assert m.sync_parts(0, SCOPE, ["p"]) == ("lost",)
    m.reset(0, SCOPE, "earliest", [], ["p"])
    assert m.acquire(0, SCOPE, "A", 100, "h")[:2] == ("leased", "p")


def test_gone_partition_keeps_its_committed_offset() -> None:
    m = GroupState()
    m.boot()
    m.sync_parts(0, SCOPE, ["p"])
    m.reset(0, SCOPE, "", [("p", 56)], [])
    m.sync_parts(1, SCOPE, [])
    sc = m.scope(SCOPE)
    assert sc.part("p").gone
    assert sc.part("p").committed == 56
    assert "p" not in sc.ready
    assert m.acquire(2, SCOPE, "A", 100, "h")[0] == "none"
    m.sync_parts(3, SCOPE, ["p"])
    assert m.acquire(4, SCOPE, "A", 100, "h")[:3] == ("leased", "p", 56)


def test_rewind_moves_back_under_the_lease_and_older_tokens_get_stale() -> None:
    m = GroupState()
    m.boot()
    m.sync_parts(0, SCOPE, ["p"])
    assert m.acquire(0, SCOPE, "A", 100, "h")[:2] == ("leased", "p")
    assert m.init(1, SCOPE, "p", "A", 0, 560) == ("ok", 0)
    assert m.record(2, SCOPE, "p", "A", Booking(0, 560, 560, 20, 400, 560)) == ("ok",)
    assert m.settle(3, SCOPE, "p", "A", "ack") == ("acked", 560)
    # B leases, the broker now ends at 280 (lost tail); A's settled lease stays settled
    assert m.acquire(4, SCOPE, "B", 100, "h")[:3] == ("leased", "p", 560)
    assert m.rewind(5, SCOPE, "p", "A", 560, 280, 280) == ("stale",)
    assert m.rewind(5, SCOPE, "p", "B", 500, 280, 280) == ("moved", 560)
    assert m.rewind(5, SCOPE, "p", "B", 560, 560, 560) == ("moved", 560)
    assert m.rewind(5, SCOPE, "p", "B", 560, 280, 300) == ("ok", 280)
    assert m.rewind(5, SCOPE, "p", "B", 560, 280, 300) == ("ok", 280)  # a retry
    ps = m.scope(SCOPE).part("p")
    assert (ps.committed, ps.max_offset, ps.lease_id) == (280, 300, "B")
    assert "p" not in m.cursor
    assert m.settle(6, SCOPE, "p", "A", "ack") == ("already", 280, "acked")
    # after the lease expired, a late rewind under it is refused
    assert m.rewind(200, SCOPE, "p", "B", 280, 0, 0) == ("stale",)
    assert m.scope(SCOPE).part("p").committed == 280
    # a booked batch is never moved back under its lease
    assert m.acquire(201, SCOPE, "C", 100, "h")[:3] == ("leased", "p", 280)
    assert m.record(202, SCOPE, "p", "C", Booking(280, 336, 336, 2, 400, 336)) == ("ok",)
    assert m.rewind(203, SCOPE, "p", "C", 280, 0, 0) == ("moved", 280)
