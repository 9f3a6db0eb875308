"""Whether a topic is deployed on the cluster, asked of the master without changing its state.

A producer's register and heartbeat answers never say that a topic is unknown: they list the
partitions the online brokers accept publishing on, so an unknown topic and a deployed one whose
brokers are still loading it (or are down, or a master that just restarted and has not heard
from its brokers yet) look the same, and a producer could only wait. The consumer's register does
say it: the master checks every topic against its deployed-topic set and answers 431
(docs/protocol/consumer.md §1.3, §8.1; the codes in docs/protocol/wire.md §8).

The master checks a client-balanced register (``RegisterRequestC2MV2``, method 20) in this order
(TubeMQ 1.2 to 2.4): credentials, client id, host name, group name, the master being active
(else ``StandbyException``), the topics being deployed (else 431), then ``nodeId`` within
``[0, sourceCount)`` (else 400), and only then records anything. So a V2 register with
``sourceCount = 1`` and ``nodeId = 1`` is answered 431 when a topic is not deployed and 400
otherwise, and registers nothing either way: a question with no side effect.
"""

from __future__ import annotations

import enum

from tubemq_aio.protocol.client_balance import BalanceClient, OpsTaskIds, build_register_v2
from tubemq_aio.protocol.flow_control import FlowControlState
from tubemq_aio.protocol.producer_master_values import MasterCertificate

__all__ = ["CHECK_GROUP", "Deployment", "build_deployment_check", "deployment_of"]

#: The group name of the check (never registered: the master refuses the check before that).
CHECK_GROUP = "tubemq_aio_deployment_check"
#: ``TOPIC_NOT_DEPLOYED``: the master's answer when a topic of the register is not deployed.
_NOT_DEPLOYED = 431
#: ``BAD_REQUEST``: the check passed the topic test and stopped at the node id.
_BAD_REQUEST = 400


class Deployment(enum.Enum):
    """The master's verdict on a topic."""

    #: The master answered 431: no broker has the topic in the cluster's configuration.
    NOT_DEPLOYED = "not deployed"
    #: The topic test passed: the topic is deployed (its brokers may still be loading it).
    DEPLOYED = "deployed"
    #: No verdict (refused before the topic test, e.g. credentials, or an unexpected answer).
    UNKNOWN = "unknown"


def build_deployment_check(
    *, client_id: str, host_name: str, topic: str, auth: MasterCertificate | None
) -> bytes:
    """The ``RegisterRequestC2MV2`` body that asks whether ``topic`` is deployed.

    Args:
        client_id: the asking client's id.
        host_name: its host (as in its own register).
        topic: the topic in question.
        auth: the client's register credentials, if the cluster authenticates.
    """
    # Node 1 is out of [0, 1): the master refuses the register right after the topic test.
    return build_register_v2(
        client=BalanceClient(client_id, CHECK_GROUP, host_name, source_count=1, node_id=1),
        topics=[topic],
        ops=OpsTaskIds(FlowControlState()),
        auth=auth,
    )


def deployment_of(err_code: int, success: bool) -> Deployment:
    """The verdict of a check's answer (``errCode`` and ``success`` of the register answer)."""
    if success:  # a master that does not check node ids registered the probe: it is deployed
        return Deployment.DEPLOYED
    if err_code == _NOT_DEPLOYED:
        return Deployment.NOT_DEPLOYED
    if err_code == _BAD_REQUEST:
        return Deployment.DEPLOYED
    return Deployment.UNKNOWN
