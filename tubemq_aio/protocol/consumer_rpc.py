"""Consumer RPC bodies: request builders (sans-I/O, docs/protocol/consumer.md §1–§4, §6, §8).

Builders return the serialized message for :func:`~tubemq_aio.protocol.rpc.encode_request` with
the method id their docstring names. The parsers of the answers live in
:mod:`tubemq_aio.protocol.consumer_replies`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tubemq_aio.protocol.consumer_meta import (
    META_VALUE_UNDEFINED,
    BoundSession,
    PartitionKey,
    format_required_partitions,
)
from tubemq_aio.protocol.flow_control import FlowControlState
from tubemq_aio.protocol.pb import BrokerService_pb2 as broker_pb
from tubemq_aio.protocol.pb import MasterService_pb2 as master_pb
from tubemq_aio.protocol.producer_master_values import BrokerAuthorization, MasterCertificate
from tubemq_aio.protocol.rebalance import EventResult

__all__ = [
    "ConsumerClient",
    "RegisterStart",
    "Subscription",
    "build_broker_heartbeat",
    "build_broker_register",
    "build_broker_unregister",
    "build_close",
    "build_commit",
    "build_get_message",
    "build_heartbeat",
    "build_register",
]


@dataclass(frozen=True, slots=True)
class ConsumerClient:
    """Who a server-balanced consumer is, as its ``RegisterRequestC2M`` names it (§1.2).

    Attributes:
        client_id: the consumer's id.
        group: its consumer group.
        host_name: its host (the local address reported to the master).
        session_time_ms: wall-clock ms when its session began (``sessionTime``).
    """

    client_id: str
    group: str
    host_name: str
    session_time_ms: int


@dataclass(frozen=True, slots=True)
class Subscription:
    """What a consumer subscribes to, as a register sends it (§1.2).

    Attributes:
        topics: the subscribed topics (``topicList``).
        topic_conditions: :meth:`TopicCondition.format` strings of the topics with a filter
            (``topicCondition``); empty when none filters.
    """

    topics: tuple[str, ...]
    topic_conditions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RegisterStart:
    """Where a broker register (opType 31) asks the group to read from (§3.1, §3.2).

    Attributes:
        read_status: ``readStatus``, from :meth:`ConsumePosition.read_status`.
        curr_offset: a bootstrap offset (≥ 0, §1.4, §8.4) or None (the broker's own position);
            the broker honours it only with ``read_status`` 0.
    """

    read_status: int
    curr_offset: int | None = None


def _cert(msg: master_pb.MasterCertificateInfo, auth: MasterCertificate | None) -> None:
    if auth is not None and (a := auth.authenticate) is not None:
        msg.authInfo.userName, msg.authInfo.timestamp = a.user_name, a.timestamp
        msg.authInfo.nonce, msg.authInfo.othParams = a.nonce, a.oth_params
        msg.authInfo.signature = a.signature
    if auth is not None and auth.authorized_token is not None:
        msg.authorizedToken = auth.authorized_token


def _broker_auth(msg: broker_pb.AuthorizedInfo, auth: BrokerAuthorization | None) -> None:
    if auth is not None:
        msg.visitAuthorizedToken = auth.visit_token
        if auth.auth_token is not None:
            msg.authAuthorizedToken = auth.auth_token


def _c2b(op: int, client: str, group: str, key: PartitionKey) -> broker_pb.RegisterRequestC2B:
    # opType 31 = MSG_OPTYPE_REGISTER, 32 = MSG_OPTYPE_UNREGISTER (anything else → 400, §3.1)
    msg = broker_pb.RegisterRequestC2B(opType=op, clientId=client, groupName=group)
    msg.topicName, msg.partitionId = key.topic, key.partition_id
    return msg


def _flow_ids(msg: Any, flow: FlowControlState) -> None:
    # Always sent: the master fills flow fields in answers only if a check id came (§2.2).
    msg.defFlowCheckId, msg.groupFlowCheckId = flow.default.check_id, flow.group.check_id
    msg.qryPriorityId = flow.qry_priority_id


def build_register(
    *,
    client: ConsumerClient,
    subscription: Subscription,
    subscribe_info: Iterable[str] = (),
    flow: FlowControlState,
    bound: BoundSession | None = None,
    auth: MasterCertificate | None = None,
    jdk_version: str | None = None,
) -> bytes:
    """``RegisterRequestC2M`` (method 4, §1.2): subscribe info = partitions held (re-register),
    flow ids from ``flow``."""
    msg = master_pb.RegisterRequestC2M(
        clientId=client.client_id, groupName=client.group, hostName=client.host_name
    )
    msg.topicList.extend(subscription.topics)
    msg.subscribeInfo.extend(subscribe_info)
    msg.topicCondition.extend(subscription.topic_conditions)
    msg.requireBound = bound is not None
    msg.sessionTime = client.session_time_ms
    if bound is not None:
        msg.sessionKey, msg.totalCount = bound.session_key, bound.source_count
        msg.selectBig, msg.notAllocated = bound.select_big, bound.not_allocated
        msg.requiredPartition = format_required_partitions(bound.offsets or {})
    _flow_ids(msg, flow)
    _cert(msg.authInfo, auth)
    if jdk_version is not None:
        msg.jdkVersion = jdk_version
    return msg.SerializeToString()


def build_heartbeat(
    *,
    client_id: str,
    group: str,
    flow: FlowControlState,
    event: EventResult | None = None,
    subscribe_info: Iterable[str] | None = None,
    auth: MasterCertificate | None = None,
) -> bytes:
    """``HeartRequestC2M`` (method 5, §2.2): ``subscribe_info`` not None means
    ``reportSubscribeInfo=true`` with that list; ``event`` is a processed event result."""
    msg = master_pb.HeartRequestC2M(clientId=client_id, groupName=group)
    msg.reportSubscribeInfo = subscribe_info is not None
    msg.subscribeInfo.extend(subscribe_info or ())
    if event is not None:
        msg.event.rebalanceId, msg.event.opType = event.rebalance_id, event.op_type
        msg.event.status = event.status
        msg.event.subscribeInfo.extend(event.subscribe_info)
    _flow_ids(msg, flow)
    _cert(msg.authInfo, auth)
    return msg.SerializeToString()


def build_close(*, client_id: str, group: str, auth: MasterCertificate | None = None) -> bytes:
    """``CloseRequestC2M`` (method 6, §1.5), after every partition was unregistered."""
    msg = master_pb.CloseRequestC2M(clientId=client_id, groupName=group)
    _cert(msg.authInfo, auth)
    return msg.SerializeToString()


def build_broker_register(
    *,
    client_id: str,
    group: str,
    key: PartitionKey,
    start: RegisterStart,
    filters: Iterable[str] = (),
    qry_priority_id: int = META_VALUE_UNDEFINED,
    auth: BrokerAuthorization | None = None,
) -> bytes:
    """``RegisterRequestC2B`` opType 31 (method 15, §3.1), reading from ``start``."""
    msg = _c2b(31, client_id, group, key)
    msg.readStatus = start.read_status
    msg.filterCondStr.extend(sorted(filters))
    if start.curr_offset is not None and start.curr_offset >= 0:
        msg.currOffset = start.curr_offset
    msg.qryPriorityId = qry_priority_id
    _broker_auth(msg.authInfo, auth)
    return msg.SerializeToString()


def build_broker_unregister(
    *,
    client_id: str,
    group: str,
    key: PartitionKey,
    read_status: int,
    auth: BrokerAuthorization | None = None,
) -> bytes:
    """``RegisterRequestC2B`` opType 32 (method 15, §3.1): ``read_status`` 0 commits the last
    batch, 1 discards it (:attr:`RemovedPartition.read_status`)."""
    msg = _c2b(32, client_id, group, key)
    msg.readStatus = read_status
    _broker_auth(msg.authInfo, auth)
    return msg.SerializeToString()


def build_broker_heartbeat(
    *,
    client_id: str,
    group: str,
    partition_info: Iterable[str],
    qry_priority_id: int = META_VALUE_UNDEFINED,
    auth: BrokerAuthorization | None = None,
) -> bytes:
    """``HeartBeatRequestC2B`` (method 16, §3.3): partition strings held on one broker."""
    msg = broker_pb.HeartBeatRequestC2B(clientId=client_id, groupName=group, readStatus=0)
    msg.partitionInfo.extend(partition_info)
    msg.qryPriorityId = qry_priority_id
    _broker_auth(msg.authInfo, auth)
    return msg.SerializeToString()


def build_get_message(
    *, client_id: str, group: str, key: PartitionKey, last_pack_consumed: bool, esc_flow_ctrl: bool
) -> bytes:
    """``GetMessageRequestC2B`` (method 17, §4.1); ``manualCommitOffset`` is always false."""
    msg = broker_pb.GetMessageRequestC2B(clientId=client_id, groupName=group, topicName=key.topic)
    msg.partitionId, msg.lastPackConsumed = key.partition_id, last_pack_consumed
    msg.manualCommitOffset, msg.escFlowCtrl = False, esc_flow_ctrl
    return msg.SerializeToString()


def build_commit(*, client_id: str, group: str, key: PartitionKey, consumed: bool) -> bytes:
    """``CommitOffsetRequestC2B`` (method 18, §6.1): commit (True) or roll back the batch."""
    msg = broker_pb.CommitOffsetRequestC2B(clientId=client_id, topicName=key.topic, groupName=group)
    msg.partitionId, msg.lastPackConsumed = key.partition_id, consumed
    return msg.SerializeToString()
