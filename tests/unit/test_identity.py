"""Readiness replies that tell our node from another on its port (tubemq_aio.testing._identity).

The replies are the servers' own, as captured from tubemq-server 2.4.0 and 1.2.0-incubating
(a broker answering the master's probe is the reply that failed CI: the 1.2.0 master's web port
was served by another cluster's broker).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tubemq_aio.testing import PortConflictError, PortInUseError
from tubemq_aio.testing._identity import broker_identity, master_identity, zookeeper_identity

LOG = Path("master.log")


def _group(name: str, port: int, group: str = "tubemqAioGroup") -> dict[str, Any]:
    node = {"index": 1, "name": name, "hostName": "127.0.0.1", "port": str(port)}
    return {
        "result": True,
        "errCode": 0,
        "errMsg": "Ok",
        "groupName": group,
        "data": [{**node, "statusInfo": {"nodeStatus": "MASTER", "joinTime": "0"}}],
        "count": 1,
    }


BROKER_REFUSAL = {
    "result": False,
    "errCode": 400,
    "errMsg": "Unsupported method admin_query_master_group_info",
}


def _master(reply: dict[str, Any], *, standby_ok: bool = False) -> bool:
    return master_identity(
        reply, web_port=4242, own_ports=(8715, 9001), standby_ok=standby_ok, log_file=LOG
    )


def test_a_broker_on_the_masters_web_port_is_a_conflict() -> None:
    with pytest.raises(PortConflictError) as info:
        _master(BROKER_REFUSAL)
    text = str(info.value)
    assert "port 4242" in text
    assert "broker answers there" in text
    assert "Unsupported method admin_query_master_group_info" in text
    assert info.value.log_file == LOG
    assert isinstance(info.value, PortInUseError)  # a port error to callers that catch those


def test_another_clusters_master_is_a_conflict() -> None:
    with pytest.raises(PortConflictError, match=r"port 4242: .* another master answers"):
        _master(_group("tubemqAioNode1", 7777))


@pytest.mark.parametrize(
    "reply",
    [
        _group("tubemqAioNode1", 9001),  # 2.x: the replication port
        _group("127.0.0.1:8715", 8715, "ZooKeeper HA Cluster"),  # 1.x: the RPC port
    ],
)
def test_our_master_is_ready(reply: dict[str, Any]) -> None:
    assert _master(reply)


@pytest.mark.parametrize(
    "reply",
    [
        {"result": False, "errCode": 500, "errMsg": "GetBrokerGroup info error"},
        {"result": False, "errCode": 400, "errMsg": "Bad request from client, Server is stopping"},
        {"result": True, "errCode": 0, "errMsg": "Ok", "data": "not a list"},
    ],
)
def test_a_master_not_ready_yet_is_polled_again(reply: dict[str, Any]) -> None:
    assert not _master(reply)


def test_a_standby_counts_only_in_a_group() -> None:
    standby = {
        "result": False,
        "errCode": 400,
        "errMsg": "Bad request from client, Please send your request to the master Node.",
    }
    assert not _master(standby)
    assert _master(standby, standby_ok=True)


def _metrics(role: str, name: str) -> dict[str, Any]:
    return {
        "result": True,
        "errCode": 0,
        "errMsg": "OK",
        "data": [{"nodeName": name, "nodeRole": role}],
    }


def _broker(reply: dict[str, Any]) -> bool:
    return broker_identity(reply, web_port=5151, host="127.0.0.2", log_file=LOG)


def test_broker_identity() -> None:
    assert _broker(_metrics("Broker", "127.0.0.2"))
    assert not _broker(BROKER_REFUSAL)  # not our question's answer: still starting
    with pytest.raises(PortConflictError, match=r"port 5151: .* a Master named '127\.0\.0\.1'"):
        _broker(_metrics("Master", "127.0.0.1"))
    with pytest.raises(PortConflictError, match=r"a Broker named '127\.0\.0\.3'"):
        _broker(_metrics("Broker", "127.0.0.3"))


def test_zookeeper_identity(tmp_path: Path) -> None:
    ours = tmp_path / "zookeeper" / "data"
    conf = f"clientPort=2181\ndataDir={ours}/version-2\ntickTime=2000\n".encode()
    assert zookeeper_identity(conf, port=2181, data_dir=ours)
    refused = b"conf is not executed because it is not in the whitelist.\n"
    assert not zookeeper_identity(refused, port=2181, data_dir=ours)
    assert not zookeeper_identity(b"", port=2181, data_dir=ours)
    theirs = b"clientPort=2181\ndataDir=/elsewhere/zookeeper/data/version-2\n"
    with pytest.raises(PortConflictError, match=r"port 2181: .*dataDir /elsewhere"):
        zookeeper_identity(theirs, port=2181, data_dir=ours)
