"""The world of the read-ahead simulation: replicas as programs whose every Redis call and every
broker arrival is a step, clients, producers and faults, over the pure lease model and a pure
broker (:class:`~tests.support.fence_broker.Broker`). What it proves and how is told in
``tests/unit/gateway/test_gateway_read_ahead_model.py``; schedules written out step by step are in
``tests/unit/gateway/test_gateway_read_ahead_schedules.py``.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Generator

import hypothesis.strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule

from tests.support.fence_broker import Broker
from tubemq_aio.gateway.leases.model import Booking, GroupState, KeptFence
from tubemq_aio.gateway.leases.read_ahead import ReadAhead

__all__ = [
    "ACTIONS",
    "LEASE_MS",
    "RPC_MS",
    "FreeingResetWorld",
    "NaiveWorld",
    "P",
    "ReadAheadWorld",
    "ReleasingWorld",
    "S",
    "Stray",
    "walk",
]

P, S = "1:t:0", "c"
LEASE_MS = 1_000
RPC_MS = 200  # a broker call's deadline, and the read-ahead's allowance
REPLICAS = ("r1", "r1", "r2", "r3")  # r1 fetches most: its kept batches get served
#: What a schedule step does, as often as listed: mostly replicas advancing and read-ahead
#: requests arriving (the interleavings that matter), the rest clients, producers and faults.
ACTIONS = (
    *["step"] * 16,
    *["arrive"] * 6,
    *["fetch"] * 4,
    *["ack"] * 4,
    "nack",
    "release",
    *["produce"] * 3,
    *["tick"] * 3,
    "probe",
    "fault",
    "give_up",
)
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
class Stray:
    """Broker requests of a holder that is gone (killed, or gave up waiting for an answer),
    still on their way on one connection, in order: they arrive before the lease's expiry or
    never (``docs/gateway.md``, "What is assumed")."""

    requests: list[tuple[str, int]]  # ("get", size), ("commit", 0) or ("register", offset)
    until: int


@dataclasses.dataclass
class Kept:
    fence: KeptFence
    batch: Batch
    end: int
    gen: int  # the broker's generation when it was read


class ReadAheadWorld(RuleBasedStateMachine):
    """Three replicas, one partition of a clustering group, the model as the Redis state."""

    guarded = True  # False: the read-ahead without the read-in-flight mark
    #: How a holder gives up on a broker call it sent (a timeout, its fetch cancelled): it lets
    #: its lease lapse (True), or releases it at once (False).
    lapses = True

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
        self.pending: dict[str, tuple[str, int]] = {}  # lid -> its broker request on its way
        self.owners: dict[str, Steps] = {}  # lid -> the program holding it
        self.strays: list[Stray] = []
        self.stats: Counter[str] = Counter()

    def _token(self) -> str:
        self.n += 1
        return f"t{self.n}"

    # ---- what a replica does ------------------------------------------------------------------

    def _sent(self, lid: str, kind: str, arg: int) -> Steps:
        """The step until a broker request of lease ``lid`` arrives (named in ``pending``
        meanwhile: a holder killed or giving up leaves it on its way)."""
        self.pending[lid] = (kind, arg)
        yield
        del self.pending[lid]

    def _fetch(self, replica: str, size: int, lid: str) -> Steps:
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
            yield from self._sent(lid, "get", size)
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
        yield from self._sent(lid, "commit", 0)  # written right behind the GetMessage
        if self.now >= lexp:
            return None
        end = self.broker.commit(True)
        if end < at + len(batch):  # not a commit of this read: give up (the real read retries)
            return None
        return cmt, batch, end, gen

    def _register(self, lid: str, lexp: int, cmt: int) -> Generator[None, None, int]:
        """Register at ``cmt``; move the committed offset back when the broker lost the tail.
        The committed offset to read from (-1: given up)."""
        yield from self._sent(lid, "register", cmt)
        if self.now >= lexp:
            return -1
        begin = self.broker.register(cmt)
        if begin < cmt:
            yield
            if self.m.rewind(self.now, S, P, lid, cmt, begin, begin)[0] != "ok":
                return -1
        return begin

    def _probe(self, lid: str) -> Steps:
        """The housekeeper's lag probe: a lease of the partition, a register at the committed
        offset, an empty booking."""
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
        lid = self._token()
        self._start(replica, lid, self._fetch(replica, size, lid))

    def probe(self) -> None:
        lid = self._token()
        self._start("hk", lid, self._probe(lid))

    def _start(self, replica: str, lid: str, steps: Steps) -> None:
        self.owners[lid] = steps
        self.programs.append((replica, steps))
        self.step(len(self.programs) - 1)

    def step(self, i: int) -> None:
        if self.programs:
            i %= len(self.programs)
            try:
                next(self.programs[i][1])
            except StopIteration:
                del self.programs[i]

    def arrive(self, i: int) -> None:
        """The next request of a read-ahead, or a stray request, reaches the broker (only
        before its deadline)."""
        if not self.calls and not self.strays:
            return
        i %= len(self.calls) + len(self.strays)
        if i >= len(self.calls):
            stray = self.strays[i - len(self.calls)]
            kind, arg = stray.requests.pop(0)
            if not stray.requests or self.now >= stray.until:
                self.strays.remove(stray)
            if self.now < stray.until:
                if kind == "get":
                    self.broker.get(False, arg)
                elif kind == "commit":
                    self.broker.commit(True)
                else:
                    self.broker.register(arg)
                self.stats["stray_arrived"] += 1
            return
        call = self.calls[i]
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
        self.strays.clear()

    def _stray(self, lid: str) -> None:
        """The requests lease ``lid`` has on their way go on without its holder (a GetMessage
        with the CommitOffset written right behind it)."""
        request = self.pending.pop(lid, None)
        _, lexp = self.critical.pop(lid)
        if request is not None:
            behind = [("commit", 0)] if request[0] == "get" else []
            self.strays.append(Stray([request, *behind], lexp))

    def kill(self, replica: str) -> None:
        self.programs = [(r, steps) for r, steps in self.programs if r != replica]
        self.kept.pop(replica, None)
        for lid in [lid for lid, (r, _) in self.critical.items() if r == replica]:
            self._stray(lid)  # the lease lapses

    def give_up(self, i: int) -> None:
        """A holder stops waiting for the answer of a broker request it sent (a timeout, its
        fetch cancelled) and ends its fetch: the lease lapses or is released at once
        (:attr:`lapses`); the request still arrives until the lease's expiry."""
        waiting = sorted(lid for lid in self.pending if lid in self.critical)
        if not waiting:
            return
        lid = waiting[i % len(waiting)]
        steps = self.owners[lid]
        self.programs = [(r, s) for r, s in self.programs if s is not steps]
        self._stray(lid)
        self.stats["gave_up"] += 1
        if not self.lapses:
            self.m.settle(self.now, S, P, lid, "release")

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
        elif kind == "give_up":
            self.give_up(x)
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


class ReleasingWorld(ReadAheadWorld):
    """A holder that gives up on a broker call it sent releases its lease at once."""

    lapses = False


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


def walk(cls: type[ReadAheadWorld], seed: int, steps: int = 150) -> ReadAheadWorld:
    """A seeded random schedule of ``steps`` steps (many more schedules per second than the
    hypothesis search, which shrinks what it finds)."""
    rng = random.Random(seed)
    world = cls()
    for _ in range(steps):
        world.do(rng.choice(ACTIONS), rng.randrange(256))
    return world
