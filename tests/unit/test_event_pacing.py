"""EventPacer: the client's bound on how fast it answers the master's rebalance events."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tubemq_aio import Consumer
from tubemq_aio.errors import ConfigError
from tubemq_aio.protocol.event_pacing import DEFAULT_EVENT_MIN_INTERVAL, EventPacer


def test_the_first_event_starts_at_once_and_the_next_waits_its_interval() -> None:
    pacer = EventPacer(0.5)
    assert pacer.wait(100.0) == 0.0
    pacer.started(100.0)
    assert pacer.wait(100.0) == 0.5
    assert pacer.wait(100.2) == pytest.approx(0.3)
    assert pacer.wait(100.5) == 0.0
    assert pacer.wait(250.0) == 0.0  # a quiet spell earns nothing in advance
    pacer.started(250.0)
    assert pacer.wait(250.1) == pytest.approx(0.4)


def test_zero_switches_the_bound_off() -> None:
    pacer = EventPacer(0.0)
    pacer.started(5.0)
    assert pacer.wait(5.0) == 0.0


def test_the_default_is_half_a_second() -> None:
    assert EventPacer().min_interval == DEFAULT_EVENT_MIN_INTERVAL == 0.5


@pytest.mark.parametrize("bad", [-0.1, math.nan, math.inf, -math.inf, 3601.0, "1", None, True])
def test_bad_intervals_are_refused(bad: object) -> None:
    with pytest.raises(ConfigError, match="min_interval"):
        EventPacer(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, 61.0, "0.5"])
def test_the_consumer_option_is_checked(bad: object) -> None:
    with pytest.raises(ConfigError, match="rebalance_min_interval"):
        Consumer("127.0.0.1:1", group="g1", topics=["t"], rebalance_min_interval=bad)  # type: ignore[arg-type]


@given(
    interval=st.floats(min_value=0.0, max_value=10.0),
    gaps=st.lists(st.floats(min_value=0.0, max_value=5.0), min_size=1, max_size=50),
)
def test_events_started_as_told_are_never_closer_than_the_interval(
    interval: float, gaps: list[float]
) -> None:
    """A worker that waits what the pacer says, whatever the arrival times of events."""
    pacer = EventPacer(interval)
    now = 0.0
    starts: list[float] = []
    for gap in gaps:
        now += gap  # the next event arrives
        now += pacer.wait(now)
        assert pacer.wait(now) == 0.0
        pacer.started(now)
        starts.append(now)
    assert all(b - a >= interval - 1e-9 for a, b in itertools.pairwise(starts))
