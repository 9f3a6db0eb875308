"""Settings every test shares: the Hypothesis profile, what the session frees when it ends, and
how a pytest-xdist worker exits.

A property test that names no example count runs :func:`~tests.support.examples.examples` of
Hypothesis' default 100, so ``make unit`` runs a quarter of them like the tests that name
theirs, and ``make test`` all of them. No test has a per-example deadline, and Hypothesis' "input
generation is slow" health check is off: the 2-core CI machine runs several workers at once, and
a slow example there is load, not a failure (a test that bounds a duration asserts it itself).
The health check measures wall time, and the first draw of a text strategy builds Hypothesis'
Unicode tables: ten workers and two busy cores once made that 30 s for one input.
"""

from __future__ import annotations

import atexit
import os
import sys

import pytest
from hypothesis import HealthCheck, settings

from tests.support.examples import examples
from tests.support.source_trees import forget_source_trees

#: Hypothesis' own default example count, which the profile scales.
DEFAULT_EXAMPLES = 100

settings.register_profile(
    "tubemq-aio",
    max_examples=examples(DEFAULT_EXAMPLES),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("tubemq-aio")


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Free what the tests kept for the whole session before the worker reports it finished,
    so that interpreter shutdown stays short (see :func:`forget_source_trees`)."""
    del session
    forget_source_trees()


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """End a pytest-xdist worker without the interpreter's finalization.

    A worker has imported every test module (FastAPI, pyarrow, pandas, Hypothesis, ...) and
    tearing that heap down cost it about a CPU-second; ten workers on two cores spent that after
    every result was in (``make unit``'s collection with ten workers on a busy machine: 10 s from
    the last worker's result to the end of the run, 0.6 s with this hook). By now the worker has
    sent its results and run its session hooks; the ``atexit`` handlers still run (the harness's
    safety net that kills leftover server processes among them), then the process ends with
    nothing left to flush. Runs without xdist end normally.
    """
    del config
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
