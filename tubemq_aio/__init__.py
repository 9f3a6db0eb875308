"""tubemq-aio: an asyncio-native client for Apache InLong TubeMQ."""

__version__ = "0.1.0"

__all__ = ["__version__"]
