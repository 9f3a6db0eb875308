"""A single ZooKeeper node for servers 1.x (master metadata and broker consumer offsets).

Run from the server runtime's own classpath (ZooKeeper 3.6.3 jars, see runtime-pom-1.x.xml),
on a loopback port from the harness's port allocator, owned and stopped by the cluster.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tubemq_aio.testing._identity import zookeeper_identity
from tubemq_aio.testing._nodes import JvmLaunch, ServerNode

__all__ = ["ZOOKEEPER_MAIN", "ZooKeeperNode", "render_zoo_cfg"]

ZOOKEEPER_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
ZOOKEEPER_HEAP = ("-Xms32m", "-Xmx256m", "-XX:+UseSerialGC")


def render_zoo_cfg(home: Path, host: str, port: int) -> str:
    """Render a standalone ZooKeeper configuration (no admin server; ``ruok``, ``srvr`` and
    ``conf`` allowed).

    Args:
        home: Node directory; data goes under ``home/data``.
        host: Loopback address the client listener binds.
        port: Client port.

    Returns:
        The file's text.
    """
    return "\n".join(
        [
            "tickTime=2000",
            f"dataDir={home / 'data'}",
            f"clientPort={port}",
            f"clientPortAddress={host}",
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr,conf",
            "",
        ]
    )


async def _ask(host: str, port: int, word: str, timeout: float) -> bytes:
    """Send a ZooKeeper four-letter word and return the whole answer."""
    async with asyncio.timeout(timeout):
        reader, writer = await asyncio.open_connection(host, port)
    try:
        async with asyncio.timeout(timeout):
            writer.write(word.encode("ascii"))
            await writer.drain()
            return await reader.read()
    finally:
        writer.close()


class ZooKeeperNode(ServerNode):
    """One standalone ZooKeeper server JVM.

    Attributes:
        host: Loopback address of the client listener.
        port: Client port.
        home: Directory of ``zoo.cfg`` and the data.
    """

    main_class = ZOOKEEPER_MAIN

    def __init__(
        self,
        home: Path,
        host: str,
        port: int,
        launch: JvmLaunch,
        *,
        heap: list[str] | None = None,
    ) -> None:
        """Write ``zoo.cfg`` (nothing starts yet); ``heap`` defaults to a small one."""
        home.mkdir(parents=True, exist_ok=True)
        cfg = home / "zoo.cfg"
        cfg.write_text(render_zoo_cfg(home, host, port), encoding="utf-8")
        heap = list(ZOOKEEPER_HEAP) if heap is None else heap
        super().__init__("zookeeper", launch, heap=heap, ini=cfg)
        self.host = host
        self.port = port
        self.home = home

    @property
    def listen_ports(self) -> tuple[int, ...]:
        """The client port."""
        return (self.port,)

    def config_args(self, ini: Path) -> list[str]:
        """Return ``[<zoo.cfg>]``: ZooKeeper takes the file as its only argument."""
        return [str(ini)]

    @property
    def addr(self) -> str:
        """``host:port`` of the client listener (the servers' ``zkServerAddr``)."""
        return f"{self.host}:{self.port}"

    async def _wait_started(self, mark: int) -> None:
        # ``conf`` names the data directory: another cluster's ZooKeeper on our port fails the
        # start (PortConflictError) instead of passing for ours.
        async def probe() -> bool:
            if await _ask(self.host, self.port, "ruok", 2.0) != b"imok":
                return False
            answer = await _ask(self.host, self.port, "conf", 2.0)
            data_dir = self.home / "data"
            return zookeeper_identity(
                answer, port=self.port, data_dir=data_dir, log_file=self.out_file
            )

        await self._poll(mark, self.start_timeout, "answer 'ruok'", probe)
