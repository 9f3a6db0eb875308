"""Test helpers for applications and for the SDK itself.

* :class:`LocalCluster`: a real TubeMQ cluster on loopback (needs ``java`` and ``mvn`` on
  ``PATH``; see ``docs/local-cluster.md``).
* :class:`RedisServer`: a real ``redis-server`` on a free loopback port.
* :class:`RedisSentinelSet`: a primary, a replica and three sentinels (failover in seconds).
* :class:`RedisClusterSet`: a Redis Cluster of three primaries with a replica each.
* :class:`FakeCluster`: an in-process master and brokers speaking the real wire protocol, with
  injectable faults (:class:`Fault`); no Java, starts in milliseconds.
* :class:`FaultProxy`: a TCP proxy with run-time switchable network faults.
* :class:`MasterWebApi`: a small client of the master's HTTP admin API (topics, groups).
* :func:`wait_until`: wait for a condition in a test instead of sleeping a fixed time.

See ``docs/testing.md``.
"""

from tubemq_aio.protocol.rpc import Method  # what FakeCluster.inject() takes
from tubemq_aio.testing._cluster import LocalCluster
from tubemq_aio.testing._config import AuthSettings, TlsSettings
from tubemq_aio.testing._errors import (
    ClusterError,
    ClusterStartError,
    NodeNotReadyError,
    PortConflictError,
    PortInUseError,
    RuntimeResolveError,
    SparkClusterError,
    ToolNotFoundError,
    UnsupportedVersionError,
    WebApiError,
)
from tubemq_aio.testing._fake_cluster import FakeCluster
from tubemq_aio.testing._fake_rpc import Fault, Injection
from tubemq_aio.testing._fake_store import StoredMessage, TopicLayout
from tubemq_aio.testing._fault_proxy import FaultProxy, LinkFaults
from tubemq_aio.testing._nodes import BrokerNode, JvmLaunch, MasterNode, ServerNode
from tubemq_aio.testing._tls import TlsMaterial, make_tls_material
from tubemq_aio.testing._versions import SERVER_VERSIONS
from tubemq_aio.testing._webapi import MasterWebApi
from tubemq_aio.testing.polling import wait_until
from tubemq_aio.testing.redis import RedisServer, RedisServerError
from tubemq_aio.testing.redis_cluster import RedisClusterSet
from tubemq_aio.testing.redis_sentinel import RedisSentinelSet

__all__ = [
    "SERVER_VERSIONS",
    "AuthSettings",
    "BrokerNode",
    "ClusterError",
    "ClusterStartError",
    "FakeCluster",
    "Fault",
    "FaultProxy",
    "Injection",
    "JvmLaunch",
    "LinkFaults",
    "LocalCluster",
    "MasterNode",
    "MasterWebApi",
    "Method",
    "NodeNotReadyError",
    "PortConflictError",
    "PortInUseError",
    "RedisClusterSet",
    "RedisSentinelSet",
    "RedisServer",
    "RedisServerError",
    "RuntimeResolveError",
    "ServerNode",
    "SparkClusterError",
    "StoredMessage",
    "TlsMaterial",
    "TlsSettings",
    "ToolNotFoundError",
    "TopicLayout",
    "UnsupportedVersionError",
    "WebApiError",
    "make_tls_material",
    "wait_until",
]
