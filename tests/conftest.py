"""Settings every test shares: the Hypothesis profile.

A property test that names no example count runs :func:`~tests.support.examples.examples` of
Hypothesis' default 100, so ``make unit`` runs a quarter of them like the tests that name
theirs, and ``make test`` all of them. No test has a per-example deadline: the 2-core CI machine
runs several workers at once, and a slow example there is load, not a failure (a test that
bounds a duration asserts it itself).
"""

from __future__ import annotations

from hypothesis import settings

from tests.support.examples import examples

#: Hypothesis' own default example count, which the profile scales.
DEFAULT_EXAMPLES = 100

settings.register_profile("tubemq-aio", max_examples=examples(DEFAULT_EXAMPLES), deadline=None)
settings.load_profile("tubemq-aio")
