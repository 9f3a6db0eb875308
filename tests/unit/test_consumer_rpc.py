"""Consumer request builders and response parsers (docs/protocol/consumer.md §1–§4, §6)."""

from __future__ import annotations

import pytest

from tests.support.speedup_impls import PARSERS, Parser
from tubemq_aio.errors import RemoteProtocolError
from tubemq_aio.protocol.consumer_meta import (
    BoundSession,
    BrokerInfo,
    FailureInfo,
    Partition,
    PartitionKey,
    TopicCondition,
)
from tubemq_aio.protocol.consumer_replies import (
    RawMessage,
    parse_broker_heartbeat_response,
    parse_master_response,
    parse_offset_response,
)
from tubemq_aio.protocol.consumer_rpc import (
    ConsumerClient,
    RegisterStart,
    Subscription,
    build_broker_heartbeat,
    build_broker_register,
    build_broker_unregister,
    build_close,
    build_commit,
    build_get_message,
    build_heartbeat,
    build_register,
)
from tubemq_aio.protocol.flow_control import FlowControlState
from tubemq_aio.protocol.pb import BrokerService_pb2 as broker_pb
from tubemq_aio.protocol.pb import MasterService_pb2 as master_pb
from tubemq_aio.protocol.producer_master_values import (
    AuthenticateInfo,
    BrokerAuthorization,
    MasterAuthorization,
    MasterCertificate,
)
from tubemq_aio.protocol.rebalance import EventResult

KEY = PartitionKey(1, "demo", 10001)
SUB = "c1@g1#1:10.0.0.1:8123#demo:10001"


def test_commit_request_golden_bytes() -> None:
    # Field by field from BrokerService.proto: 1 clientId, 2 topicName, 3 partitionId,
    # 4 groupName, 5 lastPackConsumed.
    body = build_commit(client_id="c", group="g", key=PartitionKey(1, "t", 1), consumed=True)
    assert body == bytes.fromhex("0a0163 120174 1801 220167 2801".replace(" ", ""))


def test_register_normal() -> None:
    flow = FlowControlState()
    body = build_register(
        client=ConsumerClient("c1", "g1", "10.0.0.9", 1700000000000),
        subscription=Subscription(
            ("demo",), (TopicCondition("demo", frozenset({"b", "a"})).format(),)
        ),
        subscribe_info=[SUB],
        flow=flow,
        jdk_version="py3.11",
    )
    msg = master_pb.RegisterRequestC2M.FromString(body)
    assert (msg.clientId, msg.groupName, msg.hostName) == ("c1", "g1", "10.0.0.9")
    assert list(msg.topicList) == ["demo"]
    assert list(msg.subscribeInfo) == [SUB]
    assert list(msg.topicCondition) == ["demo#a,b"]
    assert msg.HasField("requireBound")
    assert not msg.requireBound
    assert msg.sessionTime == 1700000000000
    assert (msg.defFlowCheckId, msg.groupFlowCheckId, msg.qryPriorityId) == (-2, -2, -2)
    assert not msg.HasField("sessionKey")
    assert not msg.HasField("authInfo")
    assert not msg.HasField("ssdStoreId")  # deprecated, never sent
    assert msg.jdkVersion == "py3.11"


def test_register_bound_with_auth() -> None:
    auth = MasterCertificate(
        AuthenticateInfo(user_name="u", timestamp=123, nonce=7, signature="sig")
    )
    body = build_register(
        client=ConsumerClient("c1", "g1", "h", 1),
        subscription=Subscription(("demo",)),
        flow=FlowControlState(),
        bound=BoundSession("sk", 3, select_big=False, offsets={KEY: 280}),
        auth=auth,
    )
    msg = master_pb.RegisterRequestC2M.FromString(body)
    assert msg.requireBound
    assert msg.sessionKey == "sk"
    assert msg.totalCount == 3
    assert not msg.selectBig
    assert msg.notAllocated
    assert msg.requiredPartition == "1:demo:10001=280"
    assert msg.authInfo.authInfo.userName == "u"
    assert msg.authInfo.authInfo.signature == "sig"


def test_heartbeat_with_event_result() -> None:
    flow = FlowControlState()
    flow.update(group_check_id=3, group_info="[]", qry_priority_id=202)
    body = build_heartbeat(
        client_id="c1",
        group="g1",
        flow=flow,
        event=EventResult(99, 1, 2, (SUB,)),
        subscribe_info=[SUB],
        auth=MasterCertificate(authorized_token="tok"),
    )
    msg = master_pb.HeartRequestC2M.FromString(body)
    assert msg.reportSubscribeInfo
    assert list(msg.subscribeInfo) == [SUB]
    assert (msg.event.rebalanceId, msg.event.opType, msg.event.status) == (99, 1, 2)
    assert list(msg.event.subscribeInfo) == [SUB]
    assert (msg.groupFlowCheckId, msg.qryPriorityId, msg.defFlowCheckId) == (3, 202, -2)
    assert msg.authInfo.authorizedToken == "tok"
    plain = master_pb.HeartRequestC2M.FromString(
        build_heartbeat(client_id="c", group="g", flow=flow)
    )
    assert plain.HasField("reportSubscribeInfo")
    assert not plain.reportSubscribeInfo
    assert not plain.HasField("event")


def test_close() -> None:
    msg = master_pb.CloseRequestC2M.FromString(build_close(client_id="c", group="g"))
    assert (msg.clientId, msg.groupName, msg.HasField("authInfo")) == ("c", "g", False)


def test_broker_register_and_unregister() -> None:
    auth = BrokerAuthorization(-2)
    body = build_broker_register(
        client_id="c",
        group="g",
        key=KEY,
        start=RegisterStart(1, 560),
        filters=["b", "a"],
        qry_priority_id=301,
        auth=auth,
    )
    msg = broker_pb.RegisterRequestC2B.FromString(body)
    assert (msg.opType, msg.topicName, msg.partitionId, msg.readStatus) == (31, "demo", 10001, 1)
    assert list(msg.filterCondStr) == ["a", "b"]
    assert msg.currOffset == 560
    assert msg.qryPriorityId == 301
    assert msg.authInfo.visitAuthorizedToken == -2
    keep = broker_pb.RegisterRequestC2B.FromString(
        build_broker_register(client_id="c", group="g", key=KEY, start=RegisterStart(0, -1))
    )
    assert not keep.HasField("currOffset")
    assert not keep.HasField("authInfo")
    body = build_broker_unregister(
        client_id="c", group="g", key=KEY, read_status=0, auth=BrokerAuthorization(5, "u 1 2 s")
    )
    unreg = broker_pb.RegisterRequestC2B.FromString(body)
    assert (unreg.opType, unreg.readStatus) == (32, 0)
    assert not unreg.filterCondStr
    assert not unreg.HasField("currOffset")
    assert not unreg.HasField("qryPriorityId")
    assert unreg.authInfo.authAuthorizedToken == "u 1 2 s"


def test_broker_heartbeat_and_get_message() -> None:
    part = Partition(BrokerInfo(1, "10.0.0.1", 8123), "demo", 10001)
    msg = broker_pb.HeartBeatRequestC2B.FromString(
        build_broker_heartbeat(client_id="c", group="g", partition_info=[part.format()])
    )
    assert msg.readStatus == 0
    assert list(msg.partitionInfo) == ["1:10.0.0.1:8123#demo:10001"]
    get = broker_pb.GetMessageRequestC2B.FromString(
        build_get_message(
            client_id="c", group="g", key=KEY, last_pack_consumed=True, esc_flow_ctrl=False
        )
    )
    assert (get.partitionId, get.topicName, get.lastPackConsumed) == (10001, "demo", True)
    assert get.HasField("manualCommitOffset")
    assert not get.manualCommitOffset
    assert get.HasField("escFlowCtrl")
    assert not get.escFlowCtrl


def test_parse_register_response() -> None:
    rsp = master_pb.RegisterResponseM2C(success=True, errCode=200, errMsg="OK")
    rsp.notAllocated = False
    rsp.defFlowCheckId, rsp.defFlowControlInfo = 4, "[]"
    rsp.groupFlowCheckId, rsp.qryPriorityId = -2, -2
    rsp.authorizedInfo.visitAuthorizedToken = 77
    parsed = parse_master_response(4, rsp.SerializeToString())
    assert parsed.success
    assert parsed.err_code == 200
    assert parsed.not_allocated is False
    assert parsed.flow.default_check_id == 4
    assert parsed.flow.default_info == "[]"
    assert parsed.flow.group_info is None
    assert parsed.authorization == MasterAuthorization(77, None)
    flow = FlowControlState()
    assert parsed.flow.apply(flow)
    assert flow.default.check_id == 4


def test_parse_heartbeat_response_with_event() -> None:
    rsp = master_pb.HeartResponseM2C(success=True, errCode=200, errMsg="OK")
    rsp.event.rebalanceId, rsp.event.opType = 5, 2
    rsp.event.subscribeInfo.append(SUB)
    rsp.requireAuth = True
    parsed = parse_master_response(5, rsp.SerializeToString())
    assert parsed.event is not None
    assert parsed.event.op_type == 2
    assert parsed.event.partitions[0].key == KEY
    assert parsed.require_auth
    assert parsed.not_allocated is None
    failed = master_pb.HeartResponseM2C(success=False, errCode=411, errMsg="unknown")
    out = parse_master_response(5, failed.SerializeToString())
    assert (out.success, out.err_code, out.event) == (False, 411, None)


def test_parse_v2_responses() -> None:
    rsp = master_pb.RegisterResponseM2CV2(errCode=200, errMsg="OK", brokerConfigId=8)
    rsp.brokerConfigList.append("1:10.0.0.1: ")
    rsp.opsTaskInfo.groupFlowCheckId = 3
    rsp.opsTaskInfo.csmFrmMaxOffsetCtrlId = 1000
    parsed = parse_master_response(20, rsp.SerializeToString())
    assert parsed.success
    assert parsed.broker_config_id == 8
    assert parsed.broker_config_list == ("1:10.0.0.1: ",)
    assert parsed.flow.group_check_id == 3
    assert parsed.flow.max_offset_ctrl_id == 1000
    meta = master_pb.GetPartMetaResponseM2C(errCode=411, errMsg="x", topicMetaInfoId=6)
    meta.topicMetaInfoList.append("demo#1:2:3:1")
    out = parse_master_response(22, meta.SerializeToString())
    assert not out.success
    assert out.topic_meta_id == 6
    assert out.topic_meta_list == ("demo#1:2:3:1",)
    closed = parse_master_response(
        6, master_pb.CloseResponseM2C(success=True, errCode=200, errMsg="").SerializeToString()
    )
    assert closed.success
    with pytest.raises(ValueError, match="not a consumer master method"):
        parse_master_response(1, b"")
    with pytest.raises(RemoteProtocolError):
        parse_master_response(4, b"\xff\xff")


def test_parse_broker_responses() -> None:
    reg = broker_pb.RegisterResponseB2C(success=True, errCode=200, errMsg="OK", currOffset=28)
    parsed = parse_offset_response(reg.SerializeToString())
    assert (parsed.curr_offset, parsed.max_offset) == (28, -2)
    commit = broker_pb.CommitOffsetResponseB2C(success=False, errCode=401, errMsg="no")
    out = parse_offset_response(commit.SerializeToString(), commit=True)
    assert (out.success, out.err_code, out.curr_offset) == (False, 401, -2)
    hb = broker_pb.HeartBeatResponseB2C(success=True, errCode=200, errMsg="OK", hasPartFailure=True)
    hb.failureInfo.append("412:1:10.0.0.1:8123#demo:10001")
    beat = parse_broker_heartbeat_response(hb.SerializeToString())
    assert beat.failures == (
        FailureInfo(412, Partition(BrokerInfo(1, "10.0.0.1", 8123), "demo", 10001)),
    )


@pytest.mark.parametrize("parse", PARSERS)
def test_parse_get_message_response(parse: Parser) -> None:
    rsp = broker_pb.GetMessageResponseB2C(success=True, errCode=200, currOffset=280)
    rsp.messages.add(messageId=11, checkSum=123, payLoadData=b"abc", flag=1)
    rsp.maxOffset, rsp.currDataDlt, rsp.requireSlow = 560, 4096, True
    parsed = parse(rsp.SerializeToString())
    assert parsed.messages == (RawMessage(11, 123, b"abc", 1),)
    assert (parsed.curr_offset, parsed.max_offset, parsed.curr_data_dlt) == (280, 560, 4096)
    assert parsed.min_limit_time is None
    assert parsed.require_slow
    assert not parsed.esc_flow_ctrl
    limited = broker_pb.GetMessageResponseB2C(success=False, errCode=452, minLimitTime=0)
    out = parse(limited.SerializeToString())
    assert out.min_limit_time == 0
    assert out.curr_offset == -2
    assert out.curr_data_dlt == -1
    assert out.err_msg == ""
