"""pytest-xdist scheduling for ``make test``: the integration tests in two groups, one real
cluster each, plus one group per file that starts its own cluster or none (loaded with
``-p tests.xdist_groups`` from the repository root).

Every test outside ``tests/integration`` is scheduled on its own, wherever a worker is free,
but for the few files in :data:`WHOLE_FILES`, each run whole with the others of its group; the
single tests go out in :func:`spread`'s order, each folder's spread over the whole run.
The integration files that use the shared cluster form two groups; each group runs whole on
one worker, so that worker's session-scoped ``cluster`` fixture starts one cluster for all of
them (and the Spark group one Spark session). Each group's tests run one after another, so the
longer group bounds the run: a file that needs no shared cluster is kept out of both
(:data:`OWN_CLUSTER_FILES`, :data:`NO_CLUSTER_FILES`) and runs beside them on another worker
(``tests/integration/conftest.py`` refuses such a file whose tests ask for ``cluster``).
pytest-xdist's own ``--dist loadgroup`` cannot do this with pytest 9: the
marker-to-group step renames an attribute that pytest 9 no longer reads.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

import pytest
from xdist.scheduler import LoadScopeScheduling

#: The integration files of the second cluster: Spark (one session shared by its files; any
#: file with ``spark`` in its name goes there too) and, to balance the two, the files that
#: drive the SDK from subprocesses (CLI, cookbook recipes, benchmark harness, installed wheel, a
#: consumer group of three processes). Every other integration file, a new one included, shares
#: the first cluster, so the files added since the two were balanced (the broker tail, the
#: fidelity scenarios, the field reports, ...) made it the longer by far. Most of either
#: group's time is waiting on servers, not the CPU.
SECOND_CLUSTER_FILES = frozenset(
    {
        "test_bench_smoke.py",
        "test_cli_cluster.py",
        "test_consumer_group_procs.py",
        "test_cookbook.py",
        "test_spark_example.py",
        "test_spark_restart.py",
        "test_spark_sink.py",
        "test_spark_source.py",
        "test_wheel.py",
    }
)
#: Integration files that start a cluster of their own (the short chaos run: three masters and
#: two brokers; the older server versions' smoke test; the TLS and authentication cluster; the
#: two demos): each its own group, so the worker running it starts no shared cluster for it.
OWN_CLUSTER_FILES = frozenset(
    {"test_chaos_short.py", "test_demos.py", "test_secure_cluster.py", "test_server_versions.py"}
)
#: Integration files whose tests use no shared cluster: the CLI and the quickstart on
#: FakeCluster, the Java 1.2 codec (one Maven build for the file), and the cluster start-up
#: tests (a taken port, missing tools, ``cluster up``/``status``/``down``: each starts its own
#: nodes or none). Each runs whole, on its own, wherever a worker is free.
NO_CLUSTER_FILES = frozenset(
    {
        "test_cli_fake.py",
        "test_cluster_start.py",
        "test_legacy_framing_java.py",
        "test_quickstart.py",
    }
)
#: The groups whose worker starts the session's shared ``cluster`` fixture.
SHARED_CLUSTER_GROUPS = frozenset({"cluster-1", "cluster-2"})
INTEGRATION = "tests/integration/"
#: Files outside the integration tests whose tests share something costly to build, by the
#: name of their group: each group runs whole on one worker, so it is built once. The docs
#: reference builds the site (a module-scoped fixture, about 12 CPU-seconds, which three
#: workers used to build once each); the tests that read the source parse the same few hundred
#: files (``tests/support/source_trees.py`` keeps each tree for the worker's other tests); the
#: benchmark report tests that draw figures import matplotlib (about 0.8 CPU-s a process, and
#: most workers imported it once each).
WHOLE_FILES = {
    "tests/unit/bench/test_latency_report.py": "matplotlib",
    "tests/unit/bench/test_plots_overload.py": "matplotlib",
    "tests/unit/bench/test_scale_report.py": "matplotlib",
    "tests/unit/bench/test_spark_report.py": "matplotlib",
    "tests/unit/test_docs_reference.py": "docs-site",
    "tests/unit/test_error_homes.py": "source-trees",
    "tests/unit/test_layering.py": "source-trees",
    "tests/unit/test_parameter_lists.py": "source-trees",
    "tests/unit/test_suite_layout.py": "source-trees",
}


def cluster_group(nodeid: str) -> str | None:
    """The cluster group of an integration test's node id, ``None`` for any other test."""
    path = nodeid.split("::", 1)[0]
    if not path.startswith(INTEGRATION):
        return None
    name = path.rsplit("/", 1)[-1]
    if name in OWN_CLUSTER_FILES:
        return f"own-{name}"
    if name in NO_CLUSTER_FILES:
        return f"alone-{name}"
    return "cluster-2" if name in SECOND_CLUSTER_FILES or "spark" in name else "cluster-1"


def spread(scopes: Iterable[str]) -> list[str]:
    """``scopes`` (units of work, in xdist's order) with each folder's tests spread evenly.

    A unit that is a group (a name with no ``/``: a cluster group, a :data:`WHOLE_FILES` group)
    keeps its place in front. Every other unit is one test's node id: the i-th of a folder's n
    goes at (i + 1/2) / n of the way through the run, in the folder's own order. Collected in
    path order, the FakeCluster, fault and socket tests (which mostly wait on timeouts of their
    own) came in one stretch and the CPU-bound unit tests in another, so the CPU sat mostly idle
    through the first and every worker fought for it through the second.
    """
    groups: list[str] = []
    folders: dict[str, list[str]] = {}
    for scope in scopes:
        if "/" not in scope:
            groups.append(scope)
        else:
            folders.setdefault(scope.split("::", 1)[0].rsplit("/", 1)[0], []).append(scope)
    placed = sorted(
        ((i + 0.5) / len(units), scope)
        for units in folders.values()
        for i, scope in enumerate(units)
    )
    return groups + [scope for _, scope in placed]


class ClusterGroupScheduling(LoadScopeScheduling):  # type: ignore[misc]  # xdist is untyped
    """Load scheduling where each integration cluster group is one unit of work, and the other
    tests go out in :func:`spread`'s order."""

    _spread = False
    #: Scope -> {node id: done}, in the order the units go out (xdist's own attribute).
    workqueue: OrderedDict[str, dict[str, bool]]

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        return cluster_group(nodeid) or WHOLE_FILES.get(path, nodeid)

    def _assign_work_unit(self, node: object) -> None:
        if not self._spread:  # the queue is complete before the first unit goes out
            self.workqueue = OrderedDict(
                (scope, self.workqueue[scope]) for scope in spread(self.workqueue)
            )
            self._spread = True
        super()._assign_work_unit(node)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> ClusterGroupScheduling:
    """Schedule the run with :class:`ClusterGroupScheduling`."""
    return ClusterGroupScheduling(config, log)
