"""The read-ahead simulation's schedules written out step by step (the random and hypothesis
searches are in ``test_gateway_read_ahead_model.py``, the world in
``tests/support/read_ahead_world.py``)."""

from __future__ import annotations

import pytest

from tests.support.read_ahead_world import (
    LEASE_MS,
    FreeingResetWorld,
    NaiveWorld,
    P,
    ReadAheadWorld,
    ReleasingWorld,
    S,
    Stray,
)
from tubemq_aio.gateway.leases.read_ahead import ReadAhead


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


def _r1_gives_up_mid_read(cls: type[ReadAheadWorld]) -> ReadAheadWorld:
    """r1 leases the partition (until 2 000), registers at 0 and sends its GetMessage, then
    stops waiting for it (a timeout, or its fetch cancelled); r2 fetches."""
    world = _world(cls, messages=2)
    world.fetch("r1", 4)
    world.step(0)  # r1 registers at 0; its GetMessage is on its way
    world.give_up(0)
    assert world.strays == [Stray([("get", 4), ("commit", 0)], 1_000 + LEASE_MS)]
    world.fetch("r2", 4)
    return world


def test_a_holder_releasing_with_a_read_on_its_way_skips_messages() -> None:
    # r2 leases the partition at once and registers at 0; its GetMessage reads [0, 2); two
    # messages come; r1's GetMessage arrives and reads again from 0: [0, 4) in flight; r2's
    # CommitOffset commits it and answers 4: r2 books [0, 4) holding [0, 2).
    world = _r1_gives_up_mid_read(ReleasingWorld)
    world.step(0)  # r2 registers at 0
    world.step(0)  # r2's GetMessage: [0, 2)
    world.produce(2)
    world.arrive(0)  # r1's GetMessage: [0, 4)
    world.step(0)  # r2's CommitOffset: 4
    with pytest.raises(AssertionError, match="skipped"):
        world.step(0)  # r2 books [0, 4)


def test_a_holder_giving_up_lets_its_lease_lapse_and_nothing_is_skipped() -> None:
    world = _r1_gives_up_mid_read(ReadAheadWorld)
    assert world.stats["acquire_none"] == 1  # r1's lease is live until 2 000
    world.reset(0)  # a reset meanwhile holds the partition until then too
    world.fetch("r2", 4)
    assert world.stats["acquire_none"] == 2
    world.produce(2)
    world.arrive(0)  # r1's GetMessage: [0, 4) in flight
    world.arrive(0)  # r1's CommitOffset: [0, 4) committed at the broker, not in Redis
    assert (world.broker.committed, world.strays) == (4, [])
    world.tick(LEASE_MS)
    world.fetch("r2", 4)  # the lease lapsed: the cursor is unknown, r2 registers at 0
    _run(world)
    assert world.stats["served"] == 1
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
