"""Test helpers: a real TubeMQ cluster on loopback (:class:`LocalCluster`) and a real Redis
(:class:`RedisServer`).

Everything here uses only the standard library plus ``java`` and ``mvn`` (and ``redis-server``)
on ``PATH``; see
``docs/local-cluster.md``.
"""

from tubemq_aio.testing._cluster import LocalCluster
from tubemq_aio.testing._config import AuthSettings, TlsSettings
from tubemq_aio.testing._errors import (
    ClusterError,
    ClusterStartError,
    NodeNotReadyError,
    PortInUseError,
    RuntimeResolveError,
    ToolNotFoundError,
    WebApiError,
)
from tubemq_aio.testing._nodes import BrokerNode, MasterNode, ServerNode
from tubemq_aio.testing._tls import TlsMaterial, make_tls_material
from tubemq_aio.testing.redis import RedisServer, RedisServerError

__all__ = [
    "AuthSettings",
    "BrokerNode",
    "ClusterError",
    "ClusterStartError",
    "LocalCluster",
    "MasterNode",
    "NodeNotReadyError",
    "PortInUseError",
    "RedisServer",
    "RedisServerError",
    "RuntimeResolveError",
    "ServerNode",
    "TlsMaterial",
    "TlsSettings",
    "ToolNotFoundError",
    "WebApiError",
    "make_tls_material",
]
