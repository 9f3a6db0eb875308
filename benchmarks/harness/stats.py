"""Median and percentile-bootstrap 95 % interval of the median (no numpy needed)."""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence


def median(values: Sequence[float]) -> float | None:
    """Median of ``values``, or None when empty."""
    return statistics.median(values) if values else None


def bootstrap_ci(
    values: Sequence[float], *, iterations: int = 5000, level: float = 0.95, seed: int = 1
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the median of ``values``.

    With fewer than 2 values there is no interval (None). With very few rounds the interval is
    coarse (it can only take observed values): read it together with ``n``.

    Args:
        values: Per-round figures (e.g. ratios aio/java).
        iterations: Resamples.
        level: Coverage, e.g. 0.95.
        seed: Seed of the private RNG (results are reproducible).
    """
    if len(values) < 2:
        return None
    rng = random.Random(seed)
    n = len(values)
    meds = sorted(statistics.median(rng.choices(values, k=n)) for _ in range(iterations))
    lo_i = int((1 - level) / 2 * iterations)
    hi_i = min(iterations - 1, int((1 + level) / 2 * iterations))
    return meds[lo_i], meds[hi_i]
