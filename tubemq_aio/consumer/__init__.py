"""Consumers: the server-balanced :class:`Consumer` and the :class:`ClientBalancedConsumer`."""

from tubemq_aio.consumer.batch import ConsumerStats, MessageBatch, PartitionPosition
from tubemq_aio.consumer.bound import BoundConsume
from tubemq_aio.consumer.client_balanced import (
    ClientBalancedConsumer,
    PartitionMeta,
    PositionedRead,
    assign_modulo,
)
from tubemq_aio.consumer.config import ConsumerConfig
from tubemq_aio.consumer.consumer import Consumer

__all__ = [
    "BoundConsume",
    "ClientBalancedConsumer",
    "Consumer",
    "ConsumerConfig",
    "ConsumerStats",
    "MessageBatch",
    "PartitionMeta",
    "PartitionPosition",
    "PositionedRead",
    "assign_modulo",
]
