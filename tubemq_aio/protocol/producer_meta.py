"""What a producer learns from the master: brokers, writable partitions, size limits (sans-I/O).

The master speaks in strings (docs/protocol/wire.md §4.4–4.7):

* ``brokerInfos``: ``brokerId:host:port``; a port of a single blank means the default port.
* ``topicInfos``: ``topic#brokerId:partNum:storeNum[,...]#maxMsgSizeInBytes`` (last segment may be
  empty); partition ids are ``store * 10000 + index``.
* ``appdConfig``: ``{configId, maxMsgSize?}``, the cluster default max message size.

:class:`ProducerMetadata` applies register and heartbeat responses the way the Java producer does
and answers the questions the send path asks. Times are float seconds from any monotonic clock,
passed in as ``now``.

The plain values exchanged with the master (:class:`RegisterResponse`, :class:`HeartbeatResponse`,
the authentication values) live in :mod:`tubemq_aio.protocol.producer_master_values`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from tubemq_aio.errors import RemoteProtocolError
from tubemq_aio.protocol.producer_master_values import (
    ClusterConfig,
    HeartbeatResponse,
    RegisterResponse,
)

__all__ = [
    "BROKER_LIST_REFRESH_INTERVAL",
    "DEFAULT_BROKER_PORT",
    "DEFAULT_BROKER_TLS_PORT",
    "DEFAULT_MAX_MSG_SIZE",
    "INITIAL_BROKER_CHECKSUM",
    "INITIAL_CONFIG_ID",
    "MAX_MAX_MSG_SIZE",
    "MAX_PARTITIONS_PER_ITEM",
    "NOT_READY",
    "STORE_ID_BASE",
    "Broker",
    "Partition",
    "ProducerMetadata",
    "TopicMeta",
    "clamp_max_msg_size",
    "parse_broker_info",
    "parse_topic_info",
]

#: Broker port when ``brokerInfos`` leaves it blank on a plain master connection (§4.6).
DEFAULT_BROKER_PORT = 8123
#: Broker port when ``brokerInfos`` leaves it blank on a TLS master connection (§4.6).
DEFAULT_BROKER_TLS_PORT = 8124
#: Partition id = store index * this + partition index (``META_STORE_INS_BASE``).
STORE_ID_BASE = 10_000
#: Cluster default max message size before the master says otherwise, and the lower clamp.
DEFAULT_MAX_MSG_SIZE = 1024 * 1024
#: Upper clamp of a max message size (``validAndGetMaxMsgSizeInB``, §4.7).
MAX_MAX_MSG_SIZE = 20 * 1024 * 1024
#: ``brokerCheckSum`` a client holds before it knows any broker list.
INITIAL_BROKER_CHECKSUM = -1
#: ``appdConfig.configId`` a client echoes before it learned one.
INITIAL_CONFIG_ID = -2
#: After this many seconds without a broker-list change the heartbeat asks for the full list
#: again by sending checksum -1 (``BROKER_UPDATED_TIME_AFTER_RETRY_FAIL`` = 2 h, §4.5).
BROKER_LIST_REFRESH_INTERVAL = 7200.0
#: Hostile-input cap: partitions one ``topicInfos`` item (one broker) may announce. An index must
#: stay below :data:`STORE_ID_BASE` anyway, and real brokers host far fewer.
MAX_PARTITIONS_PER_ITEM = 10_000
#: ``errCode`` 201: heartbeat accepted, but the master has no metadata to hand out (§4.5).
NOT_READY = 201


@dataclass(frozen=True, slots=True)
class Broker:
    """A broker as the master announces it.

    Attributes:
        broker_id: the broker's numeric id.
        host: host name or IP address.
        port: TCP port of its RPC service.
    """

    broker_id: int
    host: str
    port: int

    @property
    def address(self) -> str:
        """``host:port``, the key of the connection pool."""
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Partition:
    """One writable (or readable) partition of a topic on a broker.

    Attributes:
        broker: the broker serving it.
        topic: the topic name.
        partition_id: ``store * 10000 + index`` (§4.6).
        partition_key: ``brokerId:topic:partitionId``, the id TubeMQ uses everywhere.
    """

    broker: Broker
    topic: str
    partition_id: int
    partition_key: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "partition_key", f"{self.broker.broker_id}:{self.topic}:{self.partition_id}"
        )


@dataclass(frozen=True, slots=True)
class TopicMeta:
    """The publishable layout of one topic, from one ``topicInfos`` entry.

    Attributes:
        topic: the topic name.
        partitions: writable partitions ordered by ``(broker_id, partition_id)``.
        max_msg_size: the topic's own max message size in bytes, ``None`` for the cluster default.
    """

    topic: str
    partitions: tuple[Partition, ...]
    max_msg_size: int | None


def clamp_max_msg_size(value: int) -> int:
    """Clamp a max message size to [1 MiB, 20 MiB] as client and broker do (§4.7)."""
    return min(max(value, DEFAULT_MAX_MSG_SIZE), MAX_MAX_MSG_SIZE)


def parse_broker_info(text: str, *, tls: bool = False) -> Broker:
    """Parse one ``brokerInfos`` entry ``brokerId:host:port``.

    A blank port (the master sends a single space for the default) becomes 8123, or 8124 when
    the master connection is TLS, as in Java (§4.6).

    Raises:
        RemoteProtocolError: the entry does not have the expected shape.
    """
    parts = text.split(":")
    if len(parts) != 3 or not parts[1].strip():
        raise RemoteProtocolError(f"malformed brokerInfos entry: {text!r}")
    try:
        broker_id = int(parts[0].strip())
        port_text = parts[2].strip()
        if port_text:
            port = int(port_text)
        else:
            port = DEFAULT_BROKER_TLS_PORT if tls else DEFAULT_BROKER_PORT
    except ValueError:
        raise RemoteProtocolError(f"malformed brokerInfos entry: {text!r}") from None
    return Broker(broker_id, parts[1].strip(), port)


def parse_topic_info(text: str, brokers: Mapping[int, Broker]) -> TopicMeta:
    """Parse one ``topicInfos`` entry into the topic's writable partitions.

    Items naming a broker absent from ``brokers`` are skipped (Java does the same). A third segment
    that is empty or not a number leaves the topic on the cluster default size.

    Raises:
        RemoteProtocolError: the entry does not have the expected shape.
    """
    segments = text.strip().split("#")
    if len(segments) < 2 or not segments[0]:
        raise RemoteProtocolError(f"malformed topicInfos entry: {text!r}")
    topic = segments[0]
    partitions: list[Partition] = []
    for item in segments[1].split(","):
        if not item:
            continue
        fields = item.split(":")
        try:
            broker_id, part_num, store_num = (int(f) for f in fields)
        except ValueError:
            raise RemoteProtocolError(f"malformed topicInfos item {item!r} in {text!r}") from None
        if (
            not (0 <= part_num <= STORE_ID_BASE and store_num >= 0)
            or part_num * store_num > MAX_PARTITIONS_PER_ITEM
        ):
            raise RemoteProtocolError(f"implausible partition counts {item!r} in {text!r}")
        broker = brokers.get(broker_id)
        if broker is None:
            continue
        # Every store holds part_num partitions; ids are store * 10000 + index (Go gets this
        # wrong by ignoring the store index).
        partitions.extend(
            Partition(broker, topic, store * STORE_ID_BASE + index)
            for store in range(store_num)
            for index in range(part_num)
        )
    partitions.sort(key=lambda p: (p.broker.broker_id, p.partition_id))
    max_size: int | None = None
    if len(segments) > 2 and segments[2].strip().isdigit():
        max_size = clamp_max_msg_size(int(segments[2].strip()))
    return TopicMeta(topic, tuple(partitions), max_size)


# ---------------------------------------------------------------------------------------------
# The producer's metadata state
# ---------------------------------------------------------------------------------------------


class ProducerMetadata:
    """The producer's view of brokers, topics and size limits, fed with master responses.

    Args:
        tls: whether the master connection is TLS; picks the default broker port (§4.6).
    """

    __slots__ = (
        "_brokers",
        "_brokers_updated_at",
        "_checksum",
        "_config_id",
        "_default_max",
        "_listed",
        "_tls",
        "_topics",
    )

    def __init__(self, *, tls: bool = False) -> None:
        self._tls = tls
        self._checksum = INITIAL_BROKER_CHECKSUM
        self._config_id = INITIAL_CONFIG_ID
        self._default_max = DEFAULT_MAX_MSG_SIZE
        self._brokers: dict[int, Broker] = {}
        self._topics: dict[str, TopicMeta] = {}
        #: Topics the master's last heartbeat answer listed with writable partitions.
        self._listed: frozenset[str] = frozenset()
        self._brokers_updated_at: float | None = None

    def __repr__(self) -> str:
        return (
            f"<ProducerMetadata checksum={self._checksum} brokers={len(self._brokers)} "
            f"topics={sorted(self._topics)} max_msg_size={self._default_max}>"
        )

    @property
    def broker_checksum(self) -> int:
        """The broker-list checksum we hold (for the register request)."""
        return self._checksum

    @property
    def config_id(self) -> int:
        """The ``appdConfig.configId`` to echo in the next master request."""
        return self._config_id

    @property
    def default_max_msg_size(self) -> int:
        """The cluster default max message size in bytes."""
        return self._default_max

    def heartbeat_checksum(self, now: float) -> int:
        """The checksum to put into the next heartbeat.

        Java asks for the full broker list (checksum -1) when it has not changed for 2 hours,
        then restarts that timer (§4.5).

        Args:
            now: monotonic time in seconds.
        """
        if self._brokers_updated_at is None:
            self._brokers_updated_at = now
        elif now - self._brokers_updated_at > BROKER_LIST_REFRESH_INTERVAL:
            self._brokers_updated_at = now
            return INITIAL_BROKER_CHECKSUM
        return self._checksum

    def apply_register(self, response: RegisterResponse, now: float) -> None:
        """Apply a successful register response; an unsuccessful one changes nothing.

        Args:
            response: the decoded response.
            now: monotonic time in seconds.
        """
        if not response.success:
            return
        if response.broker_checksum != self._checksum:
            self._set_brokers(response.broker_infos, response.broker_checksum, now)
        self._apply_config(response.config)

    def apply_heartbeat(self, response: HeartbeatResponse, now: float) -> None:
        """Apply a successful heartbeat response; an unsuccessful one changes nothing.

        Order as in Java: config first; stop on 201 NOT_READY; replace the broker map when the
        checksum changed (even with an empty list); then rebuild every topic from ``topicInfos``.
        A topic missing from the answer keeps its last known partitions while all their brokers
        are still in the broker list (Java drops them; see the comment in the code).

        Args:
            response: the decoded response.
            now: monotonic time in seconds.

        Raises:
            RemoteProtocolError: an entry is malformed (nothing is changed then).
        """
        if not response.success:
            return
        self._apply_config(response.config)
        if response.err_code == NOT_READY:
            return
        brokers = self._brokers
        if response.broker_checksum != self._checksum:
            brokers = self._parse_brokers(response.broker_infos)
        topics: dict[str, TopicMeta] = {}
        for info in response.topic_infos:
            if info.strip():
                meta = parse_topic_info(info, brokers)
                topics[meta.topic] = meta
        self._listed = frozenset(t for t, meta in topics.items() if meta.partitions)
        if response.broker_checksum != self._checksum:
            self._set_brokers(response.broker_infos, response.broker_checksum, now, brokers)
        # Unlike Java, keep the last known partitions of a topic the answer leaves out while their
        # brokers are still listed: a restarted master reports no topics until the brokers have
        # re-synced with it (tens of seconds), yet the brokers keep accepting sends meanwhile.
        for name, previous in self._topics.items():
            if name not in topics and all(
                p.broker.broker_id in brokers for p in previous.partitions
            ):
                topics[name] = previous
        self._topics = topics

    def brokers(self) -> tuple[Broker, ...]:
        """All known brokers ordered by id."""
        return tuple(self._brokers[i] for i in sorted(self._brokers))

    def broker(self, broker_id: int) -> Broker | None:
        """The broker with this id, or ``None``."""
        return self._brokers.get(broker_id)

    def listed(self, topic: str) -> bool:
        """Whether the master's last heartbeat answer listed writable partitions of ``topic``
        (what Java's ``isTopicCurAcceptPublish`` reports; :meth:`writable_partitions` may still
        hold a topic the answer left out, see :meth:`apply_heartbeat`)."""
        return topic in self._listed

    def topics(self) -> frozenset[str]:
        """Topics that currently have writable partitions."""
        return frozenset(self._topics)

    def writable_partitions(self, topic: str) -> tuple[Partition, ...]:
        """Writable partitions of ``topic`` in a canonical order; empty when none are known."""
        meta = self._topics.get(topic)
        return meta.partitions if meta is not None else ()

    def max_message_size(self, topic: str) -> int:
        """Max message size of ``topic``: its own value if the master sent one, else the default."""
        meta = self._topics.get(topic)
        if meta is not None and meta.max_msg_size is not None:
            return meta.max_msg_size
        return self._default_max

    def _apply_config(self, config: ClusterConfig | None) -> None:
        if config is None:
            return
        self._config_id = config.config_id
        if config.max_msg_size is not None:
            self._default_max = clamp_max_msg_size(config.max_msg_size)

    def _parse_brokers(self, infos: Iterable[str]) -> dict[int, Broker]:
        brokers: dict[int, Broker] = {}
        for info in infos:
            if info.strip():
                broker = parse_broker_info(info, tls=self._tls)
                brokers[broker.broker_id] = broker
        return brokers

    def _set_brokers(
        self,
        infos: Iterable[str],
        checksum: int,
        now: float,
        parsed: dict[int, Broker] | None = None,
    ) -> None:
        self._brokers = parsed if parsed is not None else self._parse_brokers(infos)
        self._checksum = checksum
        self._brokers_updated_at = now
