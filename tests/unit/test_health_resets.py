"""Every success resets what it proves healthy (issue 30, fault 2), over random sequences of
successes and failures: the master heartbeat's failure count, the producer's heartbeat streak,
bad-broker blocking, partition back-off, reconnect back-off and the client-balanced connect
hold. Pure state machines, no event loop.

The fault that started it: the master refuses five heartbeats, answers 411, the consumer
registers again successfully, one more heartbeat fails, and the consumer backs off for 60 s,
because only a successful heartbeat reset the count.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tubemq_aio._io.decisions import BackoffPolicy, after_link_closed, record_failure
from tubemq_aio.protocol.broker_blocking import BrokerBlocker, BrokerBlockingConfig
from tubemq_aio.protocol.client_balance import PartitionMeta, PartitionMetaCache
from tubemq_aio.protocol.consumer_meta import BrokerInfo, Partition, PartitionKey
from tubemq_aio.protocol.rebalance import HeartbeatVerdict, MasterHeartbeatState
from tubemq_aio.protocol.retry import FailureStreak
from tubemq_aio.protocol.routing import PartitionBackoff

MAX_RETRIES = 5


def test_a_successful_register_restarts_the_heartbeat_failure_count() -> None:
    """The issue's sequence: 5 refusals, 411, a successful register, one failure: no back-off."""
    state = MasterHeartbeatState(max_retries=MAX_RETRIES)
    for _ in range(5):
        assert state.on_response(False, 500) is HeartbeatVerdict.FAILED
    assert state.on_response(False, 411) is HeartbeatVerdict.REREGISTER
    state.on_registered()
    assert state.on_response(None) is HeartbeatVerdict.FAILED  # not BACKOFF


_HEARTBEAT_EVENTS = st.lists(
    st.sampled_from(["ok", "refused", "no-answer", "411", "registered"]), max_size=60
)


@given(_HEARTBEAT_EVENTS)
def test_heartbeat_backs_off_only_after_too_many_failures_since_any_success(
    events: list[str],
) -> None:
    state = MasterHeartbeatState(max_retries=MAX_RETRIES)
    since_success = 0
    for event in events:
        if event == "registered":
            state.on_registered()
            since_success = 0
            continue
        if event == "ok":
            verdict = state.on_response(True)
            since_success = 0
            assert verdict is HeartbeatVerdict.OK
            continue
        if event == "411":
            assert state.on_response(False, 411) is HeartbeatVerdict.REREGISTER
            continue
        verdict = state.on_response(None) if event == "no-answer" else state.on_response(False, 500)
        since_success += 1
        backoff = since_success > MAX_RETRIES
        assert (verdict is HeartbeatVerdict.BACKOFF) is backoff, (events, since_success)
        assert state.failures == since_success


@given(st.lists(st.booleans(), max_size=80))
def test_failure_streak_counts_failures_since_the_last_success(outcomes: list[bool]) -> None:
    streak = FailureStreak()
    expected = 0
    for ok in outcomes:
        if ok:
            streak.succeeded()
            expected = 0
        else:
            assert streak.failed() == expected + 1
            expected += 1
        assert streak.count == expected


_BROKER_EVENTS = st.lists(
    st.tuples(
        st.sampled_from([1, 2]),
        st.sampled_from(["ok", "failed", "503", "connect-failed", "connected"]),
        st.floats(min_value=0.0, max_value=30.0),
    ),
    max_size=80,
)


@given(_BROKER_EVENTS)
def test_an_answered_send_lifts_what_it_proves_of_a_broker(
    events: list[tuple[int, str, float]],
) -> None:
    """A 503 blocks a broker until ``unavailable_duration`` passes or it answers a send; failed
    connects count against its address until a connect or an answered send succeeds."""
    config = BrokerBlockingConfig(enabled=False)  # the success-rate rule is not under test
    blocker = BrokerBlocker(config)
    now = 0.0
    blocked_until: dict[int, float] = {}
    connect_failures: dict[int, int] = {}
    for broker, event, dt in events:
        now += dt
        address = f"h{broker}:8123"
        if event == "connect-failed":
            blocker.record_connect(address, False, now, broker_id=broker)
            connect_failures[broker] = int(blocker._links[address][0])
            continue
        if event == "connected":
            blocker.record_connect(address, True, now, broker_id=broker)
            connect_failures[broker] = 0
        else:
            ok = event == "ok"
            blocker.record(broker, ok, now, err_code=503 if event == "503" else None)
            if ok:
                blocked_until.pop(broker, None)
                connect_failures[broker] = 0
            elif event == "503":
                blocked_until[broker] = now + config.unavailable_duration
        expected = {b for b, until in blocked_until.items() if until > now}
        assert blocker.blocked(now) == expected, (events, now)
        for b, failures in connect_failures.items():
            stats = blocker._links.get(f"h{b}:8123")
            assert (0 if stats is None else int(stats[0])) == failures
            if failures == 0:
                assert f"h{b}:8123" not in blocker.blocked_addresses(now)


@given(
    st.lists(st.tuples(st.sampled_from(["failure", "response"]), st.floats(0.0, 2.0)), max_size=60)
)
def test_any_broker_response_clears_a_partitions_back_off(
    events: list[tuple[str, float]],
) -> None:
    backoff = PartitionBackoff(max_failures=3, delay=3.0)
    now = 0.0
    failures = 0
    until = -1.0
    for event, dt in events:
        now += dt
        if event == "response":
            backoff.record_response("p")
            failures, until = 0, -1.0
        else:
            backoff.record_failure("p", now)
            failures += 1
            if failures > 3:
                failures, until = 0, now + 3.0
        assert ("p" in backoff.delayed(now)) is (until > now)


@given(
    st.lists(
        st.sampled_from(["connect-failed", "dropped-unanswered", "answered", "closed-locally"]),
        max_size=40,
    )
)
def test_an_answered_link_clears_the_reconnect_back_off(events: list[str]) -> None:
    policy = BackoffPolicy(0.1, 10.0, 2.0, 0.0)
    state = None
    failures = 0
    for i, event in enumerate(events):
        now = float(i)
        if event == "connect-failed":
            state = record_failure(state, now, policy, 0.0)
            failures += 1
        else:
            state = after_link_closed(
                state,
                answered=event == "answered",
                closed_locally=event == "closed-locally",
                now=now,
                policy=policy,
                rand=0.0,
            )
            if event == "answered":
                failures = 0
            elif event == "dropped-unanswered":
                failures += 1
        assert (0 if state is None else state.failures) == failures


@given(st.lists(st.sampled_from([200, 410, 415, 500, 404]), max_size=30))
def test_a_successful_broker_register_lifts_the_connect_hold(codes: list[int]) -> None:
    cache = PartitionMetaCache()
    key = PartitionKey(1, "t", 0)
    cache.metas[key] = _meta(key)
    held = False
    for i, code in enumerate(codes):
        cache.record_connect_result(key, code, float(i))
        held = code in (410, 415)
        assert (cache.check_connect(key, float(i)) == 421) is held


def _meta(key: PartitionKey) -> PartitionMeta:
    broker = BrokerInfo(key.broker_id, "h", 8123)
    return PartitionMeta(Partition(broker, key.topic, key.partition_id), True)
