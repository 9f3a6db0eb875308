"""Producer RPC bodies: builders of the requests and parsers of the responses (sans-I/O).

Master calls (methods 1–3, docs/protocol/wire.md §4) use the generated protobuf classes. The send
(method 13, §5.1) lives in :mod:`tubemq_aio.protocol.producer_send` (its hand-written encoder and
result parser).

Every builder returns the serialized business message, to be wrapped by
:func:`tubemq_aio.protocol.rpc.encode_request`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tubemq_aio.protocol._pbparse import parse_message
from tubemq_aio.protocol.pb import MasterService_pb2 as master_pb
from tubemq_aio.protocol.producer_master_values import (
    ClusterConfig,
    HeartbeatResponse,
    MasterAuthorization,
    MasterCertificate,
    RegisterResponse,
)

__all__ = [
    "CloseResponse",
    "build_close_request",
    "build_heartbeat_request",
    "build_register_request",
    "parse_close_response",
    "parse_heartbeat_response",
    "parse_register_response",
]


def _certificate(auth: MasterCertificate) -> master_pb.MasterCertificateInfo:
    cert = master_pb.MasterCertificateInfo()
    if auth.authenticate is not None:
        a = auth.authenticate
        cert.authInfo.userName = a.user_name
        cert.authInfo.timestamp = a.timestamp
        cert.authInfo.nonce = a.nonce
        cert.authInfo.othParams = a.oth_params
        cert.authInfo.signature = a.signature
    if auth.authorized_token is not None:
        cert.authorizedToken = auth.authorized_token
    return cert


def build_register_request(
    *,
    client_id: str,
    host_name: str,
    topics: Iterable[str],
    broker_checksum: int,
    config_id: int,
    auth: MasterCertificate | None = None,
    runtime_version: str | None = None,
) -> bytes:
    """Serialize a ``RegisterRequestP2M`` (method 1, §4.3).

    Args:
        client_id: the producer id.
        host_name: the local IPv4 address.
        topics: topics published so far (often none).
        broker_checksum: the broker-list checksum held (-1 initially).
        config_id: the ``appdConfig.configId`` held (-2 initially).
        auth: ``authInfo`` when authentication is on.
        runtime_version: optional informational ``jdkVersion`` text.
    """
    msg = master_pb.RegisterRequestP2M(
        clientId=client_id, brokerCheckSum=broker_checksum, hostName=host_name
    )
    msg.topicList.extend(topics)
    if auth is not None:
        msg.authInfo.CopyFrom(_certificate(auth))
    if runtime_version is not None:
        msg.jdkVersion = runtime_version
    msg.appdConfig.configId = config_id
    return msg.SerializeToString()


def build_heartbeat_request(
    *,
    client_id: str,
    host_name: str,
    topics: Iterable[str],
    broker_checksum: int,
    config_id: int,
    auth: MasterCertificate | None = None,
) -> bytes:
    """Serialize a ``HeartRequestP2M`` (method 2, §4.5); arguments as for register."""
    msg = master_pb.HeartRequestP2M(
        clientId=client_id, brokerCheckSum=broker_checksum, hostName=host_name
    )
    msg.topicList.extend(topics)
    if auth is not None:
        msg.authInfo.CopyFrom(_certificate(auth))
    msg.appdConfig.configId = config_id
    return msg.SerializeToString()


def build_close_request(*, client_id: str, auth: MasterCertificate | None = None) -> bytes:
    """Serialize a ``CloseRequestP2M`` (method 3, §4.9)."""
    msg = master_pb.CloseRequestP2M(clientId=client_id)
    if auth is not None:
        msg.authInfo.CopyFrom(_certificate(auth))
    return msg.SerializeToString()


_parse = parse_message


def _authorization(
    msg: master_pb.RegisterResponseM2P | master_pb.HeartResponseM2P,
) -> MasterAuthorization | None:
    if not msg.HasField("authorizedInfo"):
        return None
    info = msg.authorizedInfo
    token = info.authAuthorizedToken if info.HasField("authAuthorizedToken") else None
    return MasterAuthorization(info.visitAuthorizedToken, token)


def _config(
    msg: master_pb.RegisterResponseM2P | master_pb.HeartResponseM2P,
) -> ClusterConfig | None:
    if not msg.HasField("appdConfig"):
        return None
    cfg = msg.appdConfig
    return ClusterConfig(cfg.configId, cfg.maxMsgSize if cfg.HasField("maxMsgSize") else None)


def parse_register_response(data: bytes) -> RegisterResponse:
    """Decode a ``RegisterResponseM2P``.

    Raises:
        RemoteProtocolError: the bytes are not a valid message.
    """
    msg = _parse(master_pb.RegisterResponseM2P, data)
    return RegisterResponse(
        success=msg.success,
        err_code=msg.errCode,
        err_msg=msg.errMsg,
        broker_checksum=msg.brokerCheckSum,
        broker_infos=tuple(msg.brokerInfos),
        authorization=_authorization(msg),
        config=_config(msg),
    )


def parse_heartbeat_response(data: bytes) -> HeartbeatResponse:
    """Decode a ``HeartResponseM2P``.

    Raises:
        RemoteProtocolError: the bytes are not a valid message.
    """
    heart = _parse(master_pb.HeartResponseM2P, data)
    return HeartbeatResponse(
        success=heart.success,
        err_code=heart.errCode,
        err_msg=heart.errMsg,
        broker_checksum=heart.brokerCheckSum,
        topic_infos=tuple(heart.topicInfos),
        broker_infos=tuple(heart.brokerInfos),
        require_auth=heart.requireAuth,
        authorization=_authorization(heart),
        config=_config(heart),
    )


@dataclass(frozen=True, slots=True)
class CloseResponse:
    """A decoded ``CloseResponseM2P`` (the Java client ignores it).

    Attributes:
        success: whether the master released the producer.
        err_code: 200 on success.
        err_msg: the master's text.
    """

    success: bool
    err_code: int
    err_msg: str


def parse_close_response(data: bytes) -> CloseResponse:
    """Decode a ``CloseResponseM2P``.

    Raises:
        RemoteProtocolError: the bytes are not a valid message.
    """
    msg = _parse(master_pb.CloseResponseM2P, data)
    return CloseResponse(msg.success, msg.errCode, msg.errMsg)
