"""Master and broker nodes of a local cluster: JVM command lines, start-up and readiness."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from tubemq_aio.testing._config import BrokerLayout, MasterLayout
from tubemq_aio.testing._errors import (
    ClusterError,
    ClusterStartError,
    NodeNotReadyError,
    PortConflictError,
    WebApiError,
)
from tubemq_aio.testing._identity import MASTER_PROBE, broker_identity, master_identity
from tubemq_aio.testing._port_hold import PortHolds
from tubemq_aio.testing._process import JavaProcess, tail
from tubemq_aio.testing._webapi import MasterWebApi

__all__ = ["BrokerNode", "JvmLaunch", "MasterNode", "ServerNode", "jvm_options"]

_PKG = "org.apache.inlong.tubemq.server.tools"
MASTER_MAIN = f"{_PKG}.MasterStartup"
BROKER_MAIN = f"{_PKG}.BrokerStartup"

# Java 17 flags replacing the upstream env.sh (whose CMS/GC-log flags Java 17 rejects).
_JAVA17 = (
    "-XX:+ExitOnOutOfMemoryError",
    "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "-Dsun.net.inetaddr.ttl=3",
    "-Dsun.net.inetaddr.negative.ttl=1",
)
_BIND_ERROR = re.compile(r"BindException|Address already in use")
_REGISTER_ERROR = re.compile(r"Register to master failed[^\n]*")
_STARTED = "Start tube server successfully"


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read_from(path: Path, offset: int) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def jvm_options(log_dir: Path, prefix: str, log4j_conf: Path) -> list[str]:
    """Return the JVM options shared by every server and tool JVM.

    Args:
        log_dir: Directory of the log4j2 file (``<prefix>.log``).
        prefix: Log file prefix, e.g. ``"broker1"``.
        log4j_conf: The log4j2 configuration file.

    Returns:
        Options to put before ``-cp``.
    """
    return [
        *_JAVA17,
        f"-Dlog4j.configurationFile={log4j_conf}",
        f"-Dtubemq.log.path={log_dir}",
        f"-Dtubemq.log.prefix={prefix}",
    ]


@dataclass(frozen=True, slots=True)
class JvmLaunch:
    """How every server JVM of one local cluster is started.

    Attributes:
        java: The ``java`` executable.
        classpath: The JVM's ``-cp`` (the cluster's ``lib/*``).
        log_dir: Directory of the servers' logs and JVM outputs.
        log4j_conf: The log4j2 configuration file.
        detached: The JVMs outlive this Python process (``tubemq-aio cluster up``).
    """

    java: str
    classpath: str
    log_dir: Path
    log4j_conf: Path
    detached: bool


class ServerNode:
    """A TubeMQ server process (master or broker) that can be started, stopped and killed.

    Attributes:
        name: ``"master"`` or ``"broker<N>"``.
        log_file: The server's log4j2 log.
        out_file: The JVM's stdout/stderr (start-up exceptions land here).
        process: The current JVM.
    """

    main_class = ""

    def __init__(self, name: str, launch: JvmLaunch, *, heap: list[str], ini: Path) -> None:
        """Prepare the command line (``heap``: the JVM's memory options; ``ini``: the server's
        configuration file); nothing starts until :meth:`start`."""
        self.name = name
        log_dir = launch.log_dir
        self.log_file = log_dir / f"{name}.log"
        self.out_file = log_dir / f"{name}.out"
        options = jvm_options(log_dir, name, launch.log4j_conf)
        argv = [launch.java, *heap, *options, "-cp", launch.classpath]
        argv += [self.main_class, *self.config_args(ini)]
        self.process = JavaProcess(name, argv, self.out_file, ini.parent, launch.detached)
        self.start_timeout = 60.0
        self._log_mark = 0
        self._holds = PortHolds()

    def config_args(self, ini: Path) -> list[str]:
        """Return the program arguments naming the configuration file (``-f <ini>``).

        Args:
            ini: The configuration file.

        Returns:
            Arguments after the main class.
        """
        return ["-f", str(ini)]

    @property
    def listen_ports(self) -> tuple[int, ...]:
        """The ports the server listens on, held while it is down between a stop (or kill)
        and the next start (none here; the subclasses name theirs)."""
        return ()

    @property
    def held_ports(self) -> tuple[int, ...]:
        """The ports held now for the next start (see :meth:`release_ports`)."""
        return self._holds.held

    def release_ports(self) -> None:
        """Let the ports held since a stop or kill go (the cluster's stop for good does)."""
        self._holds.release()

    @property
    def pid(self) -> int | None:
        """Process id of the JVM (None before the first start)."""
        return self.process.pid

    @property
    def running(self) -> bool:
        """True while the JVM is alive."""
        return self.process.running

    async def start(self) -> None:
        """Start the JVM and wait until the server is ready.

        Raises:
            ClusterStartError: If it fails (the JVM is killed first).
        """
        if self.running:
            return
        mark = self._log_size()
        self._log_mark = _size(self.log_file)
        self._holds.release()  # right before the JVM binds them (seconds later)
        self.process.spawn()
        try:
            await self._wait_started(mark)
        except BaseException:
            await self.process.kill()
            raise

    async def stop(self, timeout: float = 15.0) -> None:
        """Stop gracefully (SIGTERM, then SIGKILL after ``timeout`` seconds); its ports stay
        held for the next :meth:`start` (:meth:`release_ports` lets them go).

        Args:
            timeout: Seconds allowed for a clean shutdown.
        """
        await self.process.stop(timeout)
        self._hold_ports()

    async def kill(self) -> None:
        """Kill the JVM with SIGKILL (a crash, for fault tests)."""
        await self.process.kill()
        self._hold_ports()

    def _hold_ports(self) -> None:
        """Keep the ports of the JVM that exited bound until the next :meth:`start`: between a
        stop and a restart on the same ports the kernel could give one to another socket, and
        the restart would fail to bind it."""
        if not self.running:
            self._holds.hold(self.listen_ports)

    async def restart(self) -> None:
        """Stop gracefully, then start again and wait until ready."""
        await self.stop()
        await self.start()

    def tail(self, lines: int = 40) -> str:
        """Return the tails of this node's log and stdout files, labelled.

        Args:
            lines: Lines per file.

        Returns:
            Text ready to print.
        """
        parts = []
        for path in (self.log_file, self.out_file):
            text = tail(path, lines)
            if text:
                parts.append(f"----- {path} (last {lines} lines) -----\n{text}")
        return "\n".join(parts)

    def _log_size(self) -> int:
        return _size(self.out_file)

    def _new_output(self, mark: int) -> str:
        return _read_from(self.out_file, mark)

    def _new_log(self) -> str:
        return _read_from(self.log_file, self._log_mark)

    def _check_alive(self, mark: int) -> None:
        out = self._new_output(mark)
        if _BIND_ERROR.search(out):
            raise PortConflictError(
                f"{self.name} could not bind a port: address in use", self.out_file
            )
        if not self.running:
            raise ClusterStartError(
                f"{self.name} exited during start-up (exit code {self.process.returncode})",
                self.out_file,
            )
        found = _REGISTER_ERROR.search(out)
        if found:
            raise ClusterStartError(f"{self.name}: {found.group(0)}", self.out_file)

    async def _poll(
        self, mark: int, timeout: float, what: str, probe: Callable[[], Awaitable[bool]]
    ) -> None:
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive(mark)
            try:
                if await probe():
                    return
            except (WebApiError, OSError):
                pass
            if time.monotonic() >= deadline:
                raise NodeNotReadyError(
                    f"{self.name} did not {what} within {timeout:.0f}s", self.log_file
                )
            await asyncio.sleep(0.25)

    async def _wait_started(self, mark: int) -> None:
        raise NotImplementedError


class MasterNode(ServerNode):
    """A TubeMQ master (BDB metadata store, RPC + web API), alone or one of an HA group.

    Attributes:
        layout: Host, ports and directory.
        api: Web API client of this master only (a standby refuses most calls).
    """

    main_class = MASTER_MAIN

    def __init__(
        self,
        layout: MasterLayout,
        api: MasterWebApi,
        launch: JvmLaunch,
        *,
        heap: list[str],
        name: str = "master",
    ) -> None:
        """Build the node (nothing starts yet)."""
        super().__init__(name, launch, heap=heap, ini=layout.home / "master.ini")
        self.layout = layout
        self.api = api
        #: Count a standby's refusal as "started" (set for every master of an HA group).
        self.standby_ok = False

    @property
    def listen_ports(self) -> tuple[int, ...]:
        """RPC, web, replication and TLS ports."""
        lay = self.layout
        return (lay.port, lay.web_port, lay.ha_port, lay.tls_port)

    @property
    def addr(self) -> str:
        """``host:port`` of the RPC listener (a client's ``masters`` argument)."""
        return f"{self.layout.host}:{self.layout.port}"

    async def is_active(self) -> bool:
        """Tell whether this master is the active one of its group (it answers its web API).

        Returns:
            False for a standby, a master still starting, or one not running.
        """
        if not self.running:
            return False
        try:
            reply = await self.api.raw("admin_query_server_version", timeout=2.0)
        except (OSError, ValueError):
            return False
        return bool(reply.get("result"))

    async def _wait_started(self, mark: int) -> None:
        # A call only a master answers, whose reply names our ports: a broker or another
        # cluster's master on our web port fails the start (PortConflictError), see _identity.
        lay = self.layout
        own = (lay.port, lay.ha_port)

        async def probe() -> bool:
            reply = await self.api.raw(MASTER_PROBE, timeout=2.0)
            return master_identity(
                reply,
                web_port=lay.web_port,
                own_ports=own,
                standby_ok=self.standby_ok,
                log_file=self.log_file,
            )

        await self._poll(mark, self.start_timeout, "answer its web API", probe)


class BrokerNode(ServerNode):
    """A TubeMQ broker.

    Attributes:
        layout: Id, host, ports and directory.
        api: The master's web API client (readiness is asked from the master).
        own_api: The broker's own web API client: after each start it must answer as a broker
            of ``layout.host`` (another node on its web port fails the start).
        ready_timeout: Seconds allowed from JVM start to "registered and publishing".
    """

    main_class = BROKER_MAIN

    def __init__(
        self, layout: BrokerLayout, api: MasterWebApi, launch: JvmLaunch, *, heap: list[str]
    ) -> None:
        """Build the node (nothing starts yet)."""
        name = f"broker{layout.broker_id}"
        super().__init__(name, launch, heap=heap, ini=layout.home / "broker.ini")
        self.layout = layout
        self.api = api
        self.own_api = MasterWebApi(layout.host, layout.web_port, api.token, self.log_file)
        self.ready_timeout = 120.0
        #: Set by the cluster: "every topic on this broker is publishable" (default: idle).
        self.ready_probe: Callable[[], Awaitable[bool]] | None = None

    @property
    def listen_ports(self) -> tuple[int, ...]:
        """RPC, web and TLS ports."""
        lay = self.layout
        return (lay.port, lay.web_port, lay.tls_port)

    @property
    def broker_id(self) -> int:
        """The broker's id in the master's records."""
        return self.layout.broker_id

    @property
    def addr(self) -> str:
        """``host:port`` of the broker's RPC listener."""
        return f"{self.layout.host}:{self.layout.port}"

    async def run_status(self) -> dict[str, object]:
        """Return the master's view of this broker (``admin_query_broker_run_status``).

        Returns:
            The item for this broker (its ``brokerId`` checked), e.g. ``{"brokerId": 1,
            "runStatus": "running", "subStatus": "idle", ...}``; empty if the master has none.
        """
        items = await self.api.call("admin_query_broker_run_status", brokerId=self.broker_id)
        mine = [item for item in items if item.get("brokerId") == self.broker_id]
        return mine[0] if mine else {}

    async def _wait_started(self, mark: int) -> None:
        async def registered() -> bool:
            return _STARTED in self._new_log()

        async def itself() -> bool:
            reply = await self.own_api.raw("admin_get_metrics_info", timeout=2.0)
            lay = self.layout
            return broker_identity(
                reply, web_port=lay.web_port, host=lay.host, log_file=self.log_file
            )

        await self._poll(mark, self.start_timeout, "register with the master", registered)
        await self._poll(mark, self.start_timeout, "answer its web API as itself", itself)
        probe = self.ready_probe or self._idle
        await self._poll(mark, self.ready_timeout, "make its topics publishable", probe)

    async def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until the master reports this broker registered and its topics publishable.

        Useful after a master restart (brokers re-register on their own) or a fault.

        Args:
            timeout: Seconds (default ``ready_timeout``).

        Raises:
            NodeNotReadyError: On timeout.
            ClusterStartError: If the broker process exits meanwhile.
        """
        probe = self.ready_probe or self._idle
        limit = self.ready_timeout if timeout is None else timeout
        await self._poll(self._log_size(), limit, "become ready", probe)

    async def _idle(self) -> bool:
        st = await self.run_status()
        return st.get("runStatus") == "running" and st.get("subStatus") == "idle"


def attach_tails(err: ClusterError, nodes: list[ServerNode], lines: int = 40) -> ClusterError:
    """Return ``err`` with the log tails of ``nodes`` appended.

    Args:
        err: The error.
        nodes: Nodes whose logs to show.
        lines: Lines per file.

    Returns:
        A copy of the error carrying the tails.
    """
    tails = "\n".join(t for t in (n.tail(lines) for n in nodes) if t)
    return err.with_details(tails)
