"""The read-ahead off the fetch's critical path, proven on the pure lease model.

A replica answers a fetch first and only then reads the partition's next batch (a GetMessage
and the CommitOffset right behind it on one connection) and keeps it for the partition's next
fetch. That read has no lease around it: the client may ack at once and another replica lease
the partition while it is still on its way. The simulation runs replicas as programs whose
every Redis call and every broker arrival is a step of its own, interleaved at random with other
replicas' acquires, reads, commits and bookings, clients' acks, nacks and lapses, replica kills
(a killed replica's read-ahead requests already sent still arrive until their deadline), the
broker losing its tail and an admin reset. The broker is :class:`~tests.support.fence_broker.Broker`
(one batch in flight per group and partition, whoever read it; ``docs/protocol/consumer.md``
§4.2). The invariant: every booked batch starts at the committed offset and its end is the end
of the messages it holds (nothing skipped, nothing twice), with the messages the broker held
there when it was read.

With the read-in-flight mark (``GroupState.read_ahead``) no schedule breaks it (a hypothesis
search that shrinks what it finds, and thousands of seeded schedules); without it
(:class:`NaiveWorld`, the same read-ahead ended by a script that only stores the fence and the
cursor) some three schedules in a hundred skip messages, and
:func:`test_the_naive_read_ahead_skips_messages` replays one step by step.

Resets come at any time, also while a lease holder is between its acquire and its booking
(its reads on the critical path may still reach the broker until its lease's expiry). A reset
that freed such a partition at once let the old holder's late read land inside the next
lease's read exactly as an unmarked read-ahead does (about one schedule in 2 500;
:class:`FreeingResetWorld` keeps that reset and
:func:`test_a_reset_that_frees_a_reading_lease_skips_messages` replays one); the reset now
leaves a voided read-in-flight mark until the old lease's expiry, and no schedule skips.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Generator

import hypothesis.strategies as st
import pytest
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, rule

from tests.support.examples import examples
from tests.support.fence_broker import Broker
from tubemq_aio.gateway.leases.model import Booking, GroupState, KeptFence
from tubemq_aio.gateway.leases.read_ahead import ReadAhead

P, S = "1:t:0", "c"
LEASE_MS = 1_000
RPC_MS = 200  # a broker call's deadline, and the read-ahead's allowance
REPLICAS = ("r1", "r1", "r2", "r3")  # r1 fetches most: its kept batches get served
#: What a schedule step does, as often as listed: mostly replicas advancing and read-ahead
#: requests arriving (the interleavings that matter), the rest clients, producers and faults.
ACTIONS = (
    *["step"] * 16, *["arrive"] * 6, *["fetch"] * 4, *["ack"] * 4, "nack", "release",
    *["produce"] * 3, *["tick"] * 3, "probe", "fault",
)  # fmt: skip
Batch = tuple[tuple[int, int], ...]
Steps = Generator[None, None, None]


@dataclasses.dataclass
class ReadCall:
    """A read-ahead on its way: a GetMessage, then a CommitOffset on the same connection."""

    start: int  # where the booked batch ends: the broker's committed cursor should be there
    size: int
    until: int  # the replica aborts its connection then: nothing arrives later
    pending: list[str] = dataclasses.field(default_factory=lambda: ["get", "commit"])
    got: tuple[str, int, Batch, int] | None = None  # (status, start, batch, broker gen)
    committed: int | None = None

    def answered(self) -> bool:
        return not self.pending


@dataclasses.dataclass
class Kept:
    fence: KeptFence
    batch: Batch
    end: int
    gen: int  # the broker's generation when it was read


class ReadAheadWorld(RuleBasedStateMachine):
    """Three replicas, one partition of a clustering group, the model as the Redis state."""

    guarded = True  # False: the read-ahead without the read-in-flight mark

    def __init__(self) -> None:
        super().__init__()
        self.m = GroupState()
        self.m.boot()
        self.m.sync_parts(0, S, [P])
        self.now, self.n = 1_000, 0
        assert self.m.acquire(self.now, S, "L0", LEASE_MS, "setup")[0] == "leased"
        assert self.m.init(self.now, S, P, "L0", 0, 0) == ("ok", 0)
        assert self.m.settle(self.now, S, P, "L0", "release")[0] == "released"
        self.broker = Broker()
        self.programs: list[tuple[str, Steps]] = []
        self.kept: dict[str, Kept] = {}
        self.calls: list[ReadCall] = []  # read-aheads sent, requests not all arrived
        self.held: list[str] = []  # leases answered to clients and not settled
        # leases whose holder is between its acquire and its booking (reads on the critical
        # path may still reach the broker; see reset)
        self.critical: dict[str, tuple[str, int]] = {}  # lid -> (replica, lexp)
        self.stats: Counter[str] = Counter()

    def _token(self) -> str:
        self.n += 1
        return f"t{self.n}"

    # ---- what a replica does ------------------------------------------------------------------

    def _fetch(self, replica: str, size: int) -> Steps:
        lid = self._token()
        got = self.m.acquire(self.now, S, lid, LEASE_MS, replica)
        if got[0] != "leased":
            self.stats[f"acquire_{got[0]}"] += 1
            mark = self.m.reading.get(P)
            self.stats["blocked_by_read"] += int(
                mark is not None and ReadAhead.parse(mark).live(self.now)
            )
            return
        _, _, cmt, lexp, _, _, cursor, handed = got
        assert isinstance(cmt, int)
        assert isinstance(lexp, int)
        assert isinstance(cursor, int)
        assert isinstance(handed, str)
        kept = self.kept.pop(replica, None)  # served now or dropped, never kept twice
        self.critical[lid] = (replica, lexp)
        # a kept batch is served only while the connection it was read on is open (a broker
        # restart closes it: the broker may have lost that batch and reuse its offsets)
        if kept is not None and kept.fence.matches(handed, cmt) and kept.gen == self.broker.gen:
            batch, end, gen = kept.batch, kept.end, kept.gen  # no broker call
            self.stats["kept_served"] += 1
        else:
            read = yield from self._read(lid, lexp, cmt, cursor, size)
            if read is None:
                self.m.settle(self.now, S, P, lid, "release")
                self.critical.pop(lid, None)
                return
            cmt, batch, end, gen = read
        yield  # the booking's round trip: the booking and the read-ahead mark
        self.critical.pop(lid, None)
        booked = self.m.record(self.now, S, P, lid, Booking(cmt, end, end, len(batch), 0, end))
        if booked[0] == "released":  # an empty read: nothing to answer or read ahead
            return
        token = self._token()
        until = self.now + RPC_MS
        if self.guarded:
            marked = self.m.read_ahead(self.now, S, P, lid, token, RPC_MS)
            if booked[0] == "ok":
                assert marked == ("ok", until)
        if booked[0] != "ok":
            return
        self._check_served(cmt, end, batch, gen)
        self.held.append(lid)
        yield  # the answer is written; the read-ahead leaves after it, before its deadline
        if self.now >= until:
            return  # too late to send (a guarded mark lapses by itself)
        call = ReadCall(end, size, until)
        self.calls.append(call)
        while not call.answered() and self.now < until:
            yield
        if call in self.calls:  # the deadline: the connection is aborted
            self.calls.remove(call)
        yield  # the read-ahead's end in Redis
        self._finish(replica, token, call)

    def _read(
        self, lid: str, lexp: int, cmt: int, cursor: int, size: int
    ) -> Generator[None, None, tuple[int, Batch, int, int] | None]:
        """A read on the critical path (each broker call an arrival of its own, all before the
        lease's end); ``(cmt, batch, end, gen)`` or None (given up)."""
        if cursor != cmt:
            cmt = yield from self._register(lid, lexp, cmt)
            if cmt < 0:
                return None
        for attempt in range(2):
            yield
            if self.now >= lexp:
                return None
            gen = self.broker.gen
            status, at, batch = self.broker.get(False, size)
            if status == "ok" and at == cmt:
                break
            if status == "404":
                yield
                self.m.record(self.now, S, P, lid, Booking(cmt, cmt, -1, 0, 0, cmt))
                return None
            if attempt:
                return None
            cmt = yield from self._register(lid, lexp, cmt)
            if cmt < 0:
                return None
        yield  # the CommitOffset written right behind the GetMessage arrives
        if self.now >= lexp:
            return None
        end = self.broker.commit(True)
        if end < at + len(batch):  # not a commit of this read: give up (the real read retries)
            return None
        return cmt, batch, end, gen

    def _register(self, lid: str, lexp: int, cmt: int) -> Generator[None, None, int]:
        """Register at ``cmt``; move the committed offset back when the broker lost the tail.
        The committed offset to read from (-1: given up)."""
        yield
        if self.now >= lexp:
            return -1
        begin = self.broker.register(cmt)
        if begin < cmt:
            yield
            if self.m.rewind(self.now, S, P, lid, cmt, begin, begin)[0] != "ok":
                return -1
        return begin

    def _probe(self) -> Steps:
        """The housekeeper's lag probe: a lease of the partition, a register at the committed
        offset, an empty booking."""
        lid = self._token()
        got = self.m.acquire(self.now, S, lid, LEASE_MS, "hk", want=P)
        if got[0] != "leased":
            self.stats["probe_waited"] += 1
            return
        cmt, lexp = got[2], got[3]
        assert isinstance(cmt, int)
        assert isinstance(lexp, int)
        self.critical[lid] = ("hk", lexp)
        begin = yield from self._register(lid, lexp, cmt)
        if begin < 0:
            self.m.settle(self.now, S, P, lid, "release")
            self.critical.pop(lid, None)
            return
        yield
        self.critical.pop(lid, None)
        self.m.record(self.now, S, P, lid, Booking(begin, begin, begin, 0, 0, begin))
        self.stats["probed"] += 1

    def _finish(self, replica: str, token: str, call: ReadCall) -> None:
        kept: Kept | None = None
        cursor = -1
        if call.got is not None and call.committed is not None and call.committed >= 0:
            status, at, batch, gen = call.got
            if status == "ok" and at == call.start and call.committed >= at + len(batch):
                kept = Kept(KeptFence(token, at), batch, call.committed, gen)
                cursor = call.committed
            elif status == "404":
                cursor = call.committed
        fence = "" if kept is None else kept.fence.text()
        if self.guarded:
            if self.m.read_ahead_done(self.now, S, P, token, fence, cursor)[0] != "ok":
                self.stats["read_ahead_stale"] += 1
                return
        else:  # what a script without the mark does: store the fence and the cursor
            self.m.fence[P] = fence
            if cursor >= 0:
                self.m.cursor[P] = cursor
        if kept is not None:
            self.kept[replica] = kept
            self.stats["kept"] += 1

    def _check_served(self, cmt: int, end: int, batch: Batch, gen: int) -> None:
        assert not batch or batch[0][0] == cmt, ("served elsewhere", cmt, batch)
        assert end == cmt + len(batch), ("skipped" if end > cmt + len(batch) else "twice", cmt, end)
        if gen == self.broker.gen:
            assert batch == tuple(self.broker.messages[cmt:end])
        else:  # a fresh read's broker restarted between its read and its booking
            self.stats["served_across_a_crash"] += 1
        self.stats["served"] += 1

    # ---- the schedule ---------------------------------------------------------------------------

    def fetch(self, replica: str, size: int) -> None:
        self.programs.append((replica, self._fetch(replica, size)))
        self.step(len(self.programs) - 1)

    def probe(self) -> None:
        self.programs.append(("hk", self._probe()))
        self.step(len(self.programs) - 1)

    def step(self, i: int) -> None:
        if self.programs:
            i %= len(self.programs)
            try:
                next(self.programs[i][1])
            except StopIteration:
                del self.programs[i]

    def arrive(self, i: int) -> None:
        """The next request of a read-ahead reaches the broker (only before its deadline)."""
        if not self.calls:
            return
        call = self.calls[i % len(self.calls)]
        if self.now >= call.until:
            self.calls.remove(call)
            return
        if call.pending.pop(0) == "get":
            gen = self.broker.gen
            status, at, batch = self.broker.get(False, call.size)
            call.got = (status, at, batch, gen)
        else:
            call.committed = self.broker.commit(True)
            self.calls.remove(call)

    def settle(self, action: str, i: int) -> None:
        if self.held:
            self.m.settle(self.now, S, P, self.held.pop(i % len(self.held)), action, 0)

    def tick(self, ms: int) -> None:
        self.now += ms

    def produce(self, n: int) -> None:
        self.broker.produce(n)

    def broker_crash(self, keep: int) -> None:
        self.broker.crash(keep)
        self.calls.clear()  # its connections are gone: nothing on them arrives

    def kill(self, replica: str) -> None:
        self.programs = [(r, steps) for r, steps in self.programs if r != replica]
        self.kept.pop(replica, None)
        self.critical = {lid: rl for lid, rl in self.critical.items() if rl[0] != replica}

    def reset(self, to: int) -> None:
        """An admin reset, at any time: also while a holder is between its acquire and its
        booking (its reads on the critical path may still reach the broker) or a read-ahead is
        on its way."""
        self.stats["reset_while_reading"] += any(
            self.now < lexp for _, lexp in self.critical.values()
        )
        self.m.reset(self.now, S, "", [(P, to)], [])

    def do(self, kind: str, x: int) -> None:
        """One step of a schedule: ``kind`` from :data:`ACTIONS`, its arguments taken from
        ``x`` (0-255)."""
        if kind == "fetch":
            self.fetch(REPLICAS[x % 4], 1 + x // 4 % 4)
        elif kind in ("step", "arrive"):
            getattr(self, kind)(x % 4)
        elif kind in ("ack", "nack", "release"):
            self.settle(kind, x % 4)
        elif kind == "tick":
            self.tick((0, 1, 50, 150, 250, 1200)[x % 6])
        elif kind == "produce":
            self.produce(1 + x % 3)
        elif kind == "probe":
            self.probe()
        elif x % 4 == 0:
            self.broker_crash(x // 4 % 31)
        elif x % 4 == 1:
            self.reset(x // 4 % 21)
        else:
            self.kill((*REPLICAS, "hk")[x // 4 % 5])

    @rule(kind=st.sampled_from(ACTIONS), x=st.integers(0, 255))
    def act(self, kind: str, x: int) -> None:
        self.do(kind, x)


class NaiveWorld(ReadAheadWorld):
    """The same read-ahead without the read-in-flight mark."""

    guarded = False


class FreeingResetWorld(ReadAheadWorld):
    """The reset as it was before it held a partition under a reading lease: it voided a
    read-ahead's mark (kept until its deadline) and freed the partition at once otherwise."""

    def reset(self, to: int) -> None:
        mark = self.m.reading.get(P)
        super().reset(to)
        if mark is None:
            self.m.reading.pop(P, None)
        else:
            self.m.reading[P] = ReadAhead("", ReadAhead.parse(mark).until).text()


TestReadAheadWorld = ReadAheadWorld.TestCase
TestReadAheadWorld.settings = settings(
    max_examples=examples(200), stateful_step_count=150, deadline=None
)


def walk(cls: type[ReadAheadWorld], seed: int, steps: int = 150) -> ReadAheadWorld:
    """A seeded random schedule of ``steps`` steps (many more schedules per second than the
    hypothesis search, which shrinks what it finds)."""
    rng = random.Random(seed)
    world = cls()
    for _ in range(steps):
        world.do(rng.choice(ACTIONS), rng.randrange(256))
    return world


def test_random_schedules_with_the_mark_skip_nothing() -> None:
    totals: Counter[str] = Counter()
    for seed in range(examples(3_000)):
        totals.update(walk(ReadAheadWorld, seed).stats)
    # the schedules did what they are for: batches served from memory, acquires held off by a
    # read in flight, read-aheads ended by a reset or a deadline, dead replicas, broker crashes,
    # resets while a holder reads
    seen = ("kept_served", "blocked_by_read", "read_ahead_stale", "served_across_a_crash")
    for what in (*seen, "reset_while_reading"):
        assert totals[what] > 0, totals


def test_random_schedules_without_the_mark_skip_messages() -> None:
    found = []
    for seed in range(examples(1_000)):
        try:
            walk(NaiveWorld, seed)
        except AssertionError as e:
            found.append((seed, str(e).partition("'")[2].partition("'")[0]))
    assert found
    assert {what for _, what in found} <= {"skipped", "twice", "served elsewhere"}


# ---- schedules written out --------------------------------------------------------------------


def _world(cls: type[ReadAheadWorld] = ReadAheadWorld, messages: int = 40) -> ReadAheadWorld:
    world = cls()
    world.broker.produce(messages)
    return world


def _run(world: ReadAheadWorld, i: int = -1) -> None:
    """Step program ``i`` until it answers (a lease held) or ends."""
    _, steps = world.programs[i]
    held = len(world.held)
    for _ in steps:
        if len(world.held) > held:
            return
    world.programs = [(r, s) for r, s in world.programs if s is not steps]


def _drain(world: ReadAheadWorld) -> None:
    """Deliver every read-ahead request and run every program to its end."""
    while world.calls or world.programs:
        if world.calls:
            world.arrive(0)
        if world.programs:
            world.step(0)


def test_a_fetch_served_from_the_kept_batch_makes_no_broker_call() -> None:
    world = _world()
    world.fetch("r1", 4)
    _run(world)
    _drain(world)
    for i in range(1, 6):
        world.settle("ack", 0)
        before = world.broker.rpcs
        world.fetch("r1", 4)
        _run(world)
        assert world.broker.rpcs == before  # the answer needed no broker call
        assert world.held
        assert world.stats["kept_served"] == i
        _drain(world)
        assert world.broker.rpcs == before + 2  # the read-ahead: GetMessage + CommitOffset
    assert world.stats["served"] == 6


def test_an_acquire_waits_for_the_read_in_flight() -> None:
    world = _world()
    world.fetch("r1", 4)
    _run(world)  # answered [0, 4) and marked a read-ahead
    world.settle("ack", 0)
    until = ReadAhead.parse(world.m.reading[P]).until
    assert world.m.acquire(world.now, S, "x", LEASE_MS, "r2") == ("none", until, -1)
    _drain(world)  # the read-ahead ends: the mark goes, the fence is r1's
    assert P not in world.m.reading
    assert world.m.fence[P].endswith("|4")
    world.fetch("r2", 4)  # r2 takes the fence from r1 and reads afresh
    _run(world)
    assert world.stats["kept_served"] == 0
    assert world.stats["served"] == 2
    assert world.m.scope(S).part(P).batch_start == 4


def test_an_owner_killed_mid_read_holds_the_partition_until_the_deadline() -> None:
    world = _world()
    world.fetch("r1", 4)
    _run(world)
    world.settle("ack", 0)
    dead = world.m.reading[P]
    world.step(0)  # the read-ahead is sent
    world.arrive(0)  # its GetMessage arrives; the CommitOffset is still on its way
    world.kill("r1")
    world.fetch("r2", 4)
    assert world.stats["acquire_none"] == 1  # the mark holds the partition
    world.arrive(0)  # the dead replica's CommitOffset still arrives: [4, 8) committed
    world.tick(250)
    world.fetch("r2", 4)  # past the deadline: the mark goes with the broker cursor
    _run(world)
    assert world.m.reading[P] != dead  # the mark now is r2's own read-ahead
    assert world.m.scope(S).part(P).batch_start == 4  # registered at 4, nothing skipped
    assert world.stats["served"] == 2


def test_a_reset_voids_the_read_in_flight() -> None:
    world = _world()
    world.fetch("r1", 4)
    _run(world)
    world.settle("ack", 0)
    world.reset(4)  # the same offset the read-ahead reads from
    assert ReadAhead.parse(world.m.reading[P]).token == ""
    _drain(world)
    assert world.stats["read_ahead_stale"] == 1
    assert "r1" not in world.kept
    world.fetch("r1", 4)  # blocked until the deadline
    assert world.stats["acquire_none"] == 1
    world.tick(250)
    world.fetch("r1", 4)
    _run(world)
    assert world.stats["kept_served"] == 0
    assert world.stats["served"] == 2


def _reset_while_r1_reads(cls: type[ReadAheadWorld]) -> ReadAheadWorld:
    """r1 leases the partition (until 2 000) and registers at 0; its GetMessage is still on its
    way when an admin resets the partition to 0; r2 fetches."""
    world = _world(cls, messages=2)
    world.fetch("r1", 4)
    world.step(0)  # r1 registers at 0; its GetMessage is next
    world.reset(0)
    assert world.stats["reset_while_reading"] == 1
    world.fetch("r2", 4)
    return world


def test_a_reset_that_frees_a_reading_lease_skips_messages() -> None:
    # The schedule the simulation found with resets at any time, before the fix: r2 leases
    # the partition at once and registers at 0; its GetMessage reads [0, 2); two messages
    # come; r1's late GetMessage reads again from 0: [0, 4) in flight; r2's CommitOffset
    # commits it and answers 4: r2 books [0, 4) holding [0, 2).
    world = _reset_while_r1_reads(FreeingResetWorld)
    r1, r2 = 0, 1
    world.step(r2)  # r2 registers at 0
    world.step(r2)  # r2's GetMessage: [0, 2)
    world.produce(2)
    world.step(r1)  # r1's GetMessage: [0, 4)
    world.step(r2)  # r2's CommitOffset: 4
    with pytest.raises(AssertionError, match="skipped"):
        world.step(r2)  # r2 books [0, 4)


def test_a_reset_holds_a_reading_lease_partition_until_the_lease_ends() -> None:
    world = _reset_while_r1_reads(ReadAheadWorld)
    lexp = 1_000 + LEASE_MS
    assert world.stats["acquire_none"] == 1  # r2 waits for the end of r1's lease
    assert world.m.acquire(world.now, S, "x", LEASE_MS, "hk", want=P) == ("none", lexp, -1)
    assert world.m.scope(S).part(P).committed == 0  # the reset itself took effect at once
    world.produce(2)
    _drain(world)  # r1's GetMessage and CommitOffset arrive; its booking is refused
    assert world.stats["served"] == 0
    assert world.broker.committed == 4  # r1's read committed [0, 4) at the broker
    world.tick(LEASE_MS - 1)
    world.fetch("r2", 4)
    assert world.stats["acquire_none"] == 2  # still r1's lease time
    world.tick(1)
    world.fetch("r2", 4)  # the block is over: the broker cursor is unknown, r2 registers at 0
    _run(world)
    assert world.stats["served"] == 1
    assert world.m.scope(S).part(P).batch_start == 0
    assert world.m.scope(S).part(P).batch_end == 4


def test_the_naive_read_ahead_skips_messages() -> None:
    # r1 answers [0, 4) and sends its read-ahead; the client acks at once. r2 leases the
    # partition (nothing marks the read in flight), its GetMessage reads [4, 6); two messages
    # come; r1's GetMessage reads again from 4: [4, 8) in flight; r2's CommitOffset commits it
    # and answers 8: r2 books [4, 8) holding [4, 6).
    world = _world(NaiveWorld, messages=4)
    world.fetch("r1", 4)
    _run(world)
    world.settle("ack", 0)
    world.step(0)  # r1's read-ahead is sent
    world.produce(2)
    world.fetch("r2", 4)  # acquired; the cursor is at the committed offset
    r2 = len(world.programs) - 1
    world.step(r2)  # r2's GetMessage: [4, 6)
    world.produce(2)
    world.arrive(0)  # r1's GetMessage: [4, 8)
    world.step(r2)  # r2's CommitOffset: 8
    with pytest.raises(AssertionError, match="skipped"):
        world.step(r2)  # r2 books [4, 8)


def test_the_same_schedule_with_the_mark_skips_nothing() -> None:
    world = _world(messages=4)
    world.fetch("r1", 4)
    _run(world)
    world.settle("ack", 0)
    world.step(0)
    world.produce(2)
    world.fetch("r2", 4)
    assert world.stats["acquire_none"] == 1  # r2 waits for r1's read
    _drain(world)
    world.produce(2)
    world.fetch("r1", 4)
    _run(world)
    assert world.stats["kept_served"] == 1
    assert world.m.scope(S).part(P).batch_end == 6


@pytest.mark.parametrize("steps", range(8))
def test_a_kill_at_each_step_of_a_kept_batch_fetch(steps: int) -> None:
    world = _world()
    world.fetch("r1", 4)
    _run(world)
    _drain(world)
    world.settle("ack", 0)
    world.fetch("r1", 4)  # serves the kept [4, 8), then reads [8, 12) ahead
    for _ in range(steps):
        world.step(0)
        world.arrive(0)
    world.kill("r1")
    world.settle("ack", 0)  # when it answered, its client acks
    world.tick(1200)  # past the read-ahead's deadline
    committed = world.m.scope(S).part(P).committed
    assert committed == (8 if world.stats["served"] == 2 else 4)  # answered [4, 8) or not
    world.fetch("r2", 4)
    _run(world)
    assert world.held, world.stats
    assert world.m.scope(S).part(P).batch_start == committed
