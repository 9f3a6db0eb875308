"""Rebalance event processing plans and master-heartbeat bookkeeping
(docs/protocol/consumer.md §2)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tubemq_aio.errors import MalformedMetaError
from tubemq_aio.protocol.consumer_meta import BrokerInfo, Partition, PartitionKey
from tubemq_aio.protocol.partitions import PartitionLeases
from tubemq_aio.protocol.rebalance import (
    AwaitReturn,
    Drop,
    EventProcess,
    EventResult,
    EventStatus,
    EventType,
    HeartbeatReport,
    HeartbeatVerdict,
    MasterHeartbeatState,
    RebalanceConfig,
    RebalanceEvent,
    RebalanceQueue,
    Register,
    Report,
    Sleep,
    Step,
    StopRebalance,
    Unregister,
    parse_event,
)

B = BrokerInfo(7, "10.0.0.7", 8123)
SUBS = ("c1@g#7:10.0.0.7:8123#t:0", "c1@g#7:10.0.0.7:8123#t:1", "c1@g#7:10.0.0.7:8123#t:2")
PARTS = tuple(Partition(B, "t", i) for i in range(3))


@dataclass
class FakeEventProto:
    """Hand-built stand-in with the generated ``EventProto`` field names."""

    rebalanceId: int
    opType: int
    subscribeInfo: list[str] = field(default_factory=list)


def event(op: int, rebalance_id: int = 42) -> RebalanceEvent:
    parsed = parse_event(FakeEventProto(rebalance_id, op, list(SUBS)))
    assert parsed is not None
    return parsed


def run(
    process: EventProcess, answers: dict[PartitionKey, list[int]], round_time: float = 0.0
) -> list[Step]:
    """Drive a process, answering register steps from per-partition answer lists; each
    register round takes ``round_time`` seconds."""
    steps: list[Step] = []
    now = 0.0
    while (step := process.next_step(now)) is not None:
        steps.append(step)
        if isinstance(step, Register):
            now += round_time
            for p in step.partitions:
                process.on_register_result(p.key, answers[p.key].pop(0))
        elif isinstance(step, Sleep):
            now = step.until
        assert len(steps) < 100
    return steps


def test_parse_event() -> None:
    ev = event(EventType.CONNECT)
    assert ev.partitions == PARTS
    assert ev.subscribe_info == SUBS
    assert parse_event(FakeEventProto(0, 1, list(SUBS))) is None
    assert parse_event(FakeEventProto(-2, 5)) is None
    with pytest.raises(MalformedMetaError):
        parse_event(FakeEventProto(1, 1, ["c1@g-7:10.0.0.7:8123-t:0"]))  # the proto comment form


@pytest.mark.parametrize("op", [EventType.CONNECT, EventType.ONLY_CONNECT])
def test_connect_all_succeed(op: int) -> None:
    steps = run(EventProcess(event(op), held=()), {p.key: [200] for p in PARTS})
    assert steps == [
        Register(PARTS, 1),
        Report(EventResult(42, op, EventStatus.DONE, SUBS)),
    ]


def test_connect_skips_held_and_retries_failures() -> None:
    process = EventProcess(event(EventType.CONNECT), held={PARTS[0].key})
    answers = {PARTS[1].key: [500, 599, 200], PARTS[2].key: [410]}
    steps = run(process, answers)
    assert steps[0] == Register(PARTS[1:], 1)
    assert steps[1] == Sleep(0.1)  # the first pause is short: a restarting broker is soon back
    assert steps[2] == Register((PARTS[1],), 2)
    assert steps[3] == Sleep(pytest.approx(0.3))  # type: ignore[arg-type]
    assert steps[4] == Register((PARTS[1],), 3)
    assert isinstance(steps[5], Report)
    assert steps[5].result.status == EventStatus.DONE
    assert process.registered == [PARTS[1].key]
    assert process.given_up == [PARTS[2].key]  # 410 is never retried


def test_connect_gives_up_at_its_deadline_but_reports_done() -> None:
    config = RebalanceConfig(register_timeout=0.5)
    process = EventProcess(event(EventType.CONNECT), held=(), config=config)
    steps = run(process, {p.key: [503] * 5 for p in PARTS})
    kinds = [type(s).__name__ for s in steps]
    # 0.1 + 0.2, then the rest of the 0.5 s, then a last round at the deadline.
    assert kinds == [
        "Register",
        "Sleep",
        "Register",
        "Sleep",
        "Register",
        "Sleep",
        "Register",
        "Drop",
        "Report",
    ]
    assert [s.until for s in steps if isinstance(s, Sleep)] == pytest.approx([0.1, 0.3, 0.5])
    assert steps[7] == Drop(tuple(p.key for p in PARTS))
    assert isinstance(steps[8], Report)
    assert steps[8].result.status == 2


def test_fast_failures_do_not_use_up_the_register_time() -> None:
    """Issue 30 §1: rounds that fail at once (a broker restarting refuses connections) go on
    for the whole 4 s (Java's 5 rounds 1 s apart), more often at first; they used to be five."""
    process = EventProcess(event(EventType.CONNECT), held=())
    steps = run(process, {p.key: [599] * 20 for p in PARTS})
    rounds = [s for s in steps if isinstance(s, Register)]
    sleeps = [s.until for s in steps if isinstance(s, Sleep)]
    assert len(rounds) == 8
    assert sleeps[-1] == pytest.approx(4.0)  # the last round is at the deadline, not past it
    assert isinstance(steps[-2], Drop)
    assert isinstance(steps[-1], Report)


def test_slow_failures_end_by_the_deadline_too() -> None:
    """Rounds that each wait for an RPC timeout (3 s here) stop after the 4 s, not after five
    rounds (Java: 5 x (3 s + 1 s) = 20 s)."""
    process = EventProcess(event(EventType.CONNECT), held=())
    steps = run(process, {p.key: [599] * 5 for p in PARTS}, round_time=3.0)
    assert [type(s).__name__ for s in steps] == ["Register", "Sleep", "Register", "Drop", "Report"]


def test_a_register_timeout_of_zero_makes_one_round() -> None:
    process = EventProcess(
        event(EventType.CONNECT), held=(), config=RebalanceConfig(register_timeout=0)
    )
    steps = run(process, {p.key: [503] for p in PARTS})
    assert [type(s).__name__ for s in steps] == ["Register", "Drop", "Report"]


@pytest.mark.parametrize("timeout", [-1.0, float("nan"), float("inf")])
def test_a_bad_register_timeout_is_refused(timeout: float) -> None:
    with pytest.raises(ValueError, match="budget"):
        EventProcess(
            event(EventType.CONNECT), held=(), config=RebalanceConfig(register_timeout=timeout)
        )


@given(
    codes=st.lists(st.sampled_from([200, 410, 500, 503, 599]), min_size=60, max_size=60),
    round_time=st.floats(min_value=0.0, max_value=5.0),
    rand=st.floats(min_value=0.0, max_value=0.999),
    timeout=st.floats(min_value=0.0, max_value=10.0),
)
def test_every_round_starts_by_the_deadline_and_the_event_ends(
    codes: list[int], round_time: float, rand: float, timeout: float
) -> None:
    process = EventProcess(
        event(EventType.CONNECT), held=(), config=RebalanceConfig(register_timeout=timeout)
    )
    answers = iter(codes)
    now, steps = 0.0, []
    while (step := process.next_step(now, rand)) is not None:
        steps.append(step)
        if isinstance(step, Register):
            assert now <= timeout + 1e-9  # no round begins after the deadline
            now += round_time
            for p in step.partitions:
                process.on_register_result(p.key, next(answers, 503))
        elif isinstance(step, Sleep):
            assert now < step.until <= timeout + 1e-9
            now = step.until
        assert len(steps) < 200
    assert isinstance(steps[-1], Report)
    assert sorted(process.registered + process.given_up) == sorted(p.key for p in PARTS)


def test_unanswered_registration_counts_as_failed_round() -> None:
    process = EventProcess(event(EventType.CONNECT), held=())
    first = process.next_step(0.0)
    assert isinstance(first, Register)
    process.on_register_result(PartitionKey(9, "x", 0), 200)  # not part of the event: ignored
    assert isinstance(process.next_step(0.0), Sleep)


@pytest.mark.parametrize("op", [EventType.DISCONNECT, EventType.ONLY_DISCONNECT])
def test_disconnect_plan(op: int) -> None:
    process = EventProcess(event(op), held={p.key for p in PARTS})
    assert process.next_step(10.0) == AwaitReturn(tuple(p.key for p in PARTS), 13.0)
    assert process.next_step(11.0) == Unregister(PARTS, True)
    assert process.next_step(11.0) == Report(EventResult(42, op, 2, SUBS))
    assert process.next_step(11.0) is None
    assert "phase=REPORTED" in repr(process)


def test_disconnect_with_leases_rolls_back_checked_out_batch() -> None:
    """An I/O-free walk through a disconnect event against the lease table."""
    leases = PartitionLeases()
    for p in PARTS:
        leases.add(p, 0.0)
    lease = leases.take(0.0)
    assert lease is not None
    process = EventProcess(event(EventType.DISCONNECT), held=leases.keys())
    wait = process.next_step(0.0)
    assert isinstance(wait, AwaitReturn)
    leases.revoke(wait.keys)
    assert leases.take(0.0) is None  # no new selections during the wait
    assert leases.in_use(wait.keys) == {lease.key}  # still out when the deadline passes
    unregister = process.next_step(wait.deadline)
    assert isinstance(unregister, Unregister)
    removed = [leases.remove(p.key, rollback_if_in_use=unregister.rollback_in_use) for p in PARTS]
    assert [r.read_status for r in removed if r is not None] == [1, 1, 1]
    assert len(leases) == 0


def test_other_event_types() -> None:
    stop = EventProcess(event(EventType.STOP_REBALANCE), held=())
    assert stop.next_step(0.0) == StopRebalance()
    assert stop.next_step(0.0) is None
    for op in (EventType.REPORT, EventType.REFRESH, 99):
        assert EventProcess(event(op), held=()).next_step(0.0) is None  # no result reported


def test_queue_take_discards_older_events() -> None:
    queue = RebalanceQueue()
    assert queue.take() is None
    queue.offer(event(1, 1))
    queue.offer(event(2, 2))
    taken = queue.take()
    assert taken is not None
    assert taken.rebalance_id == 2
    assert len(queue) == 0


def test_heartbeat_report_schedule() -> None:
    state = MasterHeartbeatState(max_report_interval=6)
    reports = [state.next_report().report_subscribe_info for _ in range(12)]
    assert reports == [False] * 5 + [True] + [False] * 5 + [True]
    result = EventResult(42, 1, 2, SUBS)
    state.add_result(result)
    state.add_result(EventResult(43, 2, 2, ()))
    first = state.next_report()
    assert first.event == result
    assert first.report_subscribe_info
    second = state.next_report()
    assert second.event is not None
    assert second.event.rebalance_id == 43
    assert state.next_report().event is None  # one result per heartbeat, never resent


def test_interval_minimum_is_three() -> None:
    state = MasterHeartbeatState(max_report_interval=1)
    assert [state.next_report().report_subscribe_info for _ in range(3)] == [False, False, True]


def test_first_connect_flag_for_bound_consumption() -> None:
    state = MasterHeartbeatState()
    state.add_result(EventResult(1, EventType.DISCONNECT, 2, ()))
    assert state.first_connect_pending
    state.add_result(EventResult(2, EventType.ONLY_CONNECT, 2, ()))
    assert not state.first_connect_pending


def test_heartbeat_failure_handling() -> None:
    state = MasterHeartbeatState(max_retries=5)
    assert state.on_response(False, 411) is HeartbeatVerdict.REREGISTER
    assert state.failures == 0
    verdicts = [state.on_response(None) for _ in range(7)]
    assert verdicts == [HeartbeatVerdict.FAILED] * 5 + [HeartbeatVerdict.BACKOFF] * 2
    assert state.on_response(False, 415) is HeartbeatVerdict.BACKOFF
    assert state.on_response(True) is HeartbeatVerdict.OK
    assert state.failures == 0
    assert state.on_response(None, 411) is HeartbeatVerdict.FAILED  # no answer is not a 411


@given(
    st.sets(st.integers(0, 2)),
    st.lists(st.sampled_from([200, 410, 415, 500, 503, 599]), min_size=24, max_size=24),
)
def test_connect_always_ends_with_one_report(held_ids: set[int], codes: list[int]) -> None:
    held = {PARTS[i].key for i in held_ids}
    process = EventProcess(event(EventType.CONNECT), held=held)
    feed = iter(codes)
    steps = run(process, {p.key: [next(feed) for _ in range(8)] for p in PARTS})
    assert isinstance(steps[-1], Report)
    assert sum(isinstance(s, Report) for s in steps) == 1
    registered = set(process.registered)
    assert not registered & held
    assert registered | set(process.given_up) | held == {p.key for p in PARTS}
    assert sum(isinstance(s, Register) for s in steps) <= 8  # 4 s: 0.1 s doubling to 1 s


def test_a_local_drop_is_reported_at_the_next_heartbeat() -> None:
    """A partition dropped outside an event (the broker forgot us) is reported at once, not
    after up to ``max_report_interval`` heartbeats; the periodic rhythm goes on after it."""
    state = MasterHeartbeatState(max_report_interval=6)
    assert state.next_report() == HeartbeatReport(None, False)
    state.held_changed()
    assert state.next_report() == HeartbeatReport(None, True)
    assert [state.next_report().report_subscribe_info for _ in range(6)] == [False] * 5 + [True]
    state.held_changed()
    result = EventResult(7, EventType.CONNECT, EventStatus.DONE, ())
    state.add_result(result)
    assert state.next_report() == HeartbeatReport(result, True)  # the result carries it
    assert state.next_report() == HeartbeatReport(None, False)  # not twice
