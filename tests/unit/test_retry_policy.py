"""``RetryPolicy``: retries paced inside a deadline (issue 30, fault 1), pure, no event loop."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tubemq_aio.errors import (
    ConnectError,
    FrameError,
    LocalProtocolError,
    MalformedMetaError,
    RequestTimeoutError,
    ServerError,
    TubeMQError,
)
from tubemq_aio.protocol.retry import (
    DEFAULT_RETRY,
    FETCH_RETRY,
    REBALANCE_REGISTER_RETRY,
    RetryPolicy,
    RetryWindow,
    retry_can_help,
)


def test_the_first_failures_are_retried_at_once_then_paused_exponentially() -> None:
    policy = RetryPolicy(immediate=2, initial=0.1, maximum=1.0, multiplier=2.0, jitter=0.0)
    pauses = [policy.pause(n, 0.0, 100.0, 0.5) for n in range(1, 9)]
    assert pauses == [0.0, 0.0, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]


def test_a_pause_never_ends_past_the_deadline_and_none_once_it_passed() -> None:
    policy = RetryPolicy(immediate=0, initial=0.5, maximum=0.5, jitter=0.0)
    assert policy.pause(1, 10.0, 10.2, 0.0) == pytest.approx(0.2)
    assert policy.pause(1, 10.0, 10.0, 0.0) is None
    assert policy.pause(1, 10.0, 9.0, 0.0) is None
    assert policy.pause(1, 10.0, math.nan, 0.0) is None


def test_a_known_wait_is_honoured_within_the_deadline() -> None:
    assert DEFAULT_RETRY.pause(1, 0.0, 5.0, 0.0, at_least=2.0) == 2.0
    assert DEFAULT_RETRY.pause(1, 0.0, 5.0, 0.0, at_least=9.0) == 5.0


@pytest.mark.parametrize(
    "options",
    [
        {"immediate": -1},
        {"initial": 0.0},
        {"initial": math.inf},
        {"maximum": math.nan},
        {"multiplier": 0.5},
        {"jitter": 1.5},
        {"initial": 2.0, "maximum": 1.0},
    ],
)
def test_bad_policies_are_refused(options: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="RetryPolicy"):
        RetryPolicy(**options)  # type: ignore[arg-type]


@given(
    failures=st.integers(min_value=1, max_value=10_000),
    now=st.floats(min_value=0, max_value=1e9),
    left=st.floats(min_value=-10, max_value=1e6),
    rand=st.floats(min_value=0, max_value=0.999999),
    at_least=st.floats(min_value=0, max_value=1e6),
)
def test_pause_is_within_the_deadline_and_bounded(
    failures: int, now: float, left: float, rand: float, at_least: float
) -> None:
    deadline = now + left
    pause = DEFAULT_RETRY.pause(failures, now, deadline, rand, at_least)
    if deadline <= now:
        assert pause is None
    else:
        assert pause is not None
        assert 0.0 <= pause <= deadline - now
        assert pause <= max(DEFAULT_RETRY.maximum, at_least)


@given(st.lists(st.floats(min_value=0, max_value=0.999999), min_size=1, max_size=200))
def test_a_deadline_is_reached_in_finitely_many_pauses(rands: list[float]) -> None:
    """Pausing as told, a caller that keeps failing reaches its deadline: the pauses past
    ``immediate`` are at least ``initial * (1 - jitter)`` each."""
    now, deadline, failures = 0.0, 2.0, 0
    for rand in rands:
        failures += 1
        pause = DEFAULT_RETRY.pause(failures, now, deadline, rand)
        if pause is None:
            break
        now += pause
    floor = DEFAULT_RETRY.initial * (1 - DEFAULT_RETRY.jitter)
    assert now >= min(deadline, floor * max(0, failures - DEFAULT_RETRY.immediate - 1))


def test_a_window_opens_at_its_first_failure_and_gives_up_at_its_deadline() -> None:
    window = RetryWindow(FETCH_RETRY, budget=1.0)
    assert window.failed(10.0, 0.0) == pytest.approx(0.2)
    assert window.deadline == 11.0
    assert window.failed(10.2, 0.0) == pytest.approx(0.4)
    assert window.failed(10.9, 0.0) == pytest.approx(0.1)  # cut at the deadline
    assert window.failed(11.0, 0.0) is None
    assert "failures=4" in repr(window)


def test_a_success_closes_the_window_so_the_next_failure_has_the_whole_budget() -> None:
    window = RetryWindow(FETCH_RETRY, budget=1.0)
    for now in (0.0, 0.5, 0.9):
        window.failed(now, 0.0)
    window.succeeded()
    assert (window.failures, window.deadline) == (0, None)
    assert window.failed(100.0, 0.0) == pytest.approx(0.2)  # the shortest pause again
    assert window.deadline == 101.0


def test_begin_opens_the_window_before_any_failure_and_only_once() -> None:
    window = RetryWindow(REBALANCE_REGISTER_RETRY, budget=4.0)
    window.begin(1.0)
    window.begin(3.0)
    assert window.deadline == 5.0
    assert window.failed(4.95, 0.0) == pytest.approx(0.05)


def test_a_known_wait_stretches_the_pause_but_not_past_the_deadline() -> None:
    window = RetryWindow(FETCH_RETRY, budget=2.0)
    assert window.failed(0.0, 0.0, at_least=1.5) == 1.5
    assert window.failed(1.5, 0.0, at_least=1.5) == pytest.approx(0.5)


@pytest.mark.parametrize("budget", [-0.1, math.nan, math.inf])
def test_a_bad_window_budget_is_refused(budget: float) -> None:
    with pytest.raises(ValueError, match="RetryWindow"):
        RetryWindow(FETCH_RETRY, budget)


@given(
    outcomes=st.lists(st.tuples(st.booleans(), st.floats(min_value=0, max_value=3)), max_size=80),
    budget=st.floats(min_value=0, max_value=20),
)
def test_a_window_never_pauses_past_a_deadline_set_after_the_last_success(
    outcomes: list[tuple[bool, float]], budget: float
) -> None:
    """Random success/failure sequences: every pause ends by first-failure-since-success +
    budget, and giving up happens only once that time has come."""
    window = RetryWindow(FETCH_RETRY, budget)
    now, opened = 0.0, None
    for ok, step in outcomes:
        now += step
        if ok:
            window.succeeded()
            opened = None
            continue
        opened = now if opened is None else opened
        pause = window.failed(now, 0.5)
        if pause is None:
            assert now >= opened + budget
        else:
            assert now + pause <= opened + budget + 1e-9


@pytest.mark.parametrize(
    ("error", "helps"),
    [
        (FrameError("bad frame begin token 0x3C21444F"), False),
        (LocalProtocolError("request too large"), False),
        (ConnectError("refused"), True),
        (RequestTimeoutError("no answer"), True),
        (ServerError(503, "busy"), True),
        (MalformedMetaError("bad partition"), True),
    ],
)
def test_a_register_is_not_tried_again_after_an_answer_in_another_protocol(
    error: TubeMQError, helps: bool
) -> None:
    assert retry_can_help(error) is helps
