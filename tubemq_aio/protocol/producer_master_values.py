"""The plain values a producer exchanges with the master: register and heartbeat answers,
authentication and authorization values, the cluster config (docs/protocol/wire.md §4, §6).

Built and parsed by :mod:`tubemq_aio.protocol.producer_rpc`, read by the metadata state and
:mod:`tubemq_aio.auth`, so that neither depends on the generated protobuf code.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "AuthenticateInfo",
    "BrokerAuthorization",
    "ClusterConfig",
    "HeartbeatResponse",
    "MasterAuthorization",
    "MasterCertificate",
    "RegisterResponse",
]


# ---------------------------------------------------------------------------------------------
# Values exchanged with the master (built/parsed by producer_rpc, used by auth and this module)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AuthenticateInfo:
    """Full credentials for a master request (``AuthenticateInfo``, §6.1).

    Attributes:
        user_name: the user.
        timestamp: milliseconds since the epoch when signed.
        nonce: the random non-negative int that was signed.
        signature: URL-encoded Base64 HMAC-SHA1 signature (§6.2).
        oth_params: always ``""`` in the reference client.
    """

    user_name: str
    timestamp: int
    nonce: int
    signature: str
    oth_params: str = ""


@dataclass(frozen=True, slots=True)
class MasterCertificate:
    """The ``authInfo`` of a master request (``MasterCertificateInfo``): credentials or a token.

    Attributes:
        authenticate: full credentials, or ``None``.
        authorized_token: a token the master issued earlier, or ``None``.
    """

    authenticate: AuthenticateInfo | None = None
    authorized_token: str | None = None


@dataclass(frozen=True, slots=True)
class BrokerAuthorization:
    """The ``authInfo`` of every send (``AuthorizedInfo``, §5.1).

    Attributes:
        visit_token: the master's visit token (-2 before any arrived).
        auth_token: the master-issued auth token, or ``None``.
    """

    visit_token: int
    auth_token: str | None = None


@dataclass(frozen=True, slots=True)
class MasterAuthorization:
    """Tokens from a register/heartbeat response (``MasterAuthorizedInfo``).

    Attributes:
        visit_token: the current visit token.
        auth_token: an auth token if the master issued one.
    """

    visit_token: int
    auth_token: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """``appdConfig`` from the master.

    Attributes:
        config_id: id of the cluster settings; echo it in later requests.
        max_msg_size: cluster default max message size, present only when it changed for us.
    """

    config_id: int
    max_msg_size: int | None = None


@dataclass(frozen=True, slots=True)
class RegisterResponse:
    """A decoded ``RegisterResponseM2P`` (§4.4).

    Attributes:
        success: whether the master accepted the registration.
        err_code: 200 on success, else a TubeMQ error code.
        err_msg: the master's text.
        broker_checksum: the master's broker-list checksum.
        broker_infos: the full broker list as ``brokerId:host:port`` strings.
        authorization: tokens, if sent.
        config: cluster config, if sent.
    """

    success: bool
    err_code: int
    err_msg: str
    broker_checksum: int
    broker_infos: tuple[str, ...] = ()
    authorization: MasterAuthorization | None = None
    config: ClusterConfig | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    """A decoded ``HeartResponseM2P`` (§4.5).

    Attributes:
        success: whether the heartbeat was accepted.
        err_code: 200 ok, 411 = register again, 201 = not ready.
        err_msg: the master's text.
        broker_checksum: the master's broker-list checksum.
        topic_infos: one entry per published topic with writable partitions.
        broker_infos: the broker list, sent only when our checksum differed.
        require_auth: the next master request must carry full credentials.
        authorization: tokens, if sent.
        config: cluster config, if sent.
    """

    success: bool
    err_code: int
    err_msg: str
    broker_checksum: int
    topic_infos: tuple[str, ...] = ()
    broker_infos: tuple[str, ...] = ()
    require_auth: bool = False
    authorization: MasterAuthorization | None = None
    config: ClusterConfig | None = None
