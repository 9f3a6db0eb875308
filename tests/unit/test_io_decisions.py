"""Pure transport decisions (backoff, idle reaping, closing errors) and settings validation.

No event loop: time is passed in as ``now``.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tubemq_aio._io.decisions import (
    MAX_SERIAL,
    MAX_WIRE_TIMEOUT_MS,
    MIN_ANSWER_FRAME_BYTES,
    BackoffPolicy,
    BackoffState,
    IdleView,
    after_link_closed,
    closes_connection,
    idle_connections,
    next_serial,
    read_threshold,
    record_failure,
    seconds_until_allowed,
    wire_timeout_ms,
)
from tubemq_aio._io.settings import TransportSettings
from tubemq_aio._io.stats import TransportStats
from tubemq_aio.errors import ConfigError

POLICY = BackoffPolicy(initial=0.1, maximum=2.0, multiplier=2.0, jitter=0.5)


def test_serials_start_at_one_and_wrap_within_31_bits() -> None:
    assert next_serial(0) == 1
    assert next_serial(41) == 42
    assert next_serial(MAX_SERIAL - 1) == MAX_SERIAL
    assert next_serial(MAX_SERIAL) == 1
    assert MAX_SERIAL == 2**31 - 1


def test_backoff_grows_exponentially_up_to_the_cap() -> None:
    no_jitter = POLICY._replace(jitter=0.0)
    assert [no_jitter.delay(n, 0.0) for n in range(1, 7)] == [0.1, 0.2, 0.4, 0.8, 1.6, 2.0]
    assert no_jitter.delay(10_000, 0.9) == 2.0


@given(failures=st.integers(1, 200), rand=st.floats(0.0, 1.0, exclude_max=True))
def test_jitter_stays_within_its_fraction(failures: int, rand: float) -> None:
    base = min(POLICY.maximum, POLICY.initial * POLICY.multiplier ** (failures - 1))
    delay = POLICY.delay(failures, rand)
    assert base * (1 - POLICY.jitter) - 1e-12 <= delay <= base


def test_failures_accumulate_and_gate_the_next_attempt() -> None:
    state = record_failure(None, now=100.0, policy=POLICY, rand=0.0)
    assert (state.failures, state.last_failure, state.next_attempt) == (1, 100.0, 100.1)
    assert seconds_until_allowed(state, 100.05) == pytest.approx(0.05)
    assert seconds_until_allowed(state, 100.1) == 0.0
    state = record_failure(state, now=101.0, policy=POLICY, rand=0.0)
    assert state.failures == 2
    assert state.next_attempt == pytest.approx(101.2)
    assert seconds_until_allowed(None, 0.0) == 0.0


def test_idle_connections_need_no_traffic_and_no_calls_in_flight() -> None:
    views = [
        IdleView("quiet", last_activity=0.0, in_flight=0),
        IdleView("busy", last_activity=0.0, in_flight=3),
        IdleView("recent", last_activity=150.0, in_flight=0),
        IdleView("edge", last_activity=20.0, in_flight=0),
    ]
    assert idle_connections(views, now=200.0, idle_timeout=180.0) == ["quiet", "edge"]
    assert idle_connections(views, now=10.0, idle_timeout=180.0) == []
    assert idle_connections([], now=1e9, idle_timeout=1.0) == []


@pytest.mark.parametrize(
    ("name", "closes"),
    [
        ("org.apache.inlong.tubemq.corerpc.exception.StandbyException", True),
        ("com.apache.tubemq.corerpc.exception.StandbyException", True),
        ("org.apache.inlong.tubemq.corerpc.exception.ServerNotReadyException", True),
        ("com.google.protobuf.InvalidProtocolBufferException", True),
        ("org.apache.inlong.tubemq.corerpc.exception.ServiceStoppingException", False),
        ("java.lang.Exception", False),
        ("java.lang.reflect.InvocationTargetException", False),
    ],
)
def test_io_exception_names_close_the_connection(name: str, closes: bool) -> None:
    assert closes_connection(name) is closes


def test_default_settings_follow_the_brief() -> None:
    s = TransportSettings()
    assert s.connect_timeout == 3.0
    assert s.idle_timeout == 180.0
    assert s.max_in_flight == 1024
    assert "sweep_interval" in TransportSettings.field_names()
    with pytest.raises(TypeError):
        TransportSettings(3.0)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("connect_timeout", 0),
        ("idle_timeout", -1.0),
        ("sweep_interval", float("nan")),
        ("max_in_flight", 0),
        ("max_in_flight", True),
        ("max_frame_bytes", 1.5),
        ("max_frame_bytes", -5),
        ("backoff_jitter", 1.5),
        ("backoff_multiplier", 0.5),
        ("write_low_water", 10**9),
        ("tls_server_hostname", ""),
        ("ssl_context", "not a context"),
    ],
)
def test_invalid_settings_name_the_field(field: str, value: object) -> None:
    with pytest.raises(ConfigError, match=field):
        TransportSettings(**{field: value})  # type: ignore[arg-type]


def test_settings_report_every_problem_at_once_and_refuse_a_bool_duration() -> None:
    # One Checks for every config: a bool is not a number of seconds, and all problems are named.
    with pytest.raises(ConfigError, match=r"connect_timeout .*; max_in_flight "):
        TransportSettings(connect_timeout=True, max_in_flight=0)


def test_backoff_max_below_initial_is_rejected() -> None:
    with pytest.raises(ConfigError, match="backoff_max"):
        TransportSettings(backoff_initial=5.0, backoff_max=1.0)


def test_stats_snapshot_lists_every_counter() -> None:
    stats = TransportStats()
    stats.requests_sent += 3
    snap = stats.snapshot()
    assert snap["requests_sent"] == 3
    assert set(snap) >= {
        "requests_sent",
        "responses",
        "dropped_responses",
        "timeouts",
        "reconnects",
        "connections_reaped",
    }


def test_a_link_dropped_before_any_answer_counts_as_a_failed_attempt() -> None:
    policy = BackoffPolicy(initial=1.0, maximum=8.0, multiplier=2.0, jitter=0.0)
    state = None
    delays = []
    for now in (0.0, 10.0, 20.0, 30.0, 40.0):
        state = after_link_closed(
            state, answered=False, closed_locally=False, now=now, policy=policy, rand=0.0
        )
        assert state is not None
        delays.append(seconds_until_allowed(state, now))
    # The first drop in a row is retried at once, then the delays grow like refused connects.
    assert delays == [0.0, 1.0, 2.0, 4.0, 8.0]
    assert state is not None
    assert state.failures == 5


def test_an_answered_link_clears_and_a_local_close_keeps_the_state() -> None:
    failed = record_failure(None, 0.0, POLICY, 0.0)

    def closed(state: BackoffState | None, answered: bool, local: bool) -> BackoffState | None:
        return after_link_closed(
            state, answered=answered, closed_locally=local, now=5.0, policy=POLICY, rand=0.0
        )

    assert closed(failed, answered=True, local=False) is None
    assert closed(failed, answered=True, local=True) is None
    assert closed(failed, answered=False, local=True) is failed
    assert closed(None, answered=False, local=True) is None


def test_wire_timeout_is_whole_ms_within_bounds() -> None:
    assert wire_timeout_ms(2.5) == 2500
    assert wire_timeout_ms(1e-9) == 1
    assert wire_timeout_ms(1e300) == MAX_WIRE_TIMEOUT_MS


# ---- read_threshold ---------------------------------------------------------------------------


def test_a_read_waits_for_the_share_of_the_owed_answers() -> None:
    assert read_threshold(256, 44, 1 / 32) == 8 * 44
    assert read_threshold(1024, 44, 1 / 32) == 32 * 44
    assert read_threshold(256, 44, 0.25) == 64 * 44


@pytest.mark.parametrize(
    ("outstanding", "answer_bytes", "share"),
    [
        (63, 44, 1 / 32),  # under two answers: nothing gained
        (0, 44, 1 / 32),
        (1, 44, 0.25),
        (10_000, 44, 0.0),  # off
        (256, 0, 1 / 32),  # no answer seen yet: its size is unknown
    ],
)
def test_no_threshold_where_it_gains_nothing(
    outstanding: int, answer_bytes: int, share: float
) -> None:
    assert read_threshold(outstanding, answer_bytes, share) == 1


@given(
    outstanding=st.integers(0, 1 << 20),
    answer_bytes=st.integers(0, 1 << 28),
    share=st.floats(0.0, 0.25),
)
def test_the_owed_answers_always_reach_the_threshold(
    outstanding: int, answer_bytes: int, share: float
) -> None:
    """Whatever the answers' sizes, every owed answer coming wakes the reader: each frame is
    at least MIN_ANSWER_FRAME_BYTES long, and one of them may have begun in the last read."""
    mark = read_threshold(outstanding, answer_bytes, share)
    assert mark >= 1
    assert mark == 1 or mark <= (outstanding - 1) * MIN_ANSWER_FRAME_BYTES
