"""The read-ahead off the fetch's critical path, proven on the pure lease model.

A replica answers a fetch first and only then reads the partition's next batch (a GetMessage and
the CommitOffset right behind it on one connection) and keeps it for the partition's next fetch.
That read has no lease around it: the client may ack at once and another replica lease the
partition while it is still on its way. The simulation runs replicas as programs whose every Redis
call and every broker arrival is a step of its own, interleaved at random with other replicas'
acquires, reads, commits and bookings, clients' acks, nacks and lapses, replica kills (a killed
replica's requests already sent still arrive: a read-ahead's until its deadline, a read under a
lease until the lease's expiry), the broker losing its tail and an admin reset. The broker is
:class:`~tests.support.fence_broker.Broker` (one batch in flight per group and partition, whoever
read it; ``docs/protocol/consumer.md`` §4.2). The invariant: every booked batch starts at the
committed offset and its end is the end of the messages it holds (nothing skipped, nothing twice),
with the messages the broker held there when it was read.

With the read-in-flight mark (``GroupState.read_ahead``) no schedule breaks it (a hypothesis
search that shrinks what it finds, and thousands of seeded schedules); without it
(:class:`NaiveWorld`, the same read-ahead ended by a script that only stores the fence and the
cursor) some three schedules in a hundred skip messages, and
``test_the_naive_read_ahead_skips_messages`` replays one step by step (the written-out
schedules are in ``test_gateway_read_ahead_schedules.py``, the world in
``tests/support/read_ahead_world.py``).

Resets come at any time, also while a lease holder is between its acquire and its booking
(its reads on the critical path may still reach the broker until its lease's expiry). A reset
that freed such a partition at once let the old holder's late read land inside the next
lease's read exactly as an unmarked read-ahead does (about one schedule in 2 000;
:class:`FreeingResetWorld` keeps that reset and
``test_a_reset_that_frees_a_reading_lease_skips_messages`` replays one); the reset now
leaves a voided read-in-flight mark until the old lease's expiry, and no schedule skips.

A killed holder's request on its way, and one a holder stopped waiting for (a timeout, its
fetch cancelled: ``give_up``), still arrive until the lease's expiry. A holder that gives up
lets its lease lapse; one that released it at once (:class:`ReleasingWorld`) opens the same
gap as the reset did (about one schedule in 300,
``test_a_holder_releasing_with_a_read_on_its_way_skips_messages``).
"""

from __future__ import annotations

from collections import Counter

from hypothesis import settings

from tests.support.examples import examples
from tests.support.read_ahead_world import NaiveWorld, ReadAheadWorld, ReleasingWorld, walk

TestReadAheadWorld = ReadAheadWorld.TestCase
TestReadAheadWorld.settings = settings(
    max_examples=examples(200), stateful_step_count=150, deadline=None
)


def test_random_schedules_with_the_mark_skip_nothing() -> None:
    totals: Counter[str] = Counter()
    for seed in range(examples(3_000)):
        totals.update(walk(ReadAheadWorld, seed).stats)
    # the schedules did what they are for: batches served from memory, acquires held off by a
    # read in flight, read-aheads ended by a reset or a deadline, dead replicas, broker crashes,
    # resets while a holder reads, holders giving up and their requests arriving after
    seen = ("kept_served", "blocked_by_read", "read_ahead_stale", "served_across_a_crash")
    for what in (*seen, "reset_while_reading", "gave_up", "stray_arrived"):
        assert totals[what] > 0, totals


def test_random_schedules_releasing_on_giving_up_skip_messages() -> None:
    found = []
    for seed in range(1_000):  # about one in 300 skips: not scaled down
        try:
            walk(ReleasingWorld, seed)
        except AssertionError as e:
            found.append(str(e).partition("'")[2].partition("'")[0])
    assert found
    assert set(found) <= {"skipped", "twice", "served elsewhere"}


def test_random_schedules_without_the_mark_skip_messages() -> None:
    found = []
    for seed in range(examples(1_000)):
        try:
            walk(NaiveWorld, seed)
        except AssertionError as e:
            found.append((seed, str(e).partition("'")[2].partition("'")[0]))
    assert found
    assert {what for _, what in found} <= {"skipped", "twice", "served elsewhere"}
