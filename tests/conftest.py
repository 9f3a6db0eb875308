"""Settings every test shares: the Hypothesis profile, and what the session frees when it ends.

A property test that names no example count runs :func:`~tests.support.examples.examples` of
Hypothesis' default 100, so ``make unit`` runs a quarter of them like the tests that name
theirs, and ``make test`` all of them. No test has a per-example deadline: the 2-core CI machine
runs several workers at once, and a slow example there is load, not a failure (a test that
bounds a duration asserts it itself).
"""

from __future__ import annotations

import pytest
from hypothesis import settings

from tests.support.examples import examples
from tests.support.source_trees import forget_source_trees

#: Hypothesis' own default example count, which the profile scales.
DEFAULT_EXAMPLES = 100

settings.register_profile("tubemq-aio", max_examples=examples(DEFAULT_EXAMPLES), deadline=None)
settings.load_profile("tubemq-aio")


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Free what the tests kept for the whole session before the worker reports it finished,
    so that interpreter shutdown stays short (see :func:`forget_source_trees`)."""
    del session
    forget_source_trees()
