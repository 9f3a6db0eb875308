"""Hypothesis example budgets: every example in ``make test``, a share in ``make unit``.

``make unit`` is the quick loop (its budget is two minutes); ``make test`` runs every property
test at its full count. A test writes ``@settings(max_examples=examples(300))``.
"""

from __future__ import annotations

import math
import os

#: The share of each test's examples to run (a number in (0, 1]; unset: 1).
SCALE_ENV = "TUBEMQ_AIO_EXAMPLES_SCALE"
#: No property test runs fewer examples than this, whatever the scale.
MIN_EXAMPLES = 10


def examples(full: int) -> int:
    """``full`` scaled by ``$TUBEMQ_AIO_EXAMPLES_SCALE``, at least :data:`MIN_EXAMPLES`.

    Raises:
        ValueError: the variable is not a number in (0, 1].
    """
    raw = os.environ.get(SCALE_ENV, "1")
    try:
        scale = float(raw)
    except ValueError:
        scale = math.nan
    if not 0 < scale <= 1:
        raise ValueError(f"${SCALE_ENV} must be a number in (0, 1], got {raw!r}")
    return max(MIN_EXAMPLES, min(full, math.ceil(full * scale)))
