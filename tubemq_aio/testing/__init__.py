"""Test helpers: a real TubeMQ cluster on loopback (:class:`LocalCluster`).

Everything here uses only the standard library plus ``java`` and ``mvn`` on ``PATH``; see
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

__all__ = [
    "AuthSettings",
    "BrokerNode",
    "ClusterError",
    "ClusterStartError",
    "LocalCluster",
    "MasterNode",
    "NodeNotReadyError",
    "PortInUseError",
    "RuntimeResolveError",
    "ServerNode",
    "TlsMaterial",
    "TlsSettings",
    "ToolNotFoundError",
    "WebApiError",
    "make_tls_material",
]
