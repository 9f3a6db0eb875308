"""tubemq-aio: an asyncio-native client for Apache InLong TubeMQ.

The public API is what this module exports; everything else is internal.
"""

__version__ = "0.1.0"

from tubemq_aio.auth import Credentials
from tubemq_aio.config import ClientConfig
from tubemq_aio.consumer import (
    BoundConsume,
    ClientBalancedConsumer,
    Consumer,
    ConsumerConfig,
    MessageBatch,
    PartitionMeta,
    PartitionPosition,
    PositionedRead,
    assign_modulo,
)
from tubemq_aio.errors import (
    ClientClosedError,
    ConfigError,
    NetworkError,
    ProtocolError,
    RemoteRpcError,
    RequestTimeoutError,
    SendOutcomeUnknownError,
    SendWindowFullError,
    ServerError,
    TopicUnavailableError,
    TubeMQError,
)
from tubemq_aio.models import Message
from tubemq_aio.producer import Producer, ProducerConfig
from tubemq_aio.protocol.producer_rpc import SendResult
from tubemq_aio.protocol.routing import Partitioner

__all__ = [
    "BoundConsume",
    "ClientBalancedConsumer",
    "ClientClosedError",
    "ClientConfig",
    "ConfigError",
    "Consumer",
    "ConsumerConfig",
    "Credentials",
    "Message",
    "MessageBatch",
    "NetworkError",
    "PartitionMeta",
    "PartitionPosition",
    "Partitioner",
    "PositionedRead",
    "Producer",
    "ProducerConfig",
    "ProtocolError",
    "RemoteRpcError",
    "RequestTimeoutError",
    "SendOutcomeUnknownError",
    "SendResult",
    "SendWindowFullError",
    "ServerError",
    "TopicUnavailableError",
    "TubeMQError",
    "__version__",
    "assign_modulo",
]
