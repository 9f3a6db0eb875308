"""The kept-batch fence, proven on the pure lease model with a pure broker beside it.

Replicas read one partition the way the gateway's fetch does (one broker read per fetch when
the replica kept the partition's next batch, a fresh read otherwise), clients ack, nack or let
leases lapse, replicas die holding kept batches or in the middle of their final read, the
broker loses its unflushed tail, an admin resets. The broker follows the auto-commit rules of
``docs/protocol/consume.md`` ("The in-flight batch"): a GetMessage with ``lastPackConsumed``
commits the group's in-flight batch whoever read it, one without reads from the committed
offset, a register puts the cursor anywhere. Every served batch must start at the lease's
committed offset and hold what the broker holds there now: nothing skipped, nothing stale,
and a kept batch is served only under the fence the acquire handed out.
"""

from __future__ import annotations

import dataclasses

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tests.support.examples import examples
from tests.support.fence_broker import Broker
from tubemq_aio.gateway.leases.model import Booking, GroupState, KeptFence

P, S = "1:t:0", "c"


@dataclasses.dataclass
class Kept:
    fence: KeptFence
    batch: tuple[tuple[int, int], ...]


class FenceWorld(RuleBasedStateMachine):
    """Two or three replicas, one partition, the model as the Redis state."""

    def __init__(self) -> None:
        super().__init__()
        self.m = GroupState()
        self.m.boot()
        self.m.sync_parts(0, S, [P])
        self.broker = Broker()
        self.now, self.n = 1_000, 0
        self.kept: dict[str, Kept] = {}  # replica -> its kept batch of P
        self.held: tuple[str, tuple[tuple[int, int], ...]] | None = None  # (lease, batch)
        self.kept_served = 0

    def _token(self) -> str:
        self.n += 1
        return f"t{self.n}"

    @rule(n=st.integers(1, 6))
    def produce(self, n: int) -> None:
        self.broker.produce(n)

    @rule(ms=st.integers(0, 3000))
    def tick(self, ms: int) -> None:
        self.now += ms

    @rule(keep=st.integers(0, 30))
    def broker_crash(self, keep: int) -> None:
        self.broker.crash(keep)

    @rule(replica=st.sampled_from(["r1", "r2", "r3"]))
    def replica_dies(self, replica: str) -> None:
        self.kept.pop(replica, None)  # its memory is gone; Redis and the broker keep theirs

    @rule(to=st.integers(0, 20))
    def reset(self, to: int) -> None:
        self.m.reset(self.now, S, "", [(P, to)], [])
        self.held = None

    @rule(action=st.sampled_from(["ack", "ack", "nack", "release"]))
    def settle(self, action: str) -> None:
        if self.held is not None:
            self.m.settle(self.now, S, P, self.held[0], action, 0)
            self.held = None

    @rule(
        replica=st.sampled_from(["r1", "r1", "r2", "r3"]),
        size=st.integers(1, 4),
        dies=st.sampled_from(["", "", "", "before_final_read", "after_final_read"]),
    )
    def fetch(self, replica: str, size: int, dies: str) -> None:
        lid = self._token()
        got = self.m.acquire(self.now, S, lid, 1000, replica)
        if got[0] != "leased":
            return
        _, _, cmt, _, _, start, cursor, handed = got
        assert isinstance(cmt, int)
        assert isinstance(cursor, int)
        assert isinstance(handed, str)
        if cmt < 0:  # first read of the group: the start position decides
            begin = self.broker.register(0 if start != "latest" else 1 << 30)
            assert self.m.init(self.now, S, P, lid, begin, begin)[0] == "ok"
            cmt = cursor = begin
        kept = self.kept.pop(replica, None)  # served now or dropped, never kept twice
        batch: tuple[tuple[int, int], ...] = ()
        ahead: tuple[int, tuple[tuple[int, int], ...]] | None = None
        end = -1
        if kept is not None and kept.fence.matches(handed, cmt):
            if dies == "before_final_read":
                return
            status, at, nxt = self.broker.get(True, size)  # commits it, brings the next batch
            if status == "ok" and at > cmt:
                batch, ahead, end = kept.batch, (at, nxt), at
            elif status == "404":  # committed, nothing further: the commit answer says where
                batch, end = kept.batch, self.broker.commit(False)
            # otherwise the broker is not where the fence says: read afresh below
        if not batch:
            if cursor != cmt:
                begin = self.broker.register(cmt)
                if begin < cmt:  # the broker lost the tail: move the committed offset back
                    assert self.m.rewind(self.now, S, P, lid, cmt, begin, begin)[0] == "ok"
                    cmt = begin
            status, at, batch = self.broker.get(False, size)
            if status == "411" or (status == "ok" and at != cmt):
                begin = self.broker.register(cmt)
                if begin < cmt:
                    assert self.m.rewind(self.now, S, P, lid, cmt, begin, begin)[0] == "ok"
                    cmt = begin
                status, at, batch = self.broker.get(False, size)
            if status != "ok":
                self.m.record(self.now, S, P, lid, Booking(cmt, cmt, -1, 0, 0, cmt))
                return
            assert at == cmt
            if dies == "before_final_read":
                return
            status, at, nxt = self.broker.get(True, size)
            if status == "ok" and at > cmt:
                ahead, end = (at, nxt), at
            else:  # 404 (or a refusal): the commit answer says where the batch ends
                end = self.broker.commit(status == "404")
        if dies == "after_final_read":
            return
        fence = None if ahead is None else KeptFence(self._token(), ahead[0])
        booking = Booking(cmt, end, end, len(batch), 0, end, "" if fence is None else fence.text())
        if self.m.record(self.now, S, P, lid, booking)[0] != "ok":
            return
        if fence is not None and ahead is not None:
            self.kept[replica] = Kept(fence, ahead[1])
        # the batch handed out: exactly what the broker holds at [cmt, end) now
        assert batch == tuple(self.broker.messages[cmt:end]), (batch, cmt)
        self.kept_served += int(kept is not None and batch is kept.batch)
        self.held = (lid, batch)

    @invariant()
    def a_fence_names_a_batch_at_or_after_the_cursor(self) -> None:
        raw = self.m.fence.get(P)
        if raw is not None:
            holders = [k for k in self.kept.values() if k.fence.text() == raw]
            assert len(holders) <= 1  # one replica holds a fenced batch


TestFenceWorld = FenceWorld.TestCase
TestFenceWorld.settings = settings(
    max_examples=examples(300), stateful_step_count=60, deadline=None
)


def _world() -> FenceWorld:
    world = FenceWorld()
    world.broker.produce(40)
    return world


def test_the_same_replica_reads_once_per_fetch_after_the_first() -> None:
    world = _world()
    world.fetch("r1", 4, "")
    first = world.broker.rpcs
    for _ in range(5):
        world.settle("ack")
        before = world.broker.rpcs
        world.fetch("r1", 4, "")
        assert world.broker.rpcs - before == 1
    assert first == 3  # register (first read of the group), GetMessage, GetMessage
    assert world.kept_served == 5
    assert world.m.scope(S).part(P).committed == 20


def test_two_replicas_alternating_never_serve_a_kept_batch() -> None:
    world = _world()
    for i in range(8):
        world.fetch("r1" if i % 2 == 0 else "r2", 4, "")
        assert world.held is not None
        assert world.held[1][0][0] == 4 * i
        world.settle("ack")
    assert world.kept_served == 0
    assert world.m.scope(S).part(P).committed == 32


def test_a_nacked_batch_drops_the_kept_one_and_is_read_again() -> None:
    world = _world()
    world.fetch("r1", 4, "")
    world.settle("ack")
    world.fetch("r1", 4, "")  # served [4, 8) from memory, keeps [8, 12)
    world.settle("nack")
    world.fetch("r1", 4, "")
    assert world.held is not None
    assert world.held[1][0][0] == 4
    assert world.kept_served == 1


def test_a_replica_killed_holding_a_kept_batch() -> None:
    world = _world()
    world.fetch("r1", 4, "")
    world.settle("ack")
    world.replica_dies("r1")
    world.fetch("r1", 4, "")
    assert world.held is not None
    assert world.held[1][0][0] == 4
    assert world.kept_served == 0


def test_a_replica_dying_after_its_final_read_leaves_nothing_skipped() -> None:
    world = _world()
    world.fetch("r1", 4, "")
    world.settle("ack")
    world.fetch("r1", 4, "after_final_read")  # the broker committed [4, 8); Redis did not
    world.tick(5000)  # the lease lapses
    world.fetch("r2", 4, "")
    assert world.held is not None
    assert world.held[1][0][0] == 4
    world.settle("ack")
    world.fetch("r1", 4, "")  # r1's kept [8, 12) is r1's no more: read afresh
    assert world.held is not None
    assert world.held[1][0][0] == 8
    assert world.kept_served == 0


def test_a_kept_batch_from_before_a_broker_crash_is_never_served() -> None:
    # r1 keeps [4, 8); the broker loses it and new messages take those offsets; r2 reads them,
    # the client nacks; r1's next lease starts at 4 again, but its fence is gone.
    world = FenceWorld()
    world.broker.produce(8)
    world.fetch("r1", 4, "")
    world.settle("ack")
    world.broker_crash(4)
    world.produce(4)
    world.fetch("r2", 4, "")
    assert world.held is not None
    assert world.held[1] == ((4, 1), (5, 1), (6, 1), (7, 1))
    world.settle("nack")
    world.fetch("r1", 4, "")
    assert world.held is not None
    assert world.held[1] == ((4, 1), (5, 1), (6, 1), (7, 1))
    assert world.kept_served == 0
