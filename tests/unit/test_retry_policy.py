"""``RetryPolicy``: retries paced inside a deadline (issue 30, fault 1), pure, no event loop."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tubemq_aio.protocol.retry import DEFAULT_RETRY, RetryPolicy


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
