"""Producer RPC bodies: hand-built bytes, cross-checks with the generated classes, parsers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from tests.support.send_requests import build_send_request
from tubemq_aio.errors import (
    ConfigError,
    LocalProtocolError,
    RemoteProtocolError,
    ServiceUnavailableError,
)
from tubemq_aio.protocol.client_id import make_client_id
from tubemq_aio.protocol.framing import FrameDecoder, encode_frame
from tubemq_aio.protocol.message import EncodedMessage, encode_message, ip_to_int
from tubemq_aio.protocol.pb import BrokerService_pb2 as broker_pb
from tubemq_aio.protocol.pb import MasterService_pb2 as master_pb
from tubemq_aio.protocol.producer_master_values import (
    AuthenticateInfo,
    BrokerAuthorization,
    ClusterConfig,
    MasterAuthorization,
    MasterCertificate,
)
from tubemq_aio.protocol.producer_meta import Broker, Partition
from tubemq_aio.protocol.producer_rpc import (
    build_close_request,
    build_heartbeat_request,
    build_register_request,
    parse_close_response,
    parse_heartbeat_response,
    parse_register_response,
)
from tubemq_aio.protocol.producer_send import SendRequestEncoder, SendResult, parse_send_result
from tubemq_aio.protocol.rpc import decode_request, encode_request

NEG1 = bytes.fromhex("ff ff ff ff ff ff ff ff ff 01")  # int32/int64 -1 as a protobuf varint


def test_send_request_hand_bytes() -> None:
    # clientId "c", topic "t", partition 2, data "hi", flag 0, checkSum -1, sentAddr 10.0.0.1,
    # authInfo{visitAuthorizedToken=-2}.
    sent_addr = ip_to_int("10.0.0.1")  # 0x0A000001 = 167772161 -> varint 81 80 80 50
    expected = (
        b"\x0a\x01c"
        + b"\x12\x01t"
        + b"\x18\x02"
        + b"\x22\x02hi"
        + b"\x28\x00"
        + b"\x30"
        + NEG1
        + b"\x38\x81\x80\x80\x50"
        + b"\x52\x0b\x08"
        + bytes.fromhex("fe ff ff ff ff ff ff ff ff 01")
    )
    msg = EncodedMessage(b"hi", 0, "", "")
    auth = BrokerAuthorization(-2)
    encoder = SendRequestEncoder("c", sent_addr)
    assert encoder.encode("t", 2, msg, auth) == expected
    assert (
        build_send_request(
            client_id="c", topic="t", partition_id=2, message=msg, sent_addr=sent_addr, auth=auth
        )
        == expected
    )


def test_send_request_with_type_time_and_tokens() -> None:
    msg = encode_message(b"body", msg_type="tp", msg_time="202401011200", attributes={"a": "b"})
    auth = BrokerAuthorization(123, "tok")
    encoder = SendRequestEncoder("client-1", ip_to_int("192.168.1.10"))
    got = encoder.encode("topic", 10001, msg, auth)
    parsed = broker_pb.SendMessageRequestP2B.FromString(got)
    assert parsed.clientId == "client-1"
    assert parsed.topicName == "topic"
    assert parsed.partitionId == 10001
    assert parsed.data == msg.data
    assert parsed.flag == 1
    assert parsed.checkSum == -1
    assert parsed.sentAddr == -1062731510
    assert (parsed.msgType, parsed.msgTime) == ("tp", "202401011200")
    assert parsed.authInfo.visitAuthorizedToken == 123
    assert parsed.authInfo.authAuthorizedToken == "tok"
    assert parsed.IsInitialized()


@settings(max_examples=examples(200), deadline=None)
@given(
    client_id=st.text(min_size=1, max_size=40),
    topic=st.text(min_size=1, max_size=64),
    partition_id=st.integers(0, 2**31 - 1),
    data=st.binary(min_size=1, max_size=300),
    flag=st.integers(0, 5),
    sent_addr=st.integers(-(2**31), 2**31 - 1),
    msg_type=st.text(max_size=10),
    msg_time=st.sampled_from(["", "202401011200"]),
    visit=st.integers(-(2**63), 2**63 - 1),
    token=st.none() | st.text(max_size=20),
)
def test_encoder_matches_generated_class(
    client_id: str,
    topic: str,
    partition_id: int,
    data: bytes,
    flag: int,
    sent_addr: int,
    msg_type: str,
    msg_time: str,
    visit: int,
    token: str | None,
) -> None:
    msg = EncodedMessage(data, flag, msg_type, msg_time)
    auth = BrokerAuthorization(visit, token)
    encoder = SendRequestEncoder(client_id, sent_addr)
    fast = encoder.encode(topic, partition_id, msg, auth)
    assert encoder.encode(topic, partition_id, msg, auth) == fast  # cached path
    reference = build_send_request(
        client_id=client_id,
        topic=topic,
        partition_id=partition_id,
        message=msg,
        sent_addr=sent_addr,
        auth=auth,
    )
    assert fast == reference
    # The envelope-included pieces of the hot path: the same request, wrapped as encode_request
    # wraps it, for any timeout and data size, and again after a cached head is reused.
    for timeout_ms in (1, 3000, 2**31 - 1):
        for _ in range(2):
            head, body, tail, size = encoder.encode_parts(
                topic, partition_id, msg, auth, timeout_ms
            )
            assert body is data
            assert size == len(head) + len(body) + len(tail)
            assert head + body + tail == encode_request(3, 13, timeout_ms, reference)


def test_encode_parts_follows_a_new_authorization() -> None:
    encoder = SendRequestEncoder("c", 0)
    msg = EncodedMessage(b"x" * 1024, 0, "", "")
    for auth in (BrokerAuthorization(1), BrokerAuthorization(300, "token"), BrokerAuthorization(1)):
        head, body, tail, _ = encoder.encode_parts("t", 1, msg, auth, 5000)
        parsed = broker_pb.SendMessageRequestP2B.FromString(decode_request(head + body + tail).body)
        assert parsed.authInfo.visitAuthorizedToken == auth.visit_token
        assert parsed.data == msg.data


def test_encode_parts_refuses_a_zero_timeout() -> None:
    encoder = SendRequestEncoder("c", 0)
    with pytest.raises(LocalProtocolError):
        encoder.encode_parts("t", 1, EncodedMessage(b"x", 0, "", ""), BrokerAuthorization(1), 0)


FULL_AUTH = MasterCertificate(authenticate=AuthenticateInfo("u", 5, 6, "sig"))


def test_register_request() -> None:
    raw = build_register_request(
        client_id="cid",
        host_name="10.0.0.1",
        topics=["a", "b"],
        broker_checksum=-1,
        config_id=-2,
        auth=FULL_AUTH,
        runtime_version="CPython 3.11",
    )
    msg = master_pb.RegisterRequestP2M.FromString(raw)
    assert msg.IsInitialized()
    assert (msg.clientId, msg.hostName, list(msg.topicList)) == ("cid", "10.0.0.1", ["a", "b"])
    assert msg.brokerCheckSum == -1
    assert msg.appdConfig.configId == -2
    assert not msg.appdConfig.HasField("maxMsgSize")
    assert msg.authInfo.authInfo.userName == "u"
    assert msg.authInfo.authInfo.othParams == ""
    assert not msg.authInfo.HasField("authorizedToken")
    assert msg.jdkVersion == "CPython 3.11"


def test_register_request_hand_bytes_minimal() -> None:
    raw = build_register_request(
        client_id="c", host_name="h", topics=[], broker_checksum=5, config_id=3
    )
    # clientId, brokerCheckSum, hostName, appdConfig{configId=3}; no authInfo.
    assert raw == b"\x0a\x01c" + b"\x18\x05" + b"\x22\x01h" + b"\x3a\x02\x08\x03"


def test_heartbeat_request_with_token() -> None:
    raw = build_heartbeat_request(
        client_id="c",
        host_name="h",
        topics=["t"],
        broker_checksum=9,
        config_id=4,
        auth=MasterCertificate(authorized_token="tok"),
    )
    msg = master_pb.HeartRequestP2M.FromString(raw)
    assert msg.IsInitialized()
    assert (msg.brokerCheckSum, list(msg.topicList), msg.appdConfig.configId) == (9, ["t"], 4)
    assert msg.authInfo.authorizedToken == "tok"
    assert not msg.authInfo.HasField("authInfo")


def test_close_request() -> None:
    assert build_close_request(client_id="c") == b"\x0a\x01c"
    msg = master_pb.CloseRequestP2M.FromString(build_close_request(client_id="c", auth=FULL_AUTH))
    assert msg.authInfo.authInfo.signature == "sig"


def test_parse_register_response() -> None:
    raw = master_pb.RegisterResponseM2P(
        success=True,
        errCode=200,
        errMsg="OK!",
        brokerCheckSum=42,
        brokerInfos=["1:h:8123", "2:h: "],
        authorizedInfo=master_pb.MasterAuthorizedInfo(visitAuthorizedToken=99),
        appdConfig=master_pb.ApprovedClientConfig(configId=3, maxMsgSize=2048),
    ).SerializeToString()
    resp = parse_register_response(raw)
    assert resp.success
    assert (resp.err_code, resp.err_msg) == (200, "OK!")
    assert resp.broker_checksum == 42
    assert resp.broker_infos == ("1:h:8123", "2:h: ")
    assert resp.authorization == MasterAuthorization(99, None)
    assert resp.config == ClusterConfig(3, 2048)


def test_parse_heartbeat_response_hand_bytes() -> None:
    raw = (
        b"\x08\x01"  # success
        + b"\x10\xc8\x01"  # errCode 200
        + b"\x1a\x02OK"
        + b"\x20\x07"  # brokerCheckSum 7
        + b"\x2a\x08t#1:1:1#"  # topicInfos
        + b"\x38\x01"  # requireAuth
        + b"\x42\x07\x08\x05\x12\x03abc"  # authorizedInfo{5, "abc"}
        + b"\x4a\x02\x08\x06"  # appdConfig{configId=6}
    )
    resp = parse_heartbeat_response(raw)
    assert resp.success
    assert resp.err_code == 200
    assert resp.topic_infos == ("t#1:1:1#",)
    assert resp.broker_infos == ()
    assert resp.require_auth
    assert resp.authorization == MasterAuthorization(5, "abc")
    assert resp.config == ClusterConfig(6, None)


def test_parse_close_response() -> None:
    resp = parse_close_response(b"\x08\x00\x10\x93\x03\x1a\x01x")
    assert (resp.success, resp.err_code, resp.err_msg) == (False, 403, "x")


@pytest.mark.parametrize(
    "parser", [parse_register_response, parse_heartbeat_response, parse_close_response]
)
def test_garbage_response(parser: object) -> None:
    with pytest.raises(RemoteProtocolError):
        parser(b"\xff\xff\xff")  # type: ignore[operator]


PARTITION = Partition(Broker(3, "h", 8123), "topic", 10002)


def test_send_response_to_result() -> None:
    raw = b"\x08\x01\x10\xc8\x01\x1a\x0212\x28\x0c\x30\x90\x4e\x38\x38"
    assert parse_send_result(raw, PARTITION) == SendResult(
        "topic", "3:topic:10002", 10002, 3, 12, 10000, 56
    )


def test_send_response_old_broker_message_id_from_errmsg() -> None:
    result = parse_send_result(b"\x08\x01\x10\xc8\x01\x1a\x03987", PARTITION)
    assert (result.message_id, result.append_time, result.append_offset) == (987, -1, -1)
    result = parse_send_result(b"\x08\x01\x10\xc8\x01\x1a\x02OK", PARTITION)
    assert result.message_id == -1


def test_send_response_zero_values_present_are_not_absent() -> None:
    # messageId, appendTime and appendOffset sent as 0: kept as 0, not taken for missing (-1).
    raw = b"\x08\x01\x10\xc8\x01\x1a\x0277\x28\x00\x30\x00\x38\x00"
    result = parse_send_result(raw, PARTITION)
    assert (result.message_id, result.append_time, result.append_offset) == (0, 0, 0)


def test_send_response_success_is_err_code_200() -> None:
    # success=true but errCode 503: Java treats it as a failure.
    with pytest.raises(ServiceUnavailableError) as info:
        parse_send_result(b"\x08\x01\x10\xf7\x03\x1a\x04down", PARTITION)
    assert info.value.err_code == 503
    assert info.value.err_msg == "down"


def test_send_response_garbage() -> None:
    with pytest.raises(RemoteProtocolError):
        parse_send_result(b"\xff\xff\xff", PARTITION)


def test_client_id_shape() -> None:
    cid = make_client_id("10.1.2.3", 12345, 98765432101234, -1234567890, "tubemq-aio-0.1.0")
    assert cid == "10.1.2.3-12345-98765432101234-1234567890-tubemq-aio-0.1.0"
    consumer = make_client_id("10.1.2.3", 1, 2, 3, "tubemq-aio-0.1.0", group="g_1", kind="Pull")
    assert consumer == "g_1_10.1.2.3-1-2-3-Pull-tubemq-aio-0.1.0"
    assert consumer.rpartition("_")[0] == "g_1"  # the broker splits at the last "_"


@pytest.mark.parametrize(("ip", "version"), [("", "v"), ("1.2.3.4", " "), ("1.2.3.4", "v" * 1024)])
def test_client_id_rejects(ip: str, version: str) -> None:
    with pytest.raises(ConfigError):
        make_client_id(ip, 1, 2, 3, version)


def test_send_frame_end_to_end() -> None:
    # The benchmark's chain, decoded back the way a broker would read it.
    body = bytes(range(256)) * 40  # 10 KiB: more than one 8192-byte block
    msg = encode_message(body, msg_type="t", attributes={"k": "v"})
    encoder = SendRequestEncoder("cid", ip_to_int("10.0.0.1"))
    req = encoder.encode("topic", 1, msg, BrokerAuthorization(5, None))
    frame = encode_frame(77, encode_request(3, 13, 10_000, req))
    (decoded,) = FrameDecoder().feed(frame)
    assert decoded.serial_no == 77
    rpc_req = decode_request(decoded.payload)
    assert (rpc_req.service_type, rpc_req.method, rpc_req.timeout_ms) == (3, 13, 10_000)
    parsed = broker_pb.SendMessageRequestP2B.FromString(rpc_req.body)
    assert parsed.data == msg.data
    assert parsed.data.endswith(body)
    assert parsed.msgType == "t"
