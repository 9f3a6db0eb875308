"""Consumer RPC answers: parsers of the master's and the brokers' responses (sans-I/O,
docs/protocol/consumer.md §1–§4, §6, §8).

Parsers return frozen dataclasses and raise :class:`~tubemq_aio.errors.RemoteProtocolError` for
undecodable bytes.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from google.protobuf.message import Message

from tubemq_aio.accelerator import compiled as _compiled_speedups
from tubemq_aio.protocol._pbparse import parse_message
from tubemq_aio.protocol.consumer_meta import (
    META_VALUE_UNDEFINED,
    FailureInfo,
)
from tubemq_aio.protocol.flow_control import FlowControlState
from tubemq_aio.protocol.pb import BrokerService_pb2 as broker_pb
from tubemq_aio.protocol.pb import MasterService_pb2 as master_pb
from tubemq_aio.protocol.producer_master_values import MasterAuthorization
from tubemq_aio.protocol.rebalance import RebalanceEvent, parse_event

__all__ = [
    "BrokerHeartbeatResponse",
    "FlowUpdate",
    "GetMessageResponse",
    "MasterResponse",
    "OffsetResponse",
    "RawMessage",
    "parse_broker_heartbeat_response",
    "parse_get_message_response",
    "parse_get_message_response_py",
    "parse_master_response",
    "parse_offset_response",
    "payload_bytes",
]


_tuple_new = tuple.__new__


_parse = parse_message


@dataclass(frozen=True, slots=True)
class FlowUpdate:
    """Flow-control and ops fields of a master answer (§1.3, §2.5, §8.1; None = absent)."""

    default_check_id: int | None = None
    default_info: str | None = None
    group_check_id: int | None = None
    group_info: str | None = None
    qry_priority_id: int | None = None
    max_offset_ctrl_id: int | None = None

    def apply(self, state: FlowControlState) -> bool:
        """Apply to ``state`` (:meth:`FlowControlState.update`); True if anything changed."""
        fields = {f: getattr(self, f) for f in self.__slots__ if f != "max_offset_ctrl_id"}
        return state.update(**fields)


@dataclass(frozen=True, slots=True)
class MasterResponse:
    """Any consumer master answer (methods 4–6, 20–22). V2 answers carry no ``success``: it is
    ``err_code == 200``. Fields a method does not have stay empty/None."""

    success: bool
    err_code: int
    err_msg: str
    event: RebalanceEvent | None = None
    not_allocated: bool | None = None
    flow: FlowUpdate = FlowUpdate()
    require_auth: bool = False
    authorization: MasterAuthorization | None = None
    broker_config_id: int | None = None
    broker_config_list: tuple[str, ...] = ()
    topic_meta_id: int | None = None
    topic_meta_list: tuple[str, ...] = ()


def _get(msg: Any, name: str, default: object = None) -> Any:
    """``msg.name`` when the field is present, else ``default`` (proto2 presence)."""
    try:
        return getattr(msg, name) if msg.HasField(name) else default
    except ValueError:  # the message type has no such singular field
        return default


def _flow(msg: Any, max_offset_ctrl: bool = False) -> FlowUpdate:
    return FlowUpdate(
        _get(msg, "defFlowCheckId"),
        _get(msg, "defFlowControlInfo"),
        _get(msg, "groupFlowCheckId"),
        _get(msg, "groupFlowControlInfo"),
        _get(msg, "qryPriorityId"),
        _get(msg, "csmFrmMaxOffsetCtrlId") if max_offset_ctrl else None,
    )


_MASTER_RESPONSES: dict[int, type[Message]] = {
    4: master_pb.RegisterResponseM2C,
    5: master_pb.HeartResponseM2C,
    6: master_pb.CloseResponseM2C,
    20: master_pb.RegisterResponseM2CV2,
    21: master_pb.HeartResponseM2CV2,
    22: master_pb.GetPartMetaResponseM2C,
}


def parse_master_response(method: int, data: bytes) -> MasterResponse:
    """Decode the answer to consumer master method ``method`` (4, 5, 6, 20, 21 or 22).

    A malformed event subscribe info is a protocol error; another method a ``ValueError``."""
    cls = _MASTER_RESPONSES.get(method)
    if cls is None:
        raise ValueError(f"method {method} is not a consumer master method")
    msg: Any = _parse(cls, data)
    ops = _get(msg, "opsTaskInfo")
    event = _get(msg, "event")
    info = _get(msg, "authorizedInfo")
    token = None if info is None else _get(info, "authAuthorizedToken")
    return MasterResponse(
        success=_get(msg, "success", msg.errCode == 200),
        err_code=msg.errCode,
        err_msg=msg.errMsg,
        event=None if event is None else parse_event(event),
        not_allocated=_get(msg, "notAllocated"),
        flow=_flow(ops, True) if ops is not None else _flow(msg),
        require_auth=bool(_get(msg, "requireAuth") or (ops is not None and ops.requireAuth)),
        authorization=info and MasterAuthorization(info.visitAuthorizedToken, token),
        broker_config_id=_get(msg, "brokerConfigId"),
        broker_config_list=tuple(getattr(msg, "brokerConfigList", ())),
        topic_meta_id=_get(msg, "topicMetaInfoId"),
        topic_meta_list=tuple(getattr(msg, "topicMetaInfoList", ())),
    )


@dataclass(frozen=True, slots=True)
class OffsetResponse:
    """A broker register/unregister or commit answer; offsets -2 when absent (§3.2, §6.1)."""

    success: bool
    err_code: int
    err_msg: str
    curr_offset: int = META_VALUE_UNDEFINED
    max_offset: int = META_VALUE_UNDEFINED


def parse_offset_response(data: bytes, *, commit: bool = False) -> OffsetResponse:
    """Decode a ``RegisterResponseB2C`` (15) or, with ``commit``, ``CommitOffsetResponseB2C``."""
    cls = broker_pb.CommitOffsetResponseB2C if commit else broker_pb.RegisterResponseB2C
    msg: Any = _parse(cls, data)
    curr, top = _get(msg, "currOffset", -2), _get(msg, "maxOffset", -2)
    return OffsetResponse(msg.success, msg.errCode, msg.errMsg, curr, top)


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatResponse:
    """A ``HeartBeatResponseB2C``: partitions to drop locally come in ``failures`` (§3.3)."""

    success: bool
    err_code: int
    err_msg: str
    failures: tuple[FailureInfo, ...]
    require_auth: bool


def parse_broker_heartbeat_response(data: bytes) -> BrokerHeartbeatResponse:
    """Decode a ``HeartBeatResponseB2C`` (method 16); a bad failure item is a protocol error."""
    msg = _parse(broker_pb.HeartBeatResponseB2C, data)
    failures = tuple(FailureInfo.parse(s) for s in msg.failureInfo)
    return BrokerHeartbeatResponse(msg.success, msg.errCode, msg.errMsg, failures, msg.requireAuth)


class RawMessage(NamedTuple):
    """A ``TransferedMessage`` as received; decoding is ``protocol.message``'s job (§5).

    A named tuple, not a frozen dataclass: a fetch builds one per message, and a tuple costs a
    fraction of a dataclass to create.
    """

    message_id: int
    checksum: int
    payload: bytes
    flag: int


_PAYLOAD = operator.itemgetter(RawMessage._fields.index("payload"))


def payload_bytes(messages: Iterable[RawMessage]) -> int:
    """The payload bytes of ``messages`` together (summed without a Python loop: a gateway
    fetch sums about 1 300 of them)."""
    return sum(map(len, map(_PAYLOAD, messages)))


@dataclass(frozen=True, slots=True)
class GetMessageResponse:
    """A ``GetMessageResponseB2C`` (§4.2); when absent: offsets -2, dlt -1, min_limit_time None."""

    success: bool
    err_code: int
    err_msg: str
    messages: tuple[RawMessage, ...]
    curr_offset: int
    max_offset: int
    curr_data_dlt: int
    min_limit_time: int | None
    esc_flow_ctrl: bool
    require_slow: bool


def parse_get_message_response(data: bytes) -> GetMessageResponse:
    """Decode a ``GetMessageResponseB2C`` (method 17).

    Uses the compiled parser of :mod:`tubemq_aio.accelerator` when it is built (same result,
    same errors), else :func:`parse_get_message_response_py`.

    Raises:
        RemoteProtocolError: the bytes are not a valid ``GetMessageResponseB2C``.
    """
    return _parse_get_message(data)


def parse_get_message_response_py(data: bytes) -> GetMessageResponse:
    """:func:`parse_get_message_response` in pure Python (protobuf's own parser)."""
    msg = _parse(broker_pb.GetMessageResponseB2C, data)
    new = _tuple_new  # skips the Python-level NamedTuple constructor (one per message)
    raw = tuple(
        [new(RawMessage, (m.messageId, m.checkSum, m.payLoadData, m.flag)) for m in msg.messages]
    )
    return GetMessageResponse(
        success=msg.success,
        err_code=msg.errCode,
        err_msg=msg.errMsg,
        messages=raw,
        curr_offset=_get(msg, "currOffset", META_VALUE_UNDEFINED),
        max_offset=_get(msg, "maxOffset", META_VALUE_UNDEFINED),
        curr_data_dlt=_get(msg, "currDataDlt", -1),
        min_limit_time=_get(msg, "minLimitTime"),
        esc_flow_ctrl=msg.escFlowCtrl,
        require_slow=msg.requireSlow,
    )


_ext = _compiled_speedups()
_parse_get_message: Callable[[bytes], GetMessageResponse] = (
    parse_get_message_response_py
    if _ext is None
    else _ext.GetMessageParser(
        GetMessageResponse, RawMessage, parse_get_message_response_py, META_VALUE_UNDEFINED
    )
)
