"""Consumer-side metadata strings: partitions, subscribe info, filters, bound offsets.

Separators (docs/protocol/consumer.md §0.2): ``#`` segment, ``:`` attribute, ``@`` group, ``,``
array, ``=`` key/value; upstream proto comments show ``-`` where the code uses ``#`` — we follow the
code. Parsers of server strings raise :class:`MalformedMetaError` (a ``RemoteProtocolError``);
validators of user input raise :class:`ConsumerConfigError` (a ``ConfigError``); the checks of
names (group, topics, filters, subscriptions) live in :mod:`tubemq_aio.protocol.consumer_names`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum

from tubemq_aio.checks import Checks
from tubemq_aio.errors import (
    ConsumerConfigError,
    MalformedMetaError,
)

__all__ = [
    "DEFAULT_BROKER_PORT",
    "DEFAULT_BROKER_TLS_PORT",
    "INDEX_MSG_UNIT_SIZE",
    "META_STORE_INS_BASE",
    "META_VALUE_UNDEFINED",
    "BoundSession",
    "BrokerInfo",
    "ConsumePosition",
    "FailureInfo",
    "Partition",
    "PartitionKey",
    "ReadStatus",
    "SubscribeInfo",
    "TopicCondition",
    "format_required_partitions",
    "lag_in_messages",
    "parse_required_partitions",
    "validate_bound_offsets",
]

#: ``META_VALUE_UNDEFINED``: "no value" for ids and offsets everywhere (§0).
META_VALUE_UNDEFINED = -2
#: Default plain and TLS broker ports (§0.2, brokerConfigList with a blank port).
DEFAULT_BROKER_PORT = 8123
DEFAULT_BROKER_TLS_PORT = 8124
#: ``partitionId = storeIndex * 10000 + indexInStore`` (§0.2).
META_STORE_INS_BASE = 10000
#: One index record is 28 bytes; message lag = offset difference / 28 (§3.2).
INDEX_MSG_UNIT_SIZE = 28


def _int(text: str, what: str, whole: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise MalformedMetaError(f"bad {what} {text!r} in {whole!r}") from None


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A broker address: ``brokerId:host:port``."""

    broker_id: int
    host: str
    port: int = DEFAULT_BROKER_PORT

    def format(self) -> str:
        """Return the wire form ``brokerId:host:port``."""
        return f"{self.broker_id}:{self.host}:{self.port}"

    @classmethod
    def parse(cls, text: str, *, default_port: int = DEFAULT_BROKER_PORT) -> BrokerInfo:
        """Parse ``brokerId:host:port``; a blank port (V2 lists, §0.2) means ``default_port``."""
        parts = text.split(":")
        if len(parts) != 3 or not parts[1].strip():
            raise MalformedMetaError(f"bad broker string {text!r}")
        port_text = parts[2].strip()
        port = default_port if not port_text else _int(port_text, "port", text)
        return cls(_int(parts[0].strip(), "broker id", text), parts[1].strip(), port)


@dataclass(frozen=True, slots=True, order=True)
class PartitionKey:
    """The client-local identity of a partition: ``brokerId:topic:partitionId`` (§0.2).

    Its text and hash are made once: every fetch, connect and lease-table call looks a key up
    in several dicts and formats it for positions and batches.
    """

    broker_id: int
    topic: str
    partition_id: int
    _text: str = field(init=False, repr=False, compare=False)
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_text", f"{self.broker_id}:{self.topic}:{self.partition_id}")
        object.__setattr__(self, "_hash", hash((self.broker_id, self.topic, self.partition_id)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[type[PartitionKey], tuple[int, str, int]]:
        # Pickled by its fields: a string's hash differs between processes.
        return PartitionKey, (self.broker_id, self.topic, self.partition_id)

    def format(self) -> str:
        """Return ``brokerId:topic:partitionId``."""
        return self._text

    def __str__(self) -> str:
        return self._text

    @property
    def store_index(self) -> int:
        """The broker store this partition lives in (``partitionId // 10000``)."""
        return self.partition_id // META_STORE_INS_BASE

    @classmethod
    def parse(cls, text: str) -> PartitionKey:
        """Parse ``brokerId:topic:partitionId``."""
        parts = text.split(":")
        if len(parts) != 3 or not parts[1]:
            raise MalformedMetaError(f"bad partition key {text!r}")
        return cls(_int(parts[0], "broker id", text), parts[1], _int(parts[2], "partition", text))


@dataclass(frozen=True, slots=True)
class Partition:
    """A partition with its broker address: ``brokerId:host:port#topic:partitionId`` (§0.2)."""

    broker: BrokerInfo
    topic: str
    partition_id: int
    #: Made once: every fetch, release and commit asks for it several times.
    _key: PartitionKey = field(init=False, repr=False, compare=False)
    #: The wire form, made once: every broker heartbeat lists every held partition.
    _text: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        key = PartitionKey(self.broker.broker_id, self.topic, self.partition_id)
        object.__setattr__(self, "_key", key)
        text = f"{self.broker.format()}#{self.topic}:{self.partition_id}"
        object.__setattr__(self, "_text", text)

    @property
    def key(self) -> PartitionKey:
        """The partition's :class:`PartitionKey`."""
        return self._key

    def format(self) -> str:
        """Return ``brokerId:host:port#topic:partitionId`` (broker heartbeat ``partitionInfo``)."""
        return self._text

    @classmethod
    def parse(cls, text: str) -> Partition:
        """Parse a partition string."""
        broker_text, sep, rest = text.partition("#")
        topic, sep2, part_text = rest.partition(":")
        if not sep or not sep2 or not topic or ":" in part_text:
            raise MalformedMetaError(f"bad partition string {text!r}")
        return cls(BrokerInfo.parse(broker_text), topic, _int(part_text, "partition", text))


@dataclass(frozen=True, slots=True)
class SubscribeInfo:
    """``consumerId@group#brokerId:host:port#topic:partitionId`` (§0.2; not ``-`` as in protos)."""

    consumer_id: str
    group: str
    partition: Partition

    def format(self) -> str:
        """Return the wire form."""
        return f"{self.consumer_id}@{self.group}#{self.partition.format()}"

    @classmethod
    def parse(cls, text: str) -> SubscribeInfo:
        """Parse a subscribe info string."""
        consumer_id, sep, rest = text.partition("@")
        group, sep2, part_text = rest.partition("#")
        if not sep or not sep2 or not consumer_id or not group:
            raise MalformedMetaError(f"bad subscribe info {text!r}")
        return cls(consumer_id, group, Partition.parse(part_text))


@dataclass(frozen=True, slots=True)
class TopicCondition:
    """``topic#filter1,filter2`` — one per topic that has filters (§0.2, §1.2 field 6)."""

    topic: str
    filters: frozenset[str]

    def format(self) -> str:
        """Return the wire form; filters sorted like the Java ``TreeSet``."""
        return f"{self.topic}#{','.join(sorted(self.filters))}"

    @classmethod
    def parse(cls, text: str) -> TopicCondition:
        """Parse ``topic#f1,f2``."""
        topic, sep, rest = text.partition("#")
        filters = frozenset(rest.split(",")) if rest else frozenset()
        if not sep or not topic or not filters or "" in filters:
            raise MalformedMetaError(f"bad topic condition {text!r}")
        return cls(topic, filters)


@dataclass(frozen=True, slots=True)
class FailureInfo:
    """A broker heartbeat ``failureInfo`` item ``errCode:<partition string>`` (§3.3)."""

    err_code: int
    partition: Partition

    def format(self) -> str:
        """Return the wire form."""
        return f"{self.err_code}:{self.partition.format()}"

    @classmethod
    def parse(cls, text: str) -> FailureInfo:
        """Parse an item, splitting at the first ``:`` (§3.3)."""
        code, sep, rest = text.partition(":")
        if not sep:
            raise MalformedMetaError(f"bad failure info {text!r}")
        return cls(_int(code, "error code", text), Partition.parse(rest))


def format_required_partitions(offsets: Mapping[PartitionKey, int]) -> str:
    """``RegisterRequestC2M.requiredPartition``: ``key=offset,...``, keys sorted (§1.2 #11)."""
    return ",".join(f"{key.format()}={offsets[key]}" for key in sorted(offsets))


def parse_required_partitions(text: str) -> dict[PartitionKey, int]:
    """Parse a ``requiredPartition`` string (inverse of :func:`format_required_partitions`)."""
    result: dict[PartitionKey, int] = {}
    for item in filter(None, text.split(",")):
        key_text, sep, offset_text = item.partition("=")
        if not sep:
            raise MalformedMetaError(f"bad required partition {item!r}")
        result[PartitionKey.parse(key_text)] = _int(offset_text, "offset", item)
    return result


@dataclass(frozen=True, slots=True)
class BoundSession:
    """Bound-consumption fields of ``RegisterRequestC2M`` (§1.2 fields 9–13): bootstrap
    ``offsets``; ``not_allocated`` starts True and is copied true→false from answers (§1.3)."""

    session_key: str
    source_count: int
    select_big: bool = True
    offsets: dict[PartitionKey, int] | None = None
    not_allocated: bool = True

    def __post_init__(self) -> None:
        # The master refuses a blank key or a count <= 0 (§1.2 fields 9-10).
        checks = Checks("bound consumption", error=ConsumerConfigError)
        checks.text("session_key", self.session_key)
        checks.integer("source_count", self.source_count, low=1)
        checks.done()


class ConsumePosition(IntEnum):
    """Where a partition starts when first registered in this process (§9.3)."""

    FROM_FIRST_OFFSET = -1
    FROM_LATEST_OFFSET = 0
    FROM_MAX_OFFSET_ALWAYS = 1

    def read_status(self, first_registration: bool) -> int:
        """``RegisterRequestC2B.readStatus`` of a register (opType 31), §3.1/§9.3; every
        registration but the first of a key in this process sends 0."""
        if not first_registration or self is ConsumePosition.FROM_FIRST_OFFSET:
            return ReadStatus.NORMAL
        if self is ConsumePosition.FROM_LATEST_OFFSET:
            return ReadStatus.FROM_MAX
        return ReadStatus.FROM_MAX_ALWAYS


class ReadStatus(IntEnum):
    """``readStatus`` values (``CONSUME_MODEL_READ_*``, §3.1).

    On unregister (opType 32) 0 means "last batch consumed, commit it" and 1 "discard it".
    """

    NORMAL = 0
    FROM_MAX = 1
    FROM_MAX_ALWAYS = 2


def lag_in_messages(curr_offset: int, max_offset: int) -> int:
    """Messages between two index offsets: ``(max - curr) // 28``, never negative (§3.2)."""
    if curr_offset < 0 or max_offset < 0:
        return 0
    return max(0, (max_offset - curr_offset) // INDEX_MSG_UNIT_SIZE)


def validate_bound_offsets(
    offsets: Mapping[str, int] | Mapping[PartitionKey, int], topics: Iterable[str]
) -> dict[PartitionKey, int]:
    """Validate bound-consumption bootstrap offsets (§1.4 item 1, §1.2 field 11).

    Keys are ``brokerId:topic:partitionId`` strings or :class:`PartitionKey` of a topic in
    ``topics``; returns the offsets keyed by :class:`PartitionKey`.

    Raises:
        ConsumerConfigError: a key is malformed, names an unsubscribed topic, or an offset is
            negative.
    """
    subscribed = set(topics)
    checks = Checks("bound offsets", error=ConsumerConfigError)
    result: dict[PartitionKey, int] = {}
    for raw_key, offset in offsets.items():
        try:
            key = raw_key if isinstance(raw_key, PartitionKey) else PartitionKey.parse(raw_key)
        except MalformedMetaError as exc:
            checks.problem(str(exc))
            continue
        if key.topic not in subscribed:
            checks.problem(f"partition {key} is of a topic not subscribed")
        result[key] = checks.integer(f"offset of {key}", offset, low=0)
    checks.done()
    return result
