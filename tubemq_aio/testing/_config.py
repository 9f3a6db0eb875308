"""Settings of a local cluster and the files rendered from them (ini files, log config)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "AuthSettings",
    "BrokerLayout",
    "MasterLayout",
    "MasterSettings",
    "TlsSettings",
    "render_broker_ini",
    "render_log4j2",
    "render_master_ini",
    "write_web_templates",
]

#: TLS port a broker reports to the master when TLS is off (a fixed server default).
BROKER_DEFAULT_TLS_PORT = 8124


@dataclass(frozen=True)
class TlsSettings:
    """Server-side TLS (an extra listener; the plain ports stay open).

    Attributes:
        keystore: JKS (or PKCS12) key store holding the server key and certificate.
        password: Store password; the server also uses it as the key password.
        truststore: Trust store (client certificates for two-way TLS). Give one even for
            one-way TLS: the 2.4.0 server opens it on every TLS accept and exits if it is unset.
        truststore_password: Password of ``truststore``.
        two_way: Require client certificates.
    """

    keystore: Path
    password: str
    truststore: Path | None = None
    truststore_password: str = ""
    two_way: bool = False


@dataclass(frozen=True)
class AuthSettings:
    """Master authentication switches (see docs/local-cluster.md for what the stock server checks).

    Attributes:
        produce_authenticate: ``startProduceAuthenticate``.
        produce_authorize: ``startProduceAuthorize`` (needs ``produce_authenticate``).
        consume_authenticate: ``startConsumeAuthenticate``.
        consume_authorize: ``startConsumeAuthorize`` (needs ``consume_authenticate``).
        visit_token_check: ``startVisitTokenCheck`` (brokers check the master's visit tokens).
        broker_visit_name: If set, brokers must authenticate to the master with this name.
        broker_visit_password: Password paired with ``broker_visit_name``.
        timestamp_period_ms: ``authValidTimeStampPeriodMs`` (allowed clock skew of signatures).
    """

    produce_authenticate: bool = False
    produce_authorize: bool = False
    consume_authenticate: bool = False
    consume_authorize: bool = False
    visit_token_check: bool = False
    broker_visit_name: str = ""
    broker_visit_password: str = ""
    timestamp_period_ms: int = 20000


@dataclass(frozen=True)
class MasterSettings:
    """Master tuning knobs exposed as :class:`LocalCluster` keyword options.

    Attributes:
        consumer_balance_period_ms: Server-side rebalance cycle (server default 60000).
        consumer_heartbeat_timeout_ms: Consumer considered dead after this long.
        producer_heartbeat_timeout_ms: Producer considered dead after this long.
        broker_heartbeat_timeout_ms: Broker considered dead after this long.
        broker_heartbeat_period_ms: Broker -> master heartbeat (drives topic publish speed).
        conf_mod_auth_token: Token required by modifying web API calls.
        auth: Authentication switches.
        tls: Server TLS, or None for plain TCP only.
        zookeeper: ``host:port`` of a ZooKeeper node, for servers 1.x: the master keeps its
            metadata there (``[meta_zookeeper]`` instead of ``[meta_bdb]``) and brokers their
            consumer offsets (their mandatory ``[zookeeper]`` section). Empty: BDB-JE, no
            ZooKeeper (2.x).
    """

    consumer_balance_period_ms: int = 2000
    consumer_heartbeat_timeout_ms: int = 30000
    producer_heartbeat_timeout_ms: int = 45000
    broker_heartbeat_timeout_ms: int = 25000
    broker_heartbeat_period_ms: int = 2000
    conf_mod_auth_token: str = "tubemq-aio"
    auth: AuthSettings = field(default_factory=AuthSettings)
    tls: TlsSettings | None = None
    zookeeper: str = ""


@dataclass(frozen=True)
class MasterLayout:
    """Where one master lives: host, ports, directory and its place in the HA group.

    Attributes:
        host: Address the master reports and its BDB-JE replication listener binds.
        port: RPC port (bound on the wildcard address).
        web_port: HTTP admin API port.
        ha_port: BDB-JE replication port (``repNodePort``), bound on ``host`` only.
        prom_port: Prometheus port (unused, see :func:`render_master_ini`).
        tls_port: TLS RPC port (used only with TLS on).
        home: The master's directory (ini, templates, metadata).
        node_name: ``repNodeName``, unique within the group.
        helpers: ``repHelperHost``: ``host:port`` of the replication listeners this master asks
            to join the group. The first master of a new group names only itself.
    """

    host: str
    port: int
    web_port: int
    ha_port: int
    prom_port: int
    tls_port: int
    home: Path
    node_name: str = "tubemqAioNode1"
    helpers: str = ""

    @property
    def ha_addr(self) -> str:
        """``host:port`` of this master's BDB-JE replication listener."""
        return f"{self.host}:{self.ha_port}"


@dataclass(frozen=True)
class BrokerLayout:
    """Where one broker lives: id, host, ports and directories."""

    broker_id: int
    host: str
    port: int
    web_port: int
    prom_port: int
    tls_port: int
    home: Path

    def reported_tls_port(self, tls: TlsSettings | None) -> int:
        """Return the TLS port this broker reports at registration.

        Args:
            tls: The cluster's TLS settings.

        Returns:
            ``tls_port`` with TLS on, else the server's fixed default 8124 (not listened on).
        """
        return self.tls_port if tls is not None else BROKER_DEFAULT_TLS_PORT


def _b(flag: bool) -> str:
    return "true" if flag else "false"


def _tls_section(tls: TlsSettings | None, port: int) -> list[str]:
    if tls is None:
        return []
    lines = [
        "[tlsSetting]",
        "tlsEnable=true",
        f"tlsPort={port}",
        f"tlsKeyStorePath={tls.keystore}",
        f"tlsKeyStorePassword={tls.password}",
        f"tlsTwoWayAuthEnable={_b(tls.two_way)}",
    ]
    if tls.truststore is not None:
        lines += [
            f"tlsTrustStorePath={tls.truststore}",
            f"tlsTrustStorePassword={tls.truststore_password}",
        ]
    return [*lines, ""]


def _zookeeper_section(name: str, addr: str, *extra: str) -> list[str]:
    return [
        f"[{name}]",
        "zkNodeRoot=/tubemq",
        f"zkServerAddr={addr}",
        "zkSessionTimeoutMs=30000",
        "zkConnectionTimeoutMs=30000",
        "zkSyncTimeMs=5000",
        "zkCommitPeriodMs=5000",
        *extra,
        "",
    ]


def _meta_bdb_section(m: MasterLayout) -> list[str]:
    return [
        "[meta_bdb]",
        "repGroupName=tubemqAioGroup",
        f"repNodeName={m.node_name}",
        f"repNodePort={m.ha_port}",
        f"metaDataPath={m.home / 'meta'}",
        f"repHelperHost={m.helpers or m.ha_addr}",
        "metaLocalSyncPolicy=3",
        "metaReplicaSyncPolicy=3",
        "repReplicaAckPolicy=1",
        "",
    ]


def render_master_ini(s: MasterSettings, m: MasterLayout) -> str:
    """Render master.ini (comments only on their own lines; ini4j keeps inline ones).

    Every master of an HA group gets the same ``repGroupName`` and its own ``repNodeName``,
    ``repNodePort`` and ``repHelperHost`` (BDB-JE replication: one active master, the others
    standing by and electing a new one by majority when it goes).

    The metadata store is BDB-JE (``[meta_bdb]``), or ZooKeeper (``[meta_zookeeper]``) when
    ``s.zookeeper`` is set (servers 1.x, one master; a master refuses both sections at once).

    Args:
        s: Master settings.
        m: Master layout.

    Returns:
        The file's text.
    """
    a = s.auth
    lines = [
        "[master]",
        f"hostName={m.host}",
        f"port={m.port}",
        f"webPort={m.web_port}",
        f"webResourcePath={m.home / 'resources'}",
        f"confModAuthToken={s.conf_mod_auth_token}",
        f"consumerBalancePeriodMs={s.consumer_balance_period_ms}",
        f"consumerHeartbeatTimeoutMs={s.consumer_heartbeat_timeout_ms}",
        f"producerHeartbeatTimeoutMs={s.producer_heartbeat_timeout_ms}",
        f"brokerHeartbeatTimeoutMs={s.broker_heartbeat_timeout_ms}",
        f"startProduceAuthenticate={_b(a.produce_authenticate)}",
        f"startProduceAuthorize={_b(a.produce_authorize)}",
        f"startConsumeAuthenticate={_b(a.consume_authenticate)}",
        f"startConsumeAuthorize={_b(a.consume_authorize)}",
        f"startVisitTokenCheck={_b(a.visit_token_check)}",
        f"authValidTimeStampPeriodMs={a.timestamp_period_ms}",
    ]
    if a.broker_visit_name:
        lines += [
            "needBrokerVisitAuth=true",
            f"visitName={a.broker_visit_name}",
            f"visitPassword={a.broker_visit_password}",
        ]
    if s.zookeeper:
        meta = _zookeeper_section("meta_zookeeper", s.zookeeper, "zkMasterCheckPeriodMs=5000")
    else:
        meta = _meta_bdb_section(m)
    lines += [
        "",
        *meta,
        "[prometheus]",
        "promEnable=false",
        "; unused: the 2.4.0 server binds 9081 whatever this says (a clash only logs an ERROR)",
        f"promHttpPort={m.prom_port}",
        "",
        *_tls_section(s.tls, m.tls_port),
    ]
    return "\n".join(lines) + "\n"


def render_broker_ini(s: MasterSettings, b: BrokerLayout, master_addr: str) -> str:
    """Render broker.ini (with a ``[zookeeper]`` section when ``s.zookeeper`` is set).

    Args:
        s: Master settings (heartbeat, auth, TLS are shared with brokers).
        b: Broker layout.
        master_addr: ``host:port[,host:port...]`` of every master's RPC listener.

    Returns:
        The file's text.
    """
    lines = [
        "[broker]",
        f"brokerId={b.broker_id}",
        f"hostName={b.host}",
        f"port={b.port}",
        f"webPort={b.web_port}",
        f"masterAddressList={master_addr}",
        f"primaryPath={b.home / 'data'}",
        "maxSegmentSize=268435456",
        "transferSize=524288",
        "maxIndexSegmentSize=22020096",
        f"heartbeatPeriodMs={s.broker_heartbeat_period_ms}",
        "consumerRegTimeoutMs=35000",
    ]
    if s.auth.broker_visit_name:
        lines += [
            "visitMasterAuth=true",
            f"visitName={s.auth.broker_visit_name}",
            f"visitPassword={s.auth.broker_visit_password}",
        ]
    lines += [
        "",
        "[prometheus]",
        "promEnable=false",
        f"promHttpPort={b.prom_port}",
        "",
        *_tls_section(s.tls, b.tls_port),
    ]
    if s.zookeeper:
        lines += _zookeeper_section("zookeeper", s.zookeeper, "zkCommitFailRetries=10")
    return "\n".join(lines) + "\n"


def render_log4j2() -> str:
    """Render a log4j2 config: INFO to ``${tubemq.log.path}/${tubemq.log.prefix}.log``.

    Returns:
        The XML text.
    """
    return """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <File name="file" fileName="${sys:tubemq.log.path}/${sys:tubemq.log.prefix}.log" append="true">
      <PatternLayout pattern="%d{ISO8601} %-5p [%t] %c{1}: %m%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Logger name="org.eclipse.jetty" level="WARN"/>
    <Root level="INFO"><AppenderRef ref="file"/></Root>
  </Loggers>
</Configuration>
"""


def write_web_templates(master_home: Path) -> None:
    """Create the two Velocity templates the master's web API needs (not shipped in the jar).

    Args:
        master_home: The master's directory; files go under ``resources/templates``.
    """
    base = master_home / "resources" / "templates"
    for sub, body in (("screen", "$sb\n"), ("layout", "$screen_placeholder\n")):
        (base / sub).mkdir(parents=True, exist_ok=True)
        (base / sub / "webapi.vm").write_text(body, encoding="utf-8")
