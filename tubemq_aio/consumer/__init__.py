"""The server-balanced consumer: :class:`Consumer`, its config and :class:`MessageBatch`."""

from tubemq_aio.consumer.batch import ConsumerStats, MessageBatch, PartitionPosition
from tubemq_aio.consumer.config import ConsumerConfig
from tubemq_aio.consumer.consumer import Consumer

__all__ = ["Consumer", "ConsumerConfig", "ConsumerStats", "MessageBatch", "PartitionPosition"]
