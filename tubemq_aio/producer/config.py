"""Producer configuration."""

from __future__ import annotations

from dataclasses import dataclass, field

from tubemq_aio.config import ClientConfig
from tubemq_aio.errors import ConfigError
from tubemq_aio.protocol.broker_blocking import BrokerBlockingConfig
from tubemq_aio.protocol.routing import DefaultPartitioner, Partitioner

__all__ = ["ProducerConfig"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerConfig(ClientConfig):
    """Options of a :class:`~tubemq_aio.Producer` (on top of :class:`ClientConfig`).

    Attributes:
        topics: topics to publish at start; more can be published later.
        send_timeout: seconds one send attempt waits for the broker (default ``rpc_timeout``).
        max_in_flight_sends: sends outstanding across the producer; further senders wait.
        send_retries: extra attempts, on another partition, for a send that certainly did not
            store the message (connect failure, broker 503/419 refusals).
        partitioner: chooses the partition of each send (default: key hash for keyed messages,
            round robin otherwise).
        blocking: thresholds of the bad-broker auto-blocking (Java client defaults).
        publish_timeout: seconds :meth:`Producer.publish` waits for the master to report
            writable partitions of a topic.
        close_grace: seconds :meth:`Producer.close` lets pending sends finish before failing them.
        register_attempts: master register attempts before start gives up (Java: 5).
        heartbeat_failures_before_backoff: consecutive failed heartbeats before slowing down.
        heartbeat_backoff: seconds between heartbeats after that many failures (Java: 60 s).
    """

    topics: tuple[str, ...] = ()
    send_timeout: float | None = None
    max_in_flight_sends: int = 4096
    send_retries: int = 2
    partitioner: Partitioner = field(default_factory=DefaultPartitioner)
    blocking: BrokerBlockingConfig = field(default_factory=BrokerBlockingConfig)
    publish_timeout: float = 15.0
    close_grace: float = 10.0
    register_attempts: int = 5
    heartbeat_failures_before_backoff: int = 5
    heartbeat_backoff: float = 60.0

    def __post_init__(self) -> None:
        ClientConfig.__post_init__(self)
        topics: object = self.topics
        if isinstance(topics, str):
            object.__setattr__(self, "topics", tuple(t for t in topics.split(",") if t))
        elif not isinstance(topics, tuple):
            object.__setattr__(self, "topics", tuple(self.topics))
        if self.send_timeout is not None and not 0 < self.send_timeout <= 600:
            raise ConfigError("send_timeout must be in (0, 600] seconds")
        if self.max_in_flight_sends < 1:
            raise ConfigError("max_in_flight_sends must be at least 1")
        if not 0 <= self.send_retries <= 100:
            raise ConfigError("send_retries must be in [0, 100]")
        if self.publish_timeout <= 0 or self.close_grace < 0:
            raise ConfigError("publish_timeout must be positive and close_grace non-negative")
        if self.register_attempts < 1 or self.heartbeat_failures_before_backoff < 1:
            raise ConfigError(
                "register_attempts and heartbeat_failures_before_backoff must be >= 1"
            )
        if self.heartbeat_backoff <= 0:
            raise ConfigError("heartbeat_backoff must be positive")

    @property
    def effective_send_timeout(self) -> float:
        """The per-attempt send timeout in seconds."""
        return self.rpc_timeout if self.send_timeout is None else self.send_timeout
