"""Pure parts of the client-balanced (V2) consumer (docs/protocol/consumer.md §8).

The application picks partitions itself: :func:`assign_modulo` spreads partition keys over
``source_count`` clients the way the Java example does, :class:`PartitionMetaCache` keeps the
broker list and topic metadata pushed by the master and decides whether a partition may be
connected, :class:`SubscriptionReporter` decides when the V2 heartbeat reports the held
partitions, and the ``build_*_v2`` functions serialize the V2 master requests (answers are
decoded by :func:`tubemq_aio.protocol.consumer_rpc.parse_master_response`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tubemq_aio.checks import Checks
from tubemq_aio.errors import ClientBalanceConfigError, MalformedMetaError
from tubemq_aio.protocol.consumer_meta import (
    DEFAULT_BROKER_PORT,
    DEFAULT_BROKER_TLS_PORT,
    META_STORE_INS_BASE,
    META_VALUE_UNDEFINED,
    BrokerInfo,
    Partition,
    PartitionKey,
)
from tubemq_aio.protocol.consumer_rpc import _cert
from tubemq_aio.protocol.flow_control import FlowControlState
from tubemq_aio.protocol.pb import MasterService_pb2 as master_pb
from tubemq_aio.protocol.producer_master_values import MasterCertificate

__all__ = [
    "CONNECT_FAILURE_HOLD",
    "BalanceClient",
    "OpsTaskIds",
    "PartitionMeta",
    "PartitionMetaCache",
    "SubscriptionReport",
    "SubscriptionReporter",
    "assign_modulo",
    "build_get_part_meta",
    "build_heartbeat_v2",
    "build_register_v2",
    "format_part_sub_info",
    "java_string_hash",
    "parse_broker_config_list",
    "parse_part_sub_info",
    "parse_topic_meta_list",
    "validate_bootstrap_offset",
    "validate_node",
]

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MAX = 2**63 - 1

#: A partition whose connect failed with 410/415 is refused (421) for this long (s), §8.4.
CONNECT_FAILURE_HOLD = 5.0


def validate_node(source_count: int, node_id: int) -> tuple[int, int]:
    """Check ``(sourceCount, nodeId)`` and return the values to send (§8.1).

    With ``source_count > 0`` the node id must be in ``[0, source_count - 1]``; otherwise the
    count is "not declared" and both are sent as -2 (Java).

    Raises:
        ClientBalanceConfigError: a value is not an integer, or ``node_id`` is out of range.
    """
    checks = Checks("client-balanced node", error=ClientBalanceConfigError)
    # Zero or below means "not declared"; the wire field is an int32.
    checks.integer("source_count", source_count, low=_INT32_MIN, high=_INT32_MAX)
    checks.integer("node_id", node_id, low=_INT32_MIN, high=_INT32_MAX)
    checks.done()
    if source_count <= 0:
        return META_VALUE_UNDEFINED, META_VALUE_UNDEFINED
    checks.integer("node_id", node_id, low=0, high=source_count - 1)
    checks.done()
    return source_count, node_id


def validate_bootstrap_offset(offset: int | None) -> int | None:
    """Check a connect bootstrap offset: None keeps the stored offset (Java's "< 0").

    Raises:
        ClientBalanceConfigError: the offset is not an integer, or negative (say None to keep
            the stored one).
    """
    if offset is not None:
        checks = Checks("connect", error=ClientBalanceConfigError)  # its only caller
        checks.integer("offset", offset, low=0, high=_INT64_MAX)  # an int64 on the wire
        checks.done()
    return offset


def java_string_hash(text: str) -> int:
    """Java ``String.hashCode`` as an unsigned 32-bit value (over UTF-16 code units)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def assign_modulo(
    keys: Iterable[PartitionKey], source_count: int, node_id: int
) -> frozenset[PartitionKey]:
    """The partitions node ``node_id`` of ``source_count`` should hold.

    A key belongs to the node where ``(hashCode(key) & 0xffffffff) % source_count == node_id``
    — the rule of the upstream Java example, so Python and Java members of one group agree.

    Raises:
        ClientBalanceConfigError: ``source_count < 1`` or ``node_id`` out of range.
    """
    checks = Checks("assign_modulo", error=ClientBalanceConfigError)
    checks.integer("source_count", source_count, low=1, high=_INT32_MAX)
    checks.done()
    validate_node(source_count, node_id)
    return frozenset(k for k in keys if java_string_hash(k.format()) % source_count == node_id)


@dataclass(frozen=True, slots=True)
class PartitionMeta:
    """A configured partition and whether the group may subscribe to it (statusId 1)."""

    partition: Partition
    subscribable: bool


def parse_broker_config_list(items: Iterable[str], *, tls: bool = False) -> dict[int, BrokerInfo]:
    """Parse ``brokerId:ip:port`` items; a blank port means 8123 (8124 over TLS), §0.2."""
    port = DEFAULT_BROKER_TLS_PORT if tls else DEFAULT_BROKER_PORT
    brokers = (BrokerInfo.parse(s, default_port=port) for s in items if s.strip())
    return {b.broker_id: b for b in brokers}


def parse_topic_meta_list(
    items: Iterable[str], brokers: Mapping[int, BrokerInfo]
) -> dict[PartitionKey, PartitionMeta]:
    """Expand ``topic#brokerId:storeCount:partsPerStore:statusId,...`` items (§8.3).

    Brokers missing from ``brokers`` are skipped; partition ids are
    ``storeIdx * 10000 + i``.

    Raises:
        MalformedMetaError: an item does not have the layout.
    """
    result: dict[PartitionKey, PartitionMeta] = {}
    for item in items:
        if not item.strip():
            continue
        topic, sep, rest = item.partition("#")
        if not sep or not topic:
            raise MalformedMetaError(f"bad topic meta {item!r}")
        for part in filter(None, rest.split(",")):
            fields = part.split(":")
            try:
                broker_id, stores, per_store, status = (int(f) for f in fields)
            except ValueError:
                raise MalformedMetaError(f"bad topic meta {item!r}") from None
            broker = brokers.get(broker_id)
            if broker is None:
                continue
            for store in range(stores):
                for index in range(per_store):
                    p = Partition(broker, topic, store * META_STORE_INS_BASE + index)
                    result[p.key] = PartitionMeta(p, status == 1)
    return result


def format_part_sub_info(keys: Iterable[PartitionKey]) -> list[str]:
    """``topic#brokerId:partitionId,...``, one string per topic (``partSubInfo``, §0.2)."""
    by_topic: dict[str, list[str]] = {}
    for key in sorted(keys):
        by_topic.setdefault(key.topic, []).append(f"{key.broker_id}:{key.partition_id}")
    return [f"{topic}#{','.join(parts)}" for topic, parts in sorted(by_topic.items())]


def parse_part_sub_info(items: Iterable[str]) -> frozenset[PartitionKey]:
    """Inverse of :func:`format_part_sub_info`.

    Raises:
        MalformedMetaError: an item does not have the layout.
    """
    keys = set()
    for item in items:
        topic, sep, rest = item.partition("#")
        if not sep or not topic:
            raise MalformedMetaError(f"bad partSubInfo {item!r}")
        for part in filter(None, rest.split(",")):
            keys.add(
                PartitionKey.parse(f"{part.partition(':')[0]}:{topic}:{part.partition(':')[2]}")
            )
    return frozenset(keys)


class PartitionMetaCache:
    """Broker list and topic metadata held by a client-balance consumer (§8.1–§8.4).

    ``broker_config_id`` / ``topic_meta_id`` (-2 initially) go into every V2 request;
    ``assigned_time_ms`` (wall-clock ms of the last stored meta, -1 before) is reported as
    ``lstAssignedTime``.
    """

    def __init__(self, *, tls: bool = False) -> None:
        self._tls = tls
        self.broker_config_id = META_VALUE_UNDEFINED
        self.brokers: dict[int, BrokerInfo] = {}
        self.topic_meta_id = META_VALUE_UNDEFINED
        self._meta_items: tuple[str, ...] = ()
        self.metas: dict[PartitionKey, PartitionMeta] = {}
        self.assigned_time_ms = -1
        self._failed_at: dict[PartitionKey, float] = {}

    def __repr__(self) -> str:
        return (
            f"<PartitionMetaCache brokers={len(self.brokers)}@{self.broker_config_id} "
            f"partitions={len(self.metas)}@{self.topic_meta_id}>"
        )

    def update(
        self,
        *,
        broker_config_id: int | None,
        broker_config_list: Iterable[str] = (),
        topic_meta_id: int | None = None,
        topic_meta_list: Iterable[str] = (),
        wall_ms: int,
    ) -> bool:
        """Apply the V2 fields of a register/heartbeat/GetPartMeta answer; True if changed.

        The broker list is replaced whenever its id changes; topic meta only for an id ≥ 0
        that differs and a non-empty list (Java ``storeTopicMetaInfo``).

        Raises:
            MalformedMetaError: a list item is malformed (the cache is left unchanged).
        """
        changed = False
        brokers, broker_id = self.brokers, self.broker_config_id
        if broker_config_id is not None and broker_config_id != broker_id:
            brokers = parse_broker_config_list(broker_config_list, tls=self._tls)
            broker_id, changed = broker_config_id, True
        items = tuple(topic_meta_list)
        if topic_meta_id is not None and topic_meta_id >= 0 and items:
            if topic_meta_id != self.topic_meta_id or changed:
                self.metas = parse_topic_meta_list(items, brokers)
                self._meta_items, self.topic_meta_id = items, topic_meta_id
                self.assigned_time_ms, changed = wall_ms, True
        elif changed and self._meta_items:
            self.metas = parse_topic_meta_list(self._meta_items, brokers)
        self.brokers, self.broker_config_id = brokers, broker_id
        return changed

    def subscribable(self) -> dict[PartitionKey, bool]:
        """Partition key → subscribable (Java ``getPartitionMetaInfo`` result)."""
        return {k: m.subscribable for k, m in self.metas.items()}

    def check_connect(self, key: PartitionKey, now: float) -> int:
        """Whether ``key`` may be connected now (§8.4); ``now`` is monotonic seconds.

        Returns:
            200, or 404 (unknown in the meta), 422 (not subscribable) or 421 (a 410/415
            failure less than 5 s ago). The caller answers "already held" itself.
        """
        meta = self.metas.get(key)
        if meta is None:
            return 404
        if not meta.subscribable:
            return 422
        failed = self._failed_at.get(key)
        if failed is not None and now - failed < CONNECT_FAILURE_HOLD:
            return 421
        return 200

    def record_connect_result(self, key: PartitionKey, err_code: int, now: float) -> None:
        """Remember a broker register answer for :meth:`check_connect` (410/415 hold)."""
        if err_code in (410, 415):
            self._failed_at[key] = now
        else:
            self._failed_at.pop(key, None)

    def unsubscribable(self, held: Iterable[PartitionKey]) -> list[PartitionKey]:
        """Held partitions to disconnect after a meta update (no longer subscribable, §8.2)."""
        return [k for k in held if k in self.metas and not self.metas[k].subscribable]


class SubscriptionReporter:
    """When a V2 heartbeat reports the held partitions (Java ``buildClientSubRepInfo``, §8.1).

    The first report goes out once partitions are held; later ones when the held set changed
    since the last report, and otherwise every ``interval`` heartbeats (6 × 10 = 60).
    """

    def __init__(self, interval: int = 60) -> None:
        self._interval = interval
        self._last: frozenset[PartitionKey] | None = None
        self._count = 0

    def next(self, held: Iterable[PartitionKey]) -> list[str] | None:
        """``partSubInfo`` for this heartbeat (``reportSubInfo=true``), or None."""
        current = frozenset(held)
        if self._last is None:
            if not current:
                return None
        elif current == self._last:
            self._count += 1  # counted only while unchanged, like Java
            if self._count % self._interval:
                return None
        self._last = current
        return format_part_sub_info(current)


@dataclass(frozen=True, slots=True)
class BalanceClient:
    """Who a client-balanced consumer is, as its ``RegisterRequestC2MV2`` names it (§8.1).

    Attributes:
        client_id: the consumer's id.
        group: its consumer group.
        host_name: its host.
        source_count: the declared number of clients (validated, -2 = undeclared).
        node_id: this client's index (validated, -2 = undeclared).
    """

    client_id: str
    group: str
    host_name: str
    source_count: int
    node_id: int


@dataclass(frozen=True, slots=True)
class SubscriptionReport:
    """``ClientSubRepInfo`` of a V2 register or heartbeat (§8.1, §8.2): the ids of the metadata
    the client holds and, when it reports them, the partitions it holds.

    Attributes:
        broker_config_id: ``brokerConfigId`` held (``META_VALUE_UNDEFINED`` before any).
        topic_meta_id: ``topicMetaInfoId`` held (``META_VALUE_UNDEFINED`` before any).
        assigned_time_ms: ``lstAssignedTime``, sent only when ``>= 0``.
        part_sub_info: ``partSubInfo`` entries to report, or ``None`` to report nothing.
    """

    broker_config_id: int = META_VALUE_UNDEFINED
    topic_meta_id: int = META_VALUE_UNDEFINED
    assigned_time_ms: int = -1
    part_sub_info: tuple[str, ...] | None = None

    def fill(self, msg: master_pb.ClientSubRepInfo) -> None:
        """Write this report into a request's ``subRepInfo``."""
        msg.brokerConfigId, msg.topicMetaInfoId = self.broker_config_id, self.topic_meta_id
        if self.assigned_time_ms >= 0:
            msg.lstAssignedTime = self.assigned_time_ms
        msg.reportSubInfo = self.part_sub_info is not None
        msg.partSubInfo.extend(self.part_sub_info or ())


@dataclass(frozen=True, slots=True)
class OpsTaskIds:
    """The ids of the rules a client-balanced consumer holds, as its V2 register and heartbeat
    send them in ``opsTaskInfo`` (§8.1): only ids held (``>= 0``); no ``opsTaskInfo`` at all
    when none is held.

    Attributes:
        flow: the flow-control rules held (default, group and query-priority check ids).
        max_offset_ctrl_id: the consume-from-max control id held.
    """

    flow: FlowControlState
    max_offset_ctrl_id: int = META_VALUE_UNDEFINED

    def fill(self, msg: master_pb.OpsTaskInfo) -> bool:
        """Write the held ids into ``msg``; whether any was held."""
        flow = self.flow
        ids = (flow.default.check_id, flow.group.check_id, flow.qry_priority_id)
        if ids[0] >= 0:
            msg.defFlowCheckId = ids[0]
        if ids[1] >= 0:
            msg.groupFlowCheckId = ids[1]
        if ids[2] >= 0:
            msg.qryPriorityId = ids[2]
        if self.max_offset_ctrl_id >= 0:
            msg.csmFrmMaxOffsetCtrlId = self.max_offset_ctrl_id
        return max(*ids, self.max_offset_ctrl_id) >= 0


def build_register_v2(
    *,
    client: BalanceClient,
    topics: Iterable[str],
    topic_conditions: Iterable[str] = (),
    report: SubscriptionReport = SubscriptionReport(),
    ops: OpsTaskIds,
    auth: MasterCertificate | None = None,
    jdk_version: str | None = None,
) -> bytes:
    """``RegisterRequestC2MV2`` (method 20, §8.1).

    Args:
        client: who registers.
        topics: the subscribed topics.
        topic_conditions: ``topic#filter`` items of the topics with a filter.
        report: the held metadata ids and partitions (nothing held: the default).
        ops: the ids of the rules held.
        auth: the register credentials, if the cluster authenticates.
        jdk_version: the ``jdkVersion`` to claim, if any.
    """
    msg = master_pb.RegisterRequestC2MV2(
        clientId=client.client_id,
        groupName=client.group,
        hostName=client.host_name,
        sourceCount=client.source_count,
    )
    msg.nodeId = client.node_id
    msg.topicList.extend(topics)
    msg.topicCondition.extend(topic_conditions)
    report.fill(msg.subRepInfo)
    if not ops.fill(msg.opsTaskInfo):
        msg.ClearField("opsTaskInfo")
    _cert(msg.authInfo, auth)
    if jdk_version is not None:
        msg.jdkVersion = jdk_version
    return msg.SerializeToString()


def build_heartbeat_v2(
    *,
    client_id: str,
    group: str,
    report: SubscriptionReport,
    ops: OpsTaskIds,
    auth: MasterCertificate | None = None,
) -> bytes:
    """``HeartRequestC2MV2`` (method 21, §8.2); arguments as for :func:`build_register_v2`."""
    msg = master_pb.HeartRequestC2MV2(clientId=client_id, groupName=group)
    report.fill(msg.subRepInfo)
    if not ops.fill(msg.opsTaskInfo):
        msg.ClearField("opsTaskInfo")
    _cert(msg.authInfo, auth)
    return msg.SerializeToString()


def build_get_part_meta(
    *,
    client_id: str,
    group: str,
    broker_config_id: int,
    topic_meta_id: int,
    auth: MasterCertificate | None = None,
) -> bytes:
    """``GetPartMetaRequestC2M`` (method 22, §8.3) with the ids the client holds."""
    msg = master_pb.GetPartMetaRequestC2M(
        clientId=client_id, groupName=group, brokerConfigId=broker_config_id
    )
    msg.topicMetaInfoId = topic_meta_id
    _cert(msg.authInfo, auth)
    return msg.SerializeToString()
