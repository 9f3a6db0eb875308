"""Lay out a cluster on disk: ports, config files, node objects; register the brokers."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

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
from tubemq_aio.testing._nodes import BrokerNode, JvmLaunch, MasterNode
from tubemq_aio.testing._ports import PortLease, is_port_free
from tubemq_aio.testing._webapi import MasterWebApi

__all__ = [
    "BROKER_HOSTS",
    "MAX_MASTERS",
    "NodePlan",
    "build_nodes",
    "prepare_work_dir",
    "register_brokers",
    "set_aside_attempt",
]

#: Broker N listens on BROKER_HOSTS[N-1]: the master refuses two brokers with one IP.
BROKER_HOSTS = ("127.0.0.1", "127.0.0.2", "127.0.0.3")
#: Most masters of one HA group (one active, the others standing by).
MAX_MASTERS = 3
#: Every master listens here: each has its own ports (its RPC and web listeners bind the
#: wildcard address, so another IP would not spare a port).
_MASTER_HOST = "127.0.0.1"
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
    masters: int = 1


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


def set_aside_attempt(work_dir: Path, attempt: int) -> None:
    """Clear the work dir after a start that lost a port race, before a retry on fresh ports.

    The failed attempt's logs move to ``logs-attempt<N>`` (kept for reading); the node
    directories (configs, BDB and ZooKeeper data naming the old ports) are removed.

    Args:
        work_dir: The cluster's work dir.
        attempt: Number of the failed attempt (1 for the first).
    """
    logs, kept = work_dir / "logs", work_dir / f"logs-attempt{attempt}"
    if logs.is_dir():
        shutil.rmtree(kept, ignore_errors=True)  # left by an earlier run in a given work dir
        logs.rename(kept)
    for child in work_dir.iterdir():
        if child.is_dir() and child.name.startswith(("master", "broker", "zookeeper")):
            shutil.rmtree(child, ignore_errors=True)


def build_nodes(
    s: MasterSettings, plan: NodePlan, lease: PortLease
) -> tuple[list[MasterNode], list[BrokerNode], MasterWebApi]:
    """Allocate ports, write master.ini / broker.ini / templates and build the node objects.

    With several masters each gets its own ports and directory (``master<N>``); all share one
    BDB-JE replication group, master 1 founding it and the others joining through it. The
    fixed ports, if any, are master 1's.

    Args:
        s: Master settings.
        plan: Directories, executables, master and broker counts and fixed ports.
        lease: Takes (and reserves across processes) every port, the fixed ones included;
            the cluster releases it when it stops.

    Returns:
        The masters and the brokers (not started), and the web API client of the group (it
        follows the active master).

    Raises:
        PortInUseError: If a fixed port is taken, or reserved by another process.
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
    try:
        lease.claim(fixed)
    except OSError as exc:
        raise PortInUseError(f"{exc.strerror or exc}", log_dir / "master.log") from exc
    free = lease.take(5 * plan.masters + 4 * plan.brokers - len(fixed), hosts)
    layouts = _master_layouts(plan, free)
    launch = JvmLaunch(
        plan.java, str(plan.lib_dir / "*"), log_dir, plan.work_dir / "log4j2.xml", plan.detached
    )
    token = s.conf_mod_auth_token
    masters = []
    for idx, mlay in enumerate(layouts, start=1):
        name = "master" if plan.masters == 1 else f"master{idx}"
        write_web_templates(mlay.home)
        (mlay.home / "master.ini").write_text(render_master_ini(s, mlay), encoding="utf-8")
        own = MasterWebApi(mlay.host, mlay.web_port, token, log_dir / f"{name}.log")
        masters.append(MasterNode(mlay, own, launch, heap=list(MASTER_HEAP), name=name))
    first = layouts[0]
    others = [(m.host, m.web_port) for m in layouts[1:]]
    group_api = MasterWebApi(
        first.host, first.web_port, token, masters[0].log_file, standbys=others
    )
    master_addrs = ",".join(m.addr for m in masters)
    brokers = []
    for idx, host in enumerate(hosts, start=1):
        b_home = plan.work_dir / f"broker{idx}"
        b_home.mkdir(exist_ok=True)
        blay = BrokerLayout(idx, host, free.pop(), free.pop(), free.pop(), free.pop(), b_home)
        ini = render_broker_ini(s, blay, master_addrs)
        (b_home / "broker.ini").write_text(ini, encoding="utf-8")
        brokers.append(BrokerNode(blay, group_api, launch, heap=list(BROKER_HEAP)))
    return masters, brokers, group_api


def _master_layouts(plan: NodePlan, free: list[int]) -> list[MasterLayout]:
    layouts: list[MasterLayout] = []
    for idx in range(1, plan.masters + 1):
        first = idx == 1
        port = (plan.master_port if first else None) or free.pop()
        web_port = (plan.master_web_port if first else None) or free.pop()
        home = plan.work_dir / ("master" if plan.masters == 1 else f"master{idx}")
        home.mkdir(exist_ok=True)
        ha_port, prom_port, tls_port = free.pop(), free.pop(), free.pop()
        # Master 1 founds the group (its helper is itself); the others join through it.
        helpers = f"{_MASTER_HOST}:{ha_port}" if first else layouts[0].ha_addr
        layouts.append(
            MasterLayout(
                _MASTER_HOST,
                port,
                web_port,
                ha_port,
                prom_port,
                tls_port,
                home,
                node_name=f"tubemqAioNode{idx}",
                helpers=helpers,
            )
        )
    return layouts


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
