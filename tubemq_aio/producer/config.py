"""Producer configuration."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Self, TypedDict, Unpack

from tubemq_aio.accelerator import twin as compiled_twin
from tubemq_aio.checks import Checks, is_seconds, is_utf8
from tubemq_aio.config import ClientConfig, ClientOptions
from tubemq_aio.errors import InvalidMessageError
from tubemq_aio.protocol.broker_blocking import BrokerBlockingConfig
from tubemq_aio.protocol.consumer_names import check_topic_name
from tubemq_aio.protocol.message import MAX_TOPIC_LENGTH, check_message, validate_topic
from tubemq_aio.protocol.routing import DefaultPartitioner, Partitioner

__all__ = [
    "MAX_SEND_TIMEOUT",
    "ProducerConfig",
    "ProducerOptions",
    "SendOptions",
    "check_send_args",
    "check_send_many_args",
    "is_plain_send",
    "plain_send_args",
]

#: The longest send timeout accepted, per attempt, in seconds (``send_timeout`` and
#: ``send(timeout=...)``); the broker caps its own deadline at the same value.
MAX_SEND_TIMEOUT = 600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerConfig(ClientConfig):
    """Options of a :class:`~tubemq_aio.Producer` (on top of :class:`ClientConfig`).

    Attributes:
        topics: topics to publish at start; more can be published later.
        send_timeout: seconds a send may take, all its attempts and pauses included (default
            ``rpc_timeout``).
        max_in_flight_sends: sends outstanding across the producer; further senders wait.
        max_send_many: most messages one :meth:`Producer.send_many` call takes.
        send_retries: failures in a row of a send that certainly did not store the message
            (connect failure, request never written, broker 503/419) retried at once on another
            partition; later ones are retried after a growing pause. Either way a send is
            retried until its timeout, never past it (issue 30, fault 1).
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
    max_send_many: int = 10_000
    send_retries: int = 2
    partitioner: Partitioner = field(default_factory=DefaultPartitioner)
    blocking: BrokerBlockingConfig = field(default_factory=BrokerBlockingConfig)
    publish_timeout: float = 15.0
    close_grace: float = 10.0
    register_attempts: int = 5
    heartbeat_failures_before_backoff: int = 5
    heartbeat_backoff: float = 60.0

    @classmethod
    def from_url(cls, url: str, **overrides: Unpack[ProducerOptions]) -> Self:
        """Build a producer config from ``tubemq://…`` and keyword fields (which win); see
        :meth:`ClientConfig.from_url`.

        Raises:
            ConfigError: the URL, an option name or an option value is invalid.
        """
        return cls._from_url(url, overrides)

    def _check(self, c: Checks) -> None:
        ClientConfig._check(self, c)
        topics = c.names("topics", self.topics, split=True)
        for topic in topics:
            check_topic_name(c, topic)
        object.__setattr__(self, "topics", topics)
        c.optional_seconds("send_timeout", self.send_timeout, high=MAX_SEND_TIMEOUT)
        c.integer("max_in_flight_sends", self.max_in_flight_sends, low=1, high=1 << 20)
        c.integer("max_send_many", self.max_send_many, low=1, high=1 << 20)
        c.integer("send_retries", self.send_retries, low=0, high=100)
        c.instance("partitioner", self.partitioner, Partitioner)
        c.instance("blocking", self.blocking, BrokerBlockingConfig)
        c.seconds("publish_timeout", self.publish_timeout)
        c.seconds("close_grace", self.close_grace, low_open=False)
        c.integer("register_attempts", self.register_attempts, low=1, high=1000)
        c.integer(
            "heartbeat_failures_before_backoff",
            self.heartbeat_failures_before_backoff,
            low=1,
            high=1000,
        )
        c.seconds("heartbeat_backoff", self.heartbeat_backoff)

    @property
    def effective_send_timeout(self) -> float:
        """The per-attempt send timeout in seconds."""
        return self.rpc_timeout if self.send_timeout is None else self.send_timeout


class ProducerOptions(ClientOptions, total=False):
    """The :class:`ProducerConfig` fields :class:`~tubemq_aio.Producer` takes as keyword
    arguments (all optional; validated by the config, an unknown one is a ``ConfigError``)."""

    topics: str | Iterable[str]
    send_timeout: float | None
    max_in_flight_sends: int
    max_send_many: int
    send_retries: int
    partitioner: Partitioner
    blocking: BrokerBlockingConfig
    publish_timeout: float
    close_grace: float
    register_attempts: int
    heartbeat_failures_before_backoff: int
    heartbeat_backoff: float


class SendOptions(TypedDict, total=False):
    """The keyword arguments of one send (:meth:`~tubemq_aio.Producer.send_nowait` takes them as
    ``**options``; :meth:`~tubemq_aio.Producer.send` spells them out)."""

    attributes: Mapping[str, str] | None
    msg_type: str | None
    msg_time: datetime | str | None
    key: bytes | str | None
    timeout: float | None


def plain_send_args(
    topic: object,
    body: object,
    attributes: object,
    msg_type: object,
    msg_time: object,
) -> bool:
    """Whether a send's topic and message need no check beyond this one: a non-blank ``str``
    topic and a non-empty ``bytes`` body without attributes, message type or time (the common
    send, whose size is checked when it is encoded). The one place this is decided."""
    return (
        type(topic) is str
        and type(body) is bytes
        and attributes is None
        and msg_type is None
        and msg_time is None
        and body != b""
        and topic.strip() != ""
    )


_compiled_plain = compiled_twin("plain_send_args")
#: :func:`plain_send_args`, compiled when the accelerator is built (same answer for every input:
#: ``tests/unit/test_speedups_send.py``); what the send path calls.
is_plain_send: Callable[[object, object, object, object, object], bool] = (
    plain_send_args if _compiled_plain is None else _compiled_plain
)


def check_send_args(
    topic: object, body: object, *, call: str = "send", **options: Unpack[SendOptions]
) -> None:
    """Validate every argument of a send before anything else happens (one call per send).

    Cheap for the common plain message (:func:`plain_send_args`); the size against the topic's
    limit is checked when the message is encoded. ``options`` are the send's keyword arguments
    (:class:`SendOptions`: ``key``, ``timeout``, ``attributes``, ``msg_type``, ``msg_time``, as
    the caller passed them, of any type); ``call`` names the method in the message
    (``send_many`` checks its shared arguments here too).

    Raises:
        InvalidMessageError: the topic is not a non-blank string (of at most 64 characters,
            encodable as UTF-8), the body is not non-empty
            bytes, the key is not ``bytes``/``str`` (a ``str`` encodable as UTF-8), the timeout
            is not a number of seconds in ``(0, MAX_SEND_TIMEOUT]``, or an attribute,
            ``msg_type`` or ``msg_time`` is invalid.
    """
    key = options.get("key")
    timeout = options.get("timeout")
    attributes = options.get("attributes")
    msg_type = options.get("msg_type")
    msg_time = options.get("msg_time")
    if (
        plain_send_args(topic, body, attributes, msg_type, msg_time)
        and isinstance(topic, str)  # a plain one is: the rest of the topic rule follows
        and topic.isascii()
        and len(topic) <= MAX_TOPIC_LENGTH
        and (key is None or type(key) is bytes or (type(key) is str and key.isascii()))
        and (timeout is None or is_seconds(timeout, MAX_SEND_TIMEOUT))
    ):
        return
    checks = Checks(call, error=InvalidMessageError)
    for check in (
        lambda: validate_topic(topic),
        lambda: check_message(body, attributes=attributes, msg_type=msg_type, msg_time=msg_time),
    ):
        try:
            check()
        except InvalidMessageError as exc:
            checks.adopt(exc)
    if key is not None and not isinstance(key, bytes | str):
        checks.problem(f"key must be bytes or str, got {type(key).__name__}")
    elif isinstance(key, str) and not is_utf8(key):
        checks.problem("key is not encodable as UTF-8 (a lone surrogate?)")
    checks.optional_seconds("timeout", timeout, high=MAX_SEND_TIMEOUT)
    checks.done()


def check_send_many_args(
    topic: object, bodies: object, limit: int, options: SendOptions | None = None
) -> list[bytes]:
    """Validate every argument of a ``send_many`` call; return the bodies as a list.

    Args:
        topic: the topic.
        bodies: a list or tuple of message bodies.
        limit: the most bodies allowed (``max_send_many``).
        options: the options every message shares, checked as for a single send.

    Returns:
        The bodies as ``bytes``: a ``bytearray`` or ``memoryview`` is copied now, so the call
        sends each body as it was when the call was made.

    Raises:
        InvalidMessageError: ``bodies`` is not a list or tuple, holds more than ``limit``
            bodies, or any argument (or any body, named by its index) is invalid.
    """
    checks = Checks("send_many", error=InvalidMessageError)
    if not isinstance(bodies, list | tuple):
        checks.fail(f"bodies must be a list or tuple of bytes, got {type(bodies).__name__}")
    if len(bodies) > limit:
        checks.fail(f"{len(bodies)} bodies exceed max_send_many={limit}; split the call")
    # The shared arguments once (with a stand-in body), then each body by its index.
    check_send_args(topic, b"x", **(options or {}), call="send_many")
    items = list(bodies)
    for index, body in enumerate(items):
        if type(body) is not bytes or not body:
            try:
                check_message(body)
            except InvalidMessageError as exc:
                checks.problem(f"bodies[{index}]: {exc}")  # the first bad body is enough
                break
            # A snapshot, as a single send takes (``Outgoing``); it also keeps the list plain
            # bytes, as the plain encoder of the call needs.
            items[index] = bytes(body)
    checks.done()
    return items
