"""The reference SendMessage request, built through the generated protobuf class as the Java
client sets it: what the hand-made and compiled encoders are compared with."""

from __future__ import annotations

from tubemq_aio.protocol.message import EncodedMessage
from tubemq_aio.protocol.pb import BrokerService_pb2 as broker_pb
from tubemq_aio.protocol.producer_master_values import BrokerAuthorization


def build_send_request(
    *,
    client_id: str,
    topic: str,
    partition_id: int,
    message: EncodedMessage,
    sent_addr: int,
    auth: BrokerAuthorization,
) -> bytes:
    """Reference: the same request through the generated class, set like the Java client."""
    msg = broker_pb.SendMessageRequestP2B(
        clientId=client_id,
        topicName=topic,
        partitionId=partition_id,
        data=message.data,
        flag=message.flag,
        checkSum=-1,
        sentAddr=sent_addr,
    )
    if message.msg_type:
        msg.msgType = message.msg_type
    if message.msg_time:
        msg.msgTime = message.msg_time
    msg.authInfo.visitAuthorizedToken = auth.visit_token
    if auth.auth_token:
        msg.authInfo.authAuthorizedToken = auth.auth_token
    return msg.SerializeToString()
