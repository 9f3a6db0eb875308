"""Readiness answers that prove *which* node answers a port: the one this cluster started.

A port picked as free can be taken by another process before our server binds it (several
pytest-xdist workers start clusters at once). The server then fails to bind while the other
process's node answers in its place, and a readiness check that any node passes ("answers
``admin_query_server_version``", which masters and brokers both do) lets the harness carry on
against a stranger. These functions read one reply each and tell: our node, not ready yet, or
someone else (:class:`PortConflictError`, naming the port and what answered).

Facts they rely on (inlong ``server/master/web/action/screen/Webapi``,
``server/broker/web/AbstractWebHandler``, ``WebMasterInfoHandler.getGroupAddressStrInfo``):

* a broker's web API answers a method it lacks with ``errMsg`` ``"Unsupported method <name>"``;
  a master answers one with ``"Bad request from client, unsupported method!"``;
* ``admin_query_master_group_info`` is a master's only: its ``data`` lists the group's nodes, each
  with a ``port``: the BDB-JE replication port (2.x), or the master's RPC port (1.x, whose
  "ZooKeeper HA Cluster" is the master alone);
* a broker's ``admin_get_metrics_info`` item has ``nodeRole`` ``"Broker"`` and ``nodeName`` its
  configured host (a master's says ``"Master"``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tubemq_aio.testing._errors import PortConflictError
from tubemq_aio.testing._webapi import is_standby_reply

__all__ = [
    "MASTER_PROBE",
    "broker_identity",
    "master_identity",
    "zookeeper_identity",
]

#: The web API method only a master answers, whose reply names the master's ports.
MASTER_PROBE = "admin_query_master_group_info"
_BROKER_REFUSAL = "Unsupported method"

JsonObj = dict[str, Any]


def _items(reply: JsonObj) -> list[JsonObj]:
    data = reply.get("data")
    items = data if isinstance(data, list) else [data]
    return [item for item in items if isinstance(item, dict)]


def _said(reply: JsonObj) -> str:
    return f"errCode={reply.get('errCode')} errMsg={reply.get('errMsg')!r}"


def master_identity(
    reply: JsonObj,
    *,
    web_port: int,
    own_ports: tuple[int, ...],
    standby_ok: bool,
    log_file: Path | None = None,
) -> bool:
    """Read a reply to :data:`MASTER_PROBE` from the web port our master should hold.

    Args:
        reply: The decoded envelope.
        web_port: The port asked (named in the error).
        own_ports: Our master's RPC and replication ports: one of them is in the group listing.
        standby_ok: Count a standby's refusal as ours (a master of an HA group).
        log_file: Our master's log, named in the error.

    Returns:
        True when our master answers (or, with ``standby_ok``, a standby), False when the reply
        says "not ready yet" (e.g. a master still electing).

    Raises:
        PortConflictError: A broker, or a master of another group, answers on ``web_port``.
    """
    if is_standby_reply(reply):
        return standby_ok
    if not reply.get("result"):
        if str(reply.get("errMsg", "")).startswith(_BROKER_REFUSAL):
            raise PortConflictError(
                f"port {web_port}: expected this cluster's master web API, but a TubeMQ broker "
                f"answers there ({_said(reply)}): another process took the port",
                log_file,
            )
        return False
    nodes = _items(reply)
    if not nodes:
        return False  # every master lists itself: an empty listing is no one's yet
    wanted = {str(p) for p in own_ports}
    if any(str(node.get("port")) in wanted for node in nodes):
        return True
    seen = [f"{n.get('name')}@{n.get('hostName')}:{n.get('port')}" for n in nodes]
    raise PortConflictError(
        f"port {web_port}: expected this cluster's master (ports {sorted(own_ports)}), but "
        f"another master answers there (group {reply.get('groupName')!r}, nodes {seen}): "
        "another process took the port",
        log_file,
    )


def broker_identity(
    reply: JsonObj, *, web_port: int, host: str, log_file: Path | None = None
) -> bool:
    """Read a reply to ``admin_get_metrics_info`` from the web port our broker should hold.

    Args:
        reply: The decoded envelope.
        web_port: The port asked (named in the error).
        host: Our broker's configured host (``127.0.0.N``).
        log_file: Our broker's log, named in the error.

    Returns:
        True when a broker of our host answers, False when the reply says "not ready yet".

    Raises:
        PortConflictError: A master, or the broker of another host, answers on ``web_port``.
    """
    if not reply.get("result"):
        return False
    for item in _items(reply):
        role, name = item.get("nodeRole"), item.get("nodeName")
        if role == "Broker" and name == host:
            return True
        raise PortConflictError(
            f"port {web_port}: expected this cluster's broker on {host}, but a {role} named "
            f"{name!r} answers there: another process took the port",
            log_file,
        )
    return False


def zookeeper_identity(
    answer: bytes, *, port: int, data_dir: Path, log_file: Path | None = None
) -> bool:
    """Read ZooKeeper's answer to ``conf`` from the port our node should hold.

    Args:
        answer: The whole answer (``key=value`` lines).
        port: The port asked (named in the error).
        data_dir: Our node's ``dataDir``.
        log_file: Our node's output, named in the error.

    Returns:
        True when the node answering keeps its data in ``data_dir``, False on an empty or
        refused answer (still starting).

    Raises:
        PortConflictError: A ZooKeeper with another data directory answers.
    """
    text = answer.decode("utf-8", "replace")
    dirs = [
        line.partition("=")[2].strip() for line in text.splitlines() if line.startswith("dataDir=")
    ]
    if not dirs:
        return False
    if any(Path(d) == data_dir or Path(d).parent == data_dir for d in dirs):
        return True  # ZooKeeper 3.6 reports <dataDir>/version-2
    raise PortConflictError(
        f"port {port}: expected this cluster's ZooKeeper (dataDir {data_dir}), but one with "
        f"dataDir {dirs[0]} answers there: another process took the port",
        log_file,
    )
