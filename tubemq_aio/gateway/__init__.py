"""HTTP gateway for TubeMQ: stateless replicas, consume state in Redis (extra ``gateway``).

Example::

    from tubemq_aio.gateway import GatewayConfig, create_app

    app = create_app(GatewayConfig.from_toml("gateway.toml"))
"""

from tubemq_aio.gateway.app import create_app
from tubemq_aio.gateway.config import GatewayConfig

__all__ = ["GatewayConfig", "create_app"]
