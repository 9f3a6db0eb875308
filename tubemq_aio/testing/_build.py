"""Lay out a cluster on disk: ports, config files, node objects; register the brokers."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tubemq_aio.testing._config import (
    BrokerLayout,
    MasterLayout,
    MasterSettings,
    render_broker_ini,
    render_log4j2,
    render_master_ini,
    write_web_templates,
)
from tubemq_aio.testing._errors import PortInUseError
from tubemq_aio.testing._nodes import BrokerNode, MasterNode
from tubemq_aio.testing._ports import allocate_ports, is_port_free
from tubemq_aio.testing._webapi import MasterWebApi

__all__ = ["BROKER_HOSTS", "NodePlan", "build_nodes", "prepare_work_dir", "register_brokers"]

#: Broker N listens on BROKER_HOSTS[N-1]: the master refuses two brokers with one IP.
BROKER_HOSTS = ("127.0.0.1", "127.0.0.2")
MASTER_HEAP = ("-Xms128m", "-Xmx512m", "-XX:+UseSerialGC")
BROKER_HEAP = ("-Xms256m", "-Xmx1g", "-XX:MaxDirectMemorySize=1g", "-XX:+UseParallelGC")


@dataclass(frozen=True)
class NodePlan:
    """What :func:`build_nodes` needs besides the settings."""

    work_dir: Path
    lib_dir: Path
    java: str
    brokers: int
    master_port: int | None
    master_web_port: int | None
    detached: bool


def prepare_work_dir(work_dir: Path | None) -> Path:
    """Create the work dir (a fresh temp dir if None), its ``logs`` dir and the log4j2 config.

    Args:
        work_dir: Requested directory or None.

    Returns:
        The absolute work dir.
    """
    if work_dir is not None:
        root = work_dir.resolve()
        root.mkdir(parents=True, exist_ok=True)
    else:
        root = Path(tempfile.mkdtemp(prefix="tubemq-aio-cluster-")).resolve()
    (root / "logs").mkdir(parents=True, exist_ok=True)
    (root / "log4j2.xml").write_text(render_log4j2(), encoding="utf-8")
    return root


def build_nodes(s: MasterSettings, plan: NodePlan) -> tuple[MasterNode, list[BrokerNode]]:
    """Allocate ports, write master.ini / broker.ini / templates and build the node objects.

    Args:
        s: Master settings.
        plan: Directories, executables, broker count and fixed ports.

    Returns:
        The master and the brokers (not started).

    Raises:
        PortInUseError: If a fixed port is taken.
    """
    log_dir = plan.work_dir / "logs"
    hosts = BROKER_HOSTS[: plan.brokers]
    fixed = [p for p in (plan.master_port, plan.master_web_port) if p is not None]
    for port in fixed:
        if not is_port_free(port, hosts):
            raise PortInUseError(
                f"port {port} requested for the master is already in use by another process",
                log_dir / "master.log",
            )
    free = allocate_ports(3 + 4 * plan.brokers + (2 - len(fixed)), hosts)
    port = plan.master_port or free.pop()
    web_port = plan.master_web_port or free.pop()
    m_home = plan.work_dir / "master"
    m_home.mkdir(exist_ok=True)
    mlay = MasterLayout("127.0.0.1", port, web_port, free.pop(), free.pop(), free.pop(), m_home)
    write_web_templates(m_home)
    (m_home / "master.ini").write_text(render_master_ini(s, mlay), encoding="utf-8")
    common: dict[str, Any] = {
        "java": plan.java,
        "classpath": str(plan.lib_dir / "*"),
        "log_dir": log_dir,
        "log4j_conf": plan.work_dir / "log4j2.xml",
        "detached": plan.detached,
    }
    api = MasterWebApi(mlay.host, web_port, s.conf_mod_auth_token, log_dir / "master.log")
    master = MasterNode(mlay, api, heap=list(MASTER_HEAP), **common)
    brokers = []
    for idx, host in enumerate(hosts, start=1):
        b_home = plan.work_dir / f"broker{idx}"
        b_home.mkdir(exist_ok=True)
        blay = BrokerLayout(idx, host, free.pop(), free.pop(), free.pop(), free.pop(), b_home)
        ini = render_broker_ini(s, blay, master.addr)
        (b_home / "broker.ini").write_text(ini, encoding="utf-8")
        brokers.append(BrokerNode(blay, api, heap=list(BROKER_HEAP), **common))
    return master, brokers


async def register_brokers(s: MasterSettings, api: MasterWebApi, brokers: list[BrokerNode]) -> None:
    """Add a master record for every broker and set them online (each item checked).

    Args:
        s: Master settings (TLS decides the TLS port recorded).
        api: Master web API.
        brokers: The brokers.
    """
    for b in brokers:
        lay = b.layout
        await api.call(
            "admin_add_broker_configure",
            modify=True,
            brokerId=lay.broker_id,
            brokerIp=lay.host,
            brokerPort=lay.port,
            brokerWebPort=lay.web_port,
            brokerTLSPort=lay.reported_tls_port(s.tls),
        )
    ids = [b.broker_id for b in brokers]
    await api.call("admin_online_broker_configure", modify=True, brokerId=ids)
