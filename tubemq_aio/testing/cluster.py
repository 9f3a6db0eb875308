"""A real Apache InLong TubeMQ cluster (1-3 masters + 1-3 brokers) on loopback, for tests.

In a test suite::

    from tubemq_aio.testing.cluster import LocalCluster

    async with LocalCluster(brokers=1, topics=["demo_topic"]) as cluster:
        ...  # connect a client with masters=cluster.master_addr

From a shell (``make cluster-up`` / ``make cluster-down`` / ``make cluster-status``); ``up``
leaves the cluster running in the background until ``down``::

    python -m tubemq_aio.testing.cluster up [--brokers 3] [--masters 3] [--topic NAME[:PARTS]] ...
    python -m tubemq_aio.testing.cluster status
    python -m tubemq_aio.testing.cluster down

See ``docs/local-cluster.md``.
"""

from __future__ import annotations

from tubemq_aio.testing._cli import main
from tubemq_aio.testing._cluster import LocalCluster
from tubemq_aio.testing._state import is_recorded_fake, recorded_web_api

__all__ = [
    "LocalCluster",
    "is_recorded_fake",
    "main",
    "recorded_web_api",
]

if __name__ == "__main__":  # pragma: no cover - exercised through the CLI test
    raise SystemExit(main())
