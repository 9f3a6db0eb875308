"""The replica's start-up heap freeze (``tubemq_aio.gateway.heap``)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from tubemq_aio.errors import ConfigError
from tubemq_aio.gateway.heap import YOUNG_THRESHOLD, freeze_startup_heap


@pytest.fixture
def restored_collector() -> Iterator[None]:
    """Give the test process its collector back as it was."""
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


def test_freezing_exempts_what_is_alive_and_widens_only_the_young_generation(
    restored_collector: None,
) -> None:
    _, middle, old = gc.get_threshold()
    kept = [[n] for n in range(1000)]  # containers alive at the freeze

    frozen = freeze_startup_heap()

    assert frozen >= len(kept)
    assert gc.get_freeze_count() >= len(kept)
    assert gc.get_threshold() == (YOUNG_THRESHOLD, middle, old)


def test_a_young_threshold_of_its_own_is_used(restored_collector: None) -> None:
    freeze_startup_heap(5000)
    assert gc.get_threshold()[0] == 5000


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "700"])
def test_a_bad_threshold_is_refused_before_anything_changes(
    restored_collector: None, bad: object
) -> None:
    before = (gc.get_threshold(), gc.get_freeze_count())
    with pytest.raises(ConfigError, match="young_threshold must be an integer >= 1"):
        freeze_startup_heap(bad)  # type: ignore[arg-type]
    assert (gc.get_threshold(), gc.get_freeze_count()) == before
