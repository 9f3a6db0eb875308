"""Integration-test plumbing: one real TubeMQ cluster per test process, fresh topics per test.

Fixtures (use them from any ``tests/integration/test_*.py``):

* ``cluster`` (session: one per test process, so one per pytest-xdist worker that runs
  integration tests): a started :class:`~tubemq_aio.testing.LocalCluster` with ``IT_BROKERS``
  brokers (default 2; env ``TUBEMQ_AIO_IT_BROKERS``). Connect clients with
  ``masters=cluster.master_addr``. Its methods work from any event loop, so function-scoped
  async tests may call ``await cluster.create_topic(...)`` or ``await cluster.brokers[0].kill()``
  (a test that stops a node must start it again before it ends).
* ``redis`` (function): a started :class:`~tubemq_aio.testing.RedisServer` (the gateway tests).
* ``spark`` (session): a ``local[2]`` SparkSession shared by every Spark test of the process
  (start-up costs ~10 s). Python workers run this interpreter, so they see the package
  installed in the venv; every listener binds to loopback and the web UI is off.
* ``topic`` (function): the name of a topic no other test has used, publishable and
  subscribable, with ``TOPIC_PARTITIONS`` partitions on every broker (so
  ``TOPIC_PARTITIONS * len(cluster.brokers)`` in total). Topics come from a pool created
  together with the cluster, because each topic added to running brokers costs ~35 s in the
  master (a hard-coded sync step). The pool holds as many topics as the collected tests of one
  cluster group ask for (``topic``, ``second_topic``, ``third_topic``; all of them when one
  process runs every group) and ``POOL_MARGIN`` more; if it runs dry all the same, a new batch
  is created in one call.

Every test in this directory is marked ``integration``. With parallel workers (``make test``)
the files form two groups (``tests/xdist_groups.py``), each run whole on one worker, which
starts that group's cluster (a file starting a cluster of its own, or none, is a group of its
own, and collection fails if one of its tests asks for ``cluster``). If
the cluster cannot start, each integration test errors at setup with the typed error and the
tails of all server logs: they never skip. Bring-up takes ~40 s (plus a one-time ~1 min jar
download on a fresh machine).
"""

from __future__ import annotations

import itertools
import os
import tempfile
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

import pytest
import pytest_asyncio

from tests.support.own_cluster import start_or_fail
from tests.xdist_groups import SHARED_CLUSTER_GROUPS, cluster_group
from tubemq_aio.testing import LocalCluster, RedisServer
from tubemq_aio.testing._ports import PortLease

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

IT_BROKERS = int(os.environ.get("TUBEMQ_AIO_IT_BROKERS", "2"))
TOPIC_PARTITIONS = 3
#: Topics the pool holds beyond what the collected tests ask for.
POOL_MARGIN = 4
REFILL_BATCH = 16
#: The fixtures that each take one topic from the pool.
TOPIC_FIXTURES = ("topic", "second_topic", "third_topic")

_RUN_ID = uuid.uuid4().hex[:6]
_counter = itertools.count(1)


def _topic_names(n: int) -> list[str]:
    return [f"it_{_RUN_ID}_{next(_counter)}" for _ in range(n)]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test of this directory ``integration`` and move these tests to the front, so
    parallel workers start them (the longest units of work) first; size the topic pool for
    them.

    Raises:
        pytest.UsageError: a test of a file scheduled apart from the shared clusters
            (``tests/xdist_groups.py``) asks for ``cluster``: its worker would start one more.
    """
    here = os.path.dirname(__file__) + os.sep
    ours = [item for item in items if str(item.path).startswith(here)]
    others = [item for item in items if not str(item.path).startswith(here)]
    for item in ours:
        item.add_marker(pytest.mark.integration)
    items[:] = ours + others
    stray = [
        item.nodeid
        for item in ours
        if cluster_group(item.nodeid) not in SHARED_CLUSTER_GROUPS and "cluster" in _fixtures(item)
    ]
    if stray:
        raise pytest.UsageError(
            "these tests ask for the shared cluster but are scheduled apart from it "
            f"(tests/xdist_groups.py): {stray}"
        )
    _POOL.free.extend(_topic_names(_pool_size(config, ours)))


def _fixtures(item: pytest.Item) -> list[str]:
    """The fixtures a test uses, those they use included (none for a non-function item)."""
    return item.fixturenames if isinstance(item, pytest.Function) else []


def _pool_size(config: pytest.Config, ours: list[pytest.Item]) -> int:
    """Topics one cluster of this process will hand out, plus :data:`POOL_MARGIN`: per cluster
    group on an xdist worker scheduled by ``tests.xdist_groups`` (it runs one group), else for
    every collected test."""
    per_group = "PYTEST_XDIST_WORKER" in os.environ and config.pluginmanager.hasplugin(
        "tests.xdist_groups"
    )
    wanted: Counter[str | None] = Counter()
    for item in ours:
        group = cluster_group(item.nodeid) if per_group else None
        wanted[group] += sum(name in _fixtures(item) for name in TOPIC_FIXTURES)
    return max(wanted.values(), default=0) + POOL_MARGIN


class TopicPool:
    """Unused topic names that are already publishable on the session cluster."""

    def __init__(self) -> None:
        """Start empty: collection adds the names created together with the cluster."""
        self.free: list[str] = []

    async def take(self, cluster: LocalCluster) -> str:
        """Return a fresh topic, creating a new batch (one ~35 s wait) when the pool is empty.

        Args:
            cluster: The session cluster.

        Returns:
            The topic name.
        """
        if not self.free:
            batch = _topic_names(REFILL_BATCH)
            await cluster.create_topics(batch, TOPIC_PARTITIONS)
            self.free.extend(batch)
        return self.free.pop(0)


_POOL = TopicPool()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def cluster() -> AsyncIterator[LocalCluster]:
    """A TubeMQ master + brokers on loopback, shared by the whole test run."""
    cluster = LocalCluster(IT_BROKERS, topics=list(_POOL.free), topic_partitions=TOPIC_PARTITIONS)
    await start_or_fail(cluster, "the TubeMQ test cluster")  # every test errors; none skips
    try:
        yield cluster
    finally:
        await cluster.stop()


@pytest_asyncio.fixture
async def redis() -> AsyncIterator[RedisServer]:
    """A real redis-server (AOF, appendfsync always) on a free loopback port, for one test."""
    async with RedisServer() as server:
        yield server


@pytest.fixture
def port() -> Iterator[int]:
    """A free port reserved against other processes for the test (a child process binds it)."""
    lease = PortLease()
    yield lease.take(1)[0]
    lease.release()


@pytest_asyncio.fixture
async def topic(cluster: LocalCluster) -> str:
    """A fresh, publishable topic name with ``TOPIC_PARTITIONS`` partitions per broker."""
    return await _POOL.take(cluster)


@pytest_asyncio.fixture
async def second_topic(cluster: LocalCluster, topic: str) -> str:
    """Another fresh topic (for tests that copy from ``topic`` to a second one)."""
    return await _POOL.take(cluster)


@pytest_asyncio.fixture
async def third_topic(cluster: LocalCluster, second_topic: str) -> str:
    """A third fresh topic (for tests that run scenarios on several topics at once)."""
    return await _POOL.take(cluster)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A ``local[2]`` SparkSession shared by every Spark test of the run."""
    # Imported here: only the Spark tests pay for loading pyspark.
    from tubemq_aio.spark.local import local_session

    scratch = tempfile.mkdtemp(prefix="tubemq-spark-")
    session = local_session(
        "tubemq-aio-tests",
        local_dir=scratch,
        conf={
            "spark.driver.memory": "1g",
            "spark.sql.streaming.checkpointLocation": os.path.join(scratch, "checkpoints"),
            "spark.python.worker.reuse": "true",
        },
    )
    try:
        yield session
    finally:
        session.stop()
