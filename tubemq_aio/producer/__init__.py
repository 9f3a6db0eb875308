"""The TubeMQ producer: :class:`Producer` and its :class:`ProducerConfig`."""

from tubemq_aio.producer.config import ProducerConfig
from tubemq_aio.producer.producer import Producer

__all__ = ["Producer", "ProducerConfig"]
