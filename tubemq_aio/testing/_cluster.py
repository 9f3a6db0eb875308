"""LocalCluster: a real Apache InLong TubeMQ cluster (1-3 masters + 1-3 brokers) on loopback.

``async with LocalCluster(topics=["t1"]) as cluster:`` then give ``cluster.master_addr`` to a
client. From a shell (the cluster keeps running in the background until ``down``)::

    python -m tubemq_aio.testing.cluster up [--brokers 3] [--masters 3] [--topic NAME[:PARTS]]
    python -m tubemq_aio.testing.cluster status | down

Servers are the released tubemq-server jars from Maven Central (cached in ``$TUBEMQ_AIO_CACHE``,
default ``~/.cache/tubemq-aio``) run with ``java``; see ``docs/local-cluster.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import shutil
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from tubemq_aio.protocol.legacy_framing import Framing
from tubemq_aio.testing import _topics
from tubemq_aio.testing._build import (
    BROKER_HOSTS,
    MAX_MASTERS,
    NodePlan,
    build_nodes,
    prepare_work_dir,
    register_brokers,
    set_aside_attempt,
)
from tubemq_aio.testing._config import AuthSettings, MasterSettings, TlsSettings
from tubemq_aio.testing._errors import ClusterError, NodeNotReadyError, PortConflictError
from tubemq_aio.testing._maven import DEFAULT_VERSION, find_tool, resolve_runtime
from tubemq_aio.testing._nodes import (
    BrokerNode,
    JvmLaunch,
    MasterNode,
    ServerNode,
    attach_tails,
    jvm_options,
)
from tubemq_aio.testing._ports import PortLease
from tubemq_aio.testing._service import AsyncService
from tubemq_aio.testing._topics import MASTER_TOPIC_NAME, MAX_TOPIC_PARTITIONS
from tubemq_aio.testing._versions import server_version
from tubemq_aio.testing._webapi import MasterWebApi
from tubemq_aio.testing._zookeeper import ZooKeeperNode
from tubemq_aio.testing.polling import check_seconds

__all__ = ["LocalCluster"]

log = logging.getLogger("tubemq_aio.testing")


class LocalCluster(AsyncService):
    """TubeMQ masters and ``brokers`` brokers running as child JVMs on loopback.

    Use it as an async context manager, or call :meth:`start` / :meth:`stop`. Every port is
    allocated freshly and reserved against the other processes of this user until :meth:`stop`
    (kept across a node's kill and restart, while the node is down also bound by a socket that
    does not listen, let go right before its JVM starts), so several clusters (and a user's
    own TubeMQ) can run side by side; a start that loses a port race anyway (another process
    binds a port first, see :class:`PortConflictError`) is retried on fresh ports within
    ``start_timeout``.
    Broker ``N`` listens on ``127.0.0.N``. All server logs go to :attr:`log_dir`.

    With ``masters=3`` the masters form one high-availability group the way the server's own
    configuration sets it up (BDB-JE replication, ``[meta_bdb]``): one is active, the others
    stand by and elect a new active master by majority when it goes. Brokers and clients are
    given every master's address (:attr:`master_addr` lists them all).

    The constructor takes keyword configuration like the SDK's clients (the public
    convention): every keyword has a default and the ``tubemq-aio cluster up`` flags mirror
    them; the master's knobs are collected into one frozen :class:`MasterSettings`
    (:attr:`settings`).

    Args:
        brokers: Number of brokers, 1 to 3.
        masters: Number of masters, 1 to 3 (3 survives the loss of any one; 2 survives none,
            as a BDB-JE majority of 2 is 2). Servers 1.x: 1 only.
        version: tubemq-server version to download and run: ``"2.4.0"`` (default),
            ``"1.2.0-incubating"`` or ``"1.1.0-incubating"`` (see ``SERVER_VERSIONS``). The 1.x
            servers also get a ZooKeeper node, and their clients must use :attr:`framing`.
        topics: Topics created before the brokers start (cheaper than :meth:`create_topic`
            later: they share the brokers' first ~35 s sync instead of each paying it).
        topic_partitions: Partitions per broker for ``topics``.
        work_dir: Directory for configs, data and logs (default: a new temp dir).
        keep_work_dir: Keep ``work_dir`` after a clean stop (it is always kept after a failure).
        cache_dir: Jar cache root (default ``$TUBEMQ_AIO_CACHE`` or ``~/.cache/tubemq-aio``).
        java: Java executable.
        mvn: Maven executable.
        master_port: Fixed master RPC port (default: a free one).
        master_web_port: Fixed master web API port (default: a free one).
        consumer_balance_period_ms: Master rebalance cycle.
        consumer_heartbeat_timeout_ms: Master's consumer timeout.
        producer_heartbeat_timeout_ms: Master's producer timeout.
        broker_heartbeat_timeout_ms: Master's broker timeout.
        broker_heartbeat_period_ms: Broker heartbeat period (drives how fast topics go live).
        conf_mod_auth_token: Token of modifying web API calls.
        auth: Authentication switches (default: all off).
        tls: Server TLS (extra listeners), or None.
        start_timeout: Seconds allowed for a JVM to come up (master API / broker register);
            also the time within which a start that lost a port race is begun again.
        ready_timeout: Seconds allowed for a broker or topic to become publishable.
        detached: Let the JVMs outlive this Python process (for the ``up`` CLI).
    """

    def __init__(
        self,
        brokers: int = 1,
        *,
        masters: int = 1,
        version: str = DEFAULT_VERSION,
        topics: Sequence[str] = (),
        topic_partitions: int = 3,
        work_dir: str | Path | None = None,
        keep_work_dir: bool = False,
        cache_dir: str | Path | None = None,
        java: str = "java",
        mvn: str = "mvn",
        master_port: int | None = None,
        master_web_port: int | None = None,
        consumer_balance_period_ms: int = 2000,
        consumer_heartbeat_timeout_ms: int = 30000,
        producer_heartbeat_timeout_ms: int = 45000,
        broker_heartbeat_timeout_ms: int = 25000,
        broker_heartbeat_period_ms: int = 2000,
        conf_mod_auth_token: str = "tubemq-aio",
        auth: AuthSettings | None = None,
        tls: TlsSettings | None = None,
        start_timeout: float = 60.0,
        ready_timeout: float = 120.0,
        detached: bool = False,
    ) -> None:
        """Configure the cluster; nothing runs until :meth:`start` (see class docstring).

        Raises:
            ValueError: an argument the cluster could not honour, named (checked here, before
                any JVM starts, where it failed tens of seconds into the start or never).
            UnsupportedVersionError: ``version`` is not one of ``SERVER_VERSIONS``.
        """
        _check_count("brokers", brokers, len(BROKER_HOSTS))
        _check_count("masters", masters, MAX_MASTERS)
        _check_count("topic_partitions", topic_partitions, MAX_TOPIC_PARTITIONS)
        if isinstance(topics, str):  # "a,b": two topics, as the clients read it; never letters
            topics = [t.strip() for t in topics.split(",") if t.strip()]
        for name in topics:
            if not isinstance(name, str) or not MASTER_TOPIC_NAME.fullmatch(name):
                raise ValueError(
                    f"topics: {name!r} is no topic name a TubeMQ master takes (2 to 64 "
                    "characters, a letter then letters, digits or _)"
                )
        for label, port in (("master_port", master_port), ("master_web_port", master_web_port)):
            if port is not None and (type(port) is not int or not 0 < port < 65536):
                raise ValueError(f"{label} must be None or a port in 1..65535, got {port!r}")
        check_seconds("LocalCluster", "start_timeout", start_timeout)
        check_seconds("LocalCluster", "ready_timeout", ready_timeout)
        self.spec = server_version(version)
        if self.spec.zookeeper and masters != 1:
            raise ValueError(
                f"masters must be 1 with tubemq-server {version}: the harness runs an HA group "
                "only with BDB-JE metadata (2.x)"
            )
        self.version = version
        self.settings = MasterSettings(
            consumer_balance_period_ms=consumer_balance_period_ms,
            consumer_heartbeat_timeout_ms=consumer_heartbeat_timeout_ms,
            producer_heartbeat_timeout_ms=producer_heartbeat_timeout_ms,
            broker_heartbeat_timeout_ms=broker_heartbeat_timeout_ms,
            broker_heartbeat_period_ms=broker_heartbeat_period_ms,
            conf_mod_auth_token=conf_mod_auth_token,
            auth=auth or AuthSettings(),
            tls=tls,
        )
        self._n_brokers = brokers
        self._n_masters = masters
        self._initial_topics = list(topics)
        self._topic_partitions = topic_partitions
        self._work_dir_arg = Path(work_dir) if work_dir is not None else None
        self.keep_work_dir = keep_work_dir
        self._cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._java = java
        self._mvn = mvn
        self._fixed_ports = (master_port, master_web_port)
        self._lease = PortLease()
        self.start_timeout = start_timeout
        self.ready_timeout = ready_timeout
        self.detached = detached
        self.work_dir = Path()
        self.lib_dir = Path()
        self.masters: list[MasterNode] = []
        self._api: MasterWebApi | None = None
        self.brokers: list[BrokerNode] = []
        #: The ZooKeeper node of a 1.x server (None for 2.x, or before :meth:`start`).
        self.zookeeper: ZooKeeperNode | None = None
        self.topics: dict[str, int] = {}
        self.bring_up_seconds = 0.0
        #: True from a successful :meth:`start` to :meth:`stop`.
        self._up = False

    @property
    def log_dir(self) -> Path:
        """Directory holding every server log (``<node>.log``) and JVM output (``<node>.out``)."""
        return self.work_dir / "logs"

    @property
    def framing(self) -> Framing:
        """The framing this server version needs: pass it as every client's ``framing``.

        ``"standard"`` for 2.x, ``"legacy-length"`` for 1.1.0 and 1.2.0 (docs/protocol/wire.md
        §1.7). Known before :meth:`start`.
        """
        return self.spec.framing

    @property
    def master(self) -> MasterNode | None:
        """Master 1 (the only one unless ``masters`` > 1), or None before :meth:`start`."""
        return self.masters[0] if self.masters else None

    @property
    def master_addr(self) -> str:
        """``"127.0.0.1:<port>[,127.0.0.1:<port>...]"`` of every master: pass it as a client's
        ``masters`` argument."""
        self._master()
        return ",".join(m.addr for m in self.masters)

    @property
    def master_tls_addr(self) -> str | None:
        """``host:port[,...]`` of every master's TLS listener, or None when TLS is off."""
        if self.settings.tls is None:
            return None
        self._master()
        return ",".join(f"{m.layout.host}:{m.layout.tls_port}" for m in self.masters)

    @property
    def web_api(self) -> MasterWebApi:
        """Client of the active master's HTTP admin API (for tests needing other admin calls);
        with an HA group it moves on to whichever master answers as the active one."""
        self._master()
        assert self._api is not None
        return self._api

    @property
    def nodes(self) -> list[ServerNode]:
        """The masters, the brokers and (servers 1.x) the ZooKeeper node."""
        zookeeper: list[ServerNode] = [self.zookeeper] if self.zookeeper else []
        return [*self.masters, *self.brokers, *zookeeper]

    def _master(self) -> MasterNode:
        if not self.masters:
            raise ClusterError("the cluster has not been started")
        return self.masters[0]

    async def active_master(self, timeout: float | None = None) -> MasterNode:
        """Wait until one master of the group is active and return it.

        Args:
            timeout: Seconds (default ``start_timeout``).

        Returns:
            The active master.

        Raises:
            NodeNotReadyError: If no master is active in time (names master 1's log).
        """
        limit = self.start_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        while True:
            for node in self.masters:
                if await node.is_active():
                    return node
            if time.monotonic() >= deadline:
                raise NodeNotReadyError(
                    f"no master became active within {limit:.0f}s", self._master().log_file
                )
            await asyncio.sleep(0.25)

    async def __aenter__(self) -> LocalCluster:
        """Start the cluster (see :meth:`start`)."""
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop every process, even when the body failed or was cancelled."""
        await self.stop(failed=exc is not None)

    async def start(self) -> None:
        """Download the runtime if needed, start master and brokers, create the initial topics.

        On any failure every process started so far is killed, and the error carries the tails
        of all server logs.

        Raises:
            ToolNotFoundError: ``java`` or ``mvn`` is missing.
            RuntimeResolveError: Maven cannot provide the requested version.
            PortInUseError: A fixed port is taken (``PortConflictError``: a port race was
                still lost after ``start_timeout``).
            ClusterStartError: A server did not start (``NodeNotReadyError`` on timeout).

        Nothing when it runs; a start while another is under way waits for it, and a stop waits
        for a start under way.
        """
        async with self._lifecycle_lock():
            if self._up:
                return
            t0 = time.monotonic()
            try:
                await self._start()
            except ClusterError as err:
                details = attach_tails(err, self.nodes)
                await self._emergency_stop()
                raise details from err.__cause__
            except BaseException:
                await self._emergency_stop()
                raise
            self.bring_up_seconds = time.monotonic() - t0
            self._up = True

    async def _start(self) -> None:
        java = find_tool(self._java, "install a Java 17 runtime (`make system-deps`)")
        self.lib_dir = await resolve_runtime(self.version, cache_dir=self._cache_dir, mvn=self._mvn)
        self.work_dir = prepare_work_dir(self._work_dir_arg)
        deadline = time.monotonic() + self.start_timeout
        attempt = 1
        while True:
            try:
                await self._start_nodes(java)
                return
            except PortConflictError as err:
                if time.monotonic() >= deadline:
                    raise
                log.warning(
                    "cluster start %d lost a port race; retrying on fresh ports: %s",
                    attempt,
                    err.message,
                )
            await self._emergency_stop()
            self.masters, self.brokers, self.zookeeper, self._api = [], [], None, None
            self.topics = {}
            set_aside_attempt(self.work_dir, attempt)
            prepare_work_dir(self.work_dir)
            attempt += 1

    async def _start_nodes(self, java: str) -> None:
        if self.spec.zookeeper:
            await self._start_zookeeper(java)
        self._build_nodes(java)
        first, *others = self.masters
        await first.start()
        if others:  # they join the group master 1 founded, as standbys
            await asyncio.gather(*(m.start() for m in others))
            await self.active_master()
        await register_brokers(self.settings, self.web_api, self.brokers)
        if self._initial_topics:
            await self._add_topics(self._initial_topics, self._topic_partitions, 1)
        await asyncio.gather(*(b.start() for b in self.brokers))

    async def _start_zookeeper(self, java: str) -> None:
        self.zookeeper = ZooKeeperNode(
            self.work_dir / "zookeeper",
            "127.0.0.1",
            self._lease.take(1)[0],
            JvmLaunch(
                java,
                str(self.lib_dir / "*"),
                self.log_dir,
                self.work_dir / "log4j2.xml",
                self.detached,
            ),
        )
        self.zookeeper.start_timeout = self.start_timeout
        await self.zookeeper.start()
        self.settings = dataclasses.replace(self.settings, zookeeper=self.zookeeper.addr)

    def _build_nodes(self, java: str) -> None:
        fixed = self._fixed_ports
        plan = NodePlan(
            self.work_dir,
            self.lib_dir,
            java,
            self._n_brokers,
            *fixed,
            self.detached,
            masters=self._n_masters,
        )
        self.masters, self.brokers, self._api = build_nodes(self.settings, plan, self._lease)
        for master in self.masters:
            master.start_timeout = self.start_timeout
            master.standby_ok = self._n_masters > 1
        for broker in self.brokers:
            broker.start_timeout = self.start_timeout
            broker.ready_timeout = self.ready_timeout
            broker.ready_probe = self._broker_probe(broker)

    async def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until every broker is registered and every topic publishable (e.g. after a
        master restart, which brokers survive by re-registering).

        Args:
            timeout: Seconds per broker (default ``ready_timeout``).
        """
        for broker in self.brokers:
            await broker.wait_ready(timeout)

    async def stop(self, *, failed: bool = False) -> None:
        """Stop every server gracefully (SIGKILL after a grace period); remove the work dir.

        Args:
            failed: Keep the work dir (logs) for inspection.
        """
        async with self._lifecycle_lock():
            self._up = False
            await self._stop(failed)

    async def _stop(self, failed: bool) -> None:
        nodes = [*self.brokers, *self.masters]
        nodes += [self.zookeeper] if self.zookeeper else []
        try:
            await asyncio.gather(*(b.stop(timeout=10.0) for b in self.brokers))
            await asyncio.gather(*(m.stop(timeout=10.0) for m in self.masters))
            if self.zookeeper is not None:
                await self.zookeeper.stop(timeout=10.0)
        finally:
            for node in nodes:
                node.process.kill_now()
                node.release_ports()
            self._lease.release()
        owned = self._work_dir_arg is None and self.work_dir != Path()  # our temp dir
        if owned and not (failed or self.keep_work_dir or self.detached):
            shutil.rmtree(self.work_dir, ignore_errors=True)

    async def _emergency_stop(self) -> None:
        for node in self.nodes:
            node.process.kill_now()
        try:
            with contextlib.suppress(Exception):
                await asyncio.shield(asyncio.gather(*(n.kill() for n in self.nodes)))
        finally:
            for node in self.nodes:
                node.release_ports()
            self._lease.release()

    async def create_topic(self, name: str, partitions: int = 3, *, stores: int = 1) -> None:
        """Create a topic on every broker and wait until it is publishable.

        A topic added to running brokers takes ~35 s to go live (a fixed 30 s step in the
        master); create several at once with :meth:`create_topics` to pay that only once.

        Args:
            name: Topic name (``^[a-zA-Z]\\w+$``, at most 64 chars).
            partitions: Partitions per broker and store.
            stores: Topic stores per broker.

        Raises:
            WebApiError: If the master refuses the topic.
            NodeNotReadyError: If it is not publishable within ``ready_timeout``.
        """
        await self.create_topics([name], partitions, stores=stores)

    async def create_topics(
        self, names: Sequence[str], partitions: int = 3, *, stores: int = 1
    ) -> None:
        """Create several topics in one master call and wait until all are publishable.

        Args:
            names: Topic names.
            partitions: Partitions per broker and store.
            stores: Topic stores per broker.
        """
        await self._add_topics(list(names), partitions, stores)
        await self.wait_topics_ready(names)

    async def _add_topics(self, names: list[str], partitions: int, stores: int) -> None:
        ids = [b.broker_id for b in self.brokers]
        await _topics.add_topics(self.web_api, names, ids, partitions, stores)
        for name in names:
            self.topics[name] = partitions * stores * len(self.brokers)

    async def topic_ready(self, name: str) -> bool:
        """Tell whether ``name`` accepts publish and subscribe on all its partitions.

        Args:
            name: Topic name.

        Returns:
            True when the master reports it fully publishable and subscribable.
        """
        return await _topics.topic_ready(self.web_api, name)

    async def wait_topics_ready(self, names: Sequence[str], timeout: float | None = None) -> None:
        """Wait until every topic in ``names`` is publishable.

        Args:
            names: Topic names.
            timeout: Seconds (default ``ready_timeout``).

        Raises:
            NodeNotReadyError: On timeout (names the master log).
            ClusterStartError: If a broker died meanwhile.
        """
        limit = self.ready_timeout if timeout is None else timeout
        log = self._master().log_file
        await _topics.wait_topics_ready(self.web_api, names, lambda: self.brokers, limit, log)

    def _broker_probe(self, broker: BrokerNode) -> Callable[[], Awaitable[bool]]:
        async def probe() -> bool:
            status = await broker.run_status()
            if status.get("runStatus") != "running" or status.get("isBrokerOnline") != "true":
                return False
            if not self.topics:
                return status.get("subStatus") == "idle"
            return all([await self.topic_ready(name) for name in self.topics])

        return probe

    async def delete_topic(self, name: str) -> None:
        """Delete a topic (stop publish/subscribe, soft delete, remove) and wait until it is gone.

        Args:
            name: Topic name.

        Raises:
            WebApiError: If the master refuses.
        """
        await _topics.delete_topic(self.web_api, name, [b.broker_id for b in self.brokers])
        self.topics.pop(name, None)

    def java_tool_argv(self, main_class: str, *args: str, heap: str = "-Xmx256m") -> list[str]:
        """Build a command line running ``main_class`` from the server classpath.

        Handy for the Java CLI tools shipped in tubemq-server (``...tools.cli.CliProducer``).

        Args:
            main_class: Fully qualified Java class.
            *args: Program arguments.
            heap: Heap option.

        Returns:
            argv list for :func:`asyncio.create_subprocess_exec`.
        """
        opts = jvm_options(self.log_dir, "tool", self.work_dir / "log4j2.xml")
        return [
            self._java,
            heap,
            "-XX:+UseSerialGC",
            *opts,
            "-cp",
            str(self.lib_dir / "*"),
            main_class,
            *args,
        ]

    def log_tails(self, lines: int = 40) -> str:
        """Return the last ``lines`` of every server log and JVM output, labelled by file.

        Args:
            lines: Lines per file.

        Returns:
            Text ready to print.
        """
        return "\n".join(t for t in (n.tail(lines) for n in self.nodes) if t)

    def describe(self) -> dict[str, Any]:
        """Return a JSON-able description (addresses, pids, dirs) of the running cluster.

        Returns:
            The description (also what the ``up`` CLI saves as its state file).
        """
        return {
            "version": self.version,
            "framing": self.framing,
            "master_addr": self.master_addr,
            "masters": len(self.masters),
            "master_web": self.web_api.url,
            "work_dir": str(self.work_dir),
            "log_dir": str(self.log_dir),
            "topics": self.topics,
            "nodes": [
                {"name": n.name, "pid": n.pid, "addr": getattr(n, "addr", "")} for n in self.nodes
            ],
            "bring_up_seconds": round(self.bring_up_seconds, 1),
        }

    def __repr__(self) -> str:
        """Show the master address and node states."""
        return f"<LocalCluster nodes={[n.process for n in self.nodes]}>"


def _check_count(name: str, value: object, most: int) -> None:
    if type(value) is not int or not 1 <= value <= most:
        raise ValueError(f"{name} must be an int in 1..{most}, got {value!r}")
