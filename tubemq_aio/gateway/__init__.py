"""HTTP gateway for TubeMQ: stateless replicas, consume state in Redis (extra ``gateway``).

Example::

    from tubemq_aio.gateway import GatewayConfig, create_app

    app = create_app(GatewayConfig.from_toml("gateway.toml"))
"""

from tubemq_aio.gateway.app import create_app
from tubemq_aio.gateway.config.cors import CorsConfig
from tubemq_aio.gateway.config.engine_settings import EngineSettings
from tubemq_aio.gateway.config.gateway_config import GatewayConfig
from tubemq_aio.gateway.config.tubemq_access import TubeMQAccess

__all__ = ["CorsConfig", "EngineSettings", "GatewayConfig", "TubeMQAccess", "create_app"]
