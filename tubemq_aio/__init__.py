"""tubemq-aio: an asyncio-native client for Apache InLong TubeMQ.

The public API is what this module exports; everything else is internal.
"""

__version__ = "0.1.0"

from tubemq_aio.auth import Credentials
from tubemq_aio.config import ClientConfig
from tubemq_aio.consumer import Consumer, ConsumerConfig, MessageBatch, PartitionPosition
from tubemq_aio.errors import (
    ClientClosedError,
    ConfigError,
    NetworkError,
    ProtocolError,
    RemoteRpcError,
    RequestTimeoutError,
    SendOutcomeUnknownError,
    ServerError,
    TopicUnavailableError,
    TubeMQError,
)
from tubemq_aio.models import Message
from tubemq_aio.producer import Producer, ProducerConfig
from tubemq_aio.protocol.producer_rpc import SendResult
from tubemq_aio.protocol.routing import Partitioner

__all__ = [
    "ClientClosedError",
    "ClientConfig",
    "ConfigError",
    "Consumer",
    "ConsumerConfig",
    "Credentials",
    "Message",
    "MessageBatch",
    "NetworkError",
    "PartitionPosition",
    "Partitioner",
    "Producer",
    "ProducerConfig",
    "ProtocolError",
    "RemoteRpcError",
    "RequestTimeoutError",
    "SendOutcomeUnknownError",
    "SendResult",
    "ServerError",
    "TopicUnavailableError",
    "TubeMQError",
    "__version__",
]
